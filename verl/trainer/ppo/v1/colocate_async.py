"""``trainer.v1.trainer_mode=colocate_async``: the next batch is generated while the current one trains.

The schedule is logical, not wall-clock, so a run gives the same bits every time:

- a *round* is one generation call: the prompts the trainer asks for (one batch, or one more DAPO round);
- when the trainer asks for round ``r`` at policy version ``V`` (``V`` actor updates so far), every round up to
  ``r + lag`` is submitted, each with the weights of version ``V`` (``lag`` is ``colocate_async.num_warmup_batches``);
- rounds are generated in order, one at a time, by the ahead engine (`verl.workers.rollout.ahead`: a copy of the
  policy that changes only when handed a version) in a background thread, while the trainer trains.

So step ``k`` (one round each) trains on a batch sampled by version ``max(0, k - 1 - lag)``: ``lag=0`` is the
synchronous trainer, bit for bit (the trainer waits for each round it submits); ``lag=1`` is one-step-off. Which
version samples which round, and with which sampling keys, never depends on timing: only how long the trainer
waits does. A checkpoint waits for the rounds in flight and saves them, so a resumed run trains on the batches the
uninterrupted run would have.

Partial rollout (``trainer.v1.partial_rollout_tokens=k``, ``lag >= 1``): a round generated ahead stops after ``k``
response tokens; each time the trainer publishes a newer version, every round still ahead generates its next ``k``
tokens under it, and the round the trainer takes is finished under the trainer's current version (its kept tokens
prefilled, `verl.workers.rollout.partial`). So a trajectory's tokens come from up to ``lag + 1`` versions, the newest
being the one it is trained at, and where the cuts fall is still logical: the same bits every run.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from verl.protocol import DataProto
from verl.workers.rollout.partial import PartialRound

__all__ = ["AheadGeneration", "ROUND_TIMEOUT_S", "payload_bytes"]

# The longest the trainer waits for one round before it stops with a line naming the round (a hung engine must not
# hang the run silently); far above any round of the CPU tasks, and a GPU round of long reasoning.
ROUND_TIMEOUT_S = 3600.0


@dataclass
class _Round:
    number: int  # 1-based, in submission order
    version: int  # the policy version that samples it
    prompts: DataProto  # the prompts' columns (uid set), one row per prompt
    future: Future
    saved: DataProto | None = field(default=None)  # a round restored from a checkpoint: its output
    partial: PartialRound | None = field(default=None)  # partial rollout: the round's segments so far
    segment_version: int = -1  # the version that generated its last segment


def payload_bytes(weights: Any) -> int:
    """The bytes of the tensors in a version's hand-over (a dict of tensors, or of such dicts)."""
    if isinstance(weights, dict):
        return sum(payload_bytes(v) for v in weights.values())
    return weights.numel() * weights.element_size() if hasattr(weights, "numel") else 0


class AheadGeneration:
    """Rounds generated ``lag`` requests ahead on the actor worker's ahead engine (see the module docstring).

    ``wg``: the actor-rollout worker group (``init_ahead_rollout``, ``policy_weights``, ``load_ahead_weights``,
    ``generate_sequences_ahead``, ``ahead_rng_state``, ``set_ahead_rng_state``), or standalone replicas behind the
    same calls (`verl.trainer.ppo.v1.separate_async`); ``max_rounds``: no round past it is generated ahead."""

    def __init__(
        self,
        wg: Any,
        lag: int,
        max_rounds: int | None = None,
        timeout_s: float = ROUND_TIMEOUT_S,
        partial_tokens: int = 0,
        response_length: int = 0,
        agent_loop: Callable[[Any], Any] | None = None,
        agent_keys: bool = False,
        agent_rng: random.Random | None = None,
    ):
        self.wg, self.lag, self.max_rounds, self.timeout_s = wg, int(lag), max_rounds, timeout_s
        # at lag 0 no version changes while a round is generated: nothing to cut
        self.partial_tokens = int(partial_tokens) if self.lag > 0 else 0
        self.response_length = int(response_length)
        self.wg.init_ahead_rollout()
        # the agent loop (multi_turn): an AgentLoopWorker over the ahead engine, built once the engine exists
        self.agent = agent_loop(wg) if agent_loop is not None else None
        # each batch carries the seed key of its agent loops (run here by `agent`, or by the replicas that get it)
        self.agent_keys = agent_keys or self.agent is not None
        # where the keys come from: the run's Python RNG, as the sync trainer's agent loop draws them (in process), or
        # a generator of their own (on Ray, whose driver draws from the global one at times of its own choosing)
        self.agent_rng = agent_rng
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verl-ahead-rollout")
        self._rounds: deque[_Round] = deque()
        self.submitted = 0
        self._weights: tuple[int, dict] | None = None  # the last published version and its tensors
        self._stats_lock = threading.Lock()
        self._busy_s = self._sync_s = 0.0  # the engine's generation and weight-load seconds since the last report
        self._publish_s = 0.0  # the controller's seconds copying versions out of the actor
        self._publish_mb = 0.0  # and the megabytes those versions weighed
        self._idle_since: float | None = None  # when the engine last ran out of work
        self._idle_s = 0.0

    # ------------------------------------------------------------------------------------------------ the schedule
    def next_round(
        self, version: int, new_round: Callable[[], tuple[DataProto, DataProto]]
    ) -> tuple[DataProto, DataProto, int]:
        """The next round's prompts (uid set) and generated rows, and the version that sampled them. First keeps
        ``lag`` rounds beyond it in flight, each sampled by ``version``; ``new_round()`` gives a round's prompt
        columns and its generation batch (``rollout.n`` rows per prompt). With partial rollout the version is the
        per-row (first, last) pair."""
        if self.partial_tokens:
            return self._next_partial_round(version, new_round)
        while not self._rounds or (
            len(self._rounds) < 1 + self.lag and (self.max_rounds is None or self.submitted < self.max_rounds)
        ):
            self._submit(version, *new_round())
        rnd = self._rounds.popleft()
        return rnd.prompts, self._result(rnd), rnd.version

    def _next_partial_round(self, version: int, new_round: Callable[[], tuple[DataProto, DataProto]]) -> tuple:
        """`next_round` with partial rollout: the trainer's round is finished under ``version`` first, then every
        round ahead generates its next segment under it, then new rounds start (see the module docstring)."""
        if not self._rounds:
            self._submit(version, *new_round())
        rnd = self._rounds.popleft()
        self._segment(rnd, version, to_end=True)
        for ahead in self._rounds:
            if ahead.segment_version < version:
                self._segment(ahead, version, to_end=False)
        while len(self._rounds) < self.lag and (self.max_rounds is None or self.submitted < self.max_rounds):
            self._submit(version, *new_round())
        self._result(rnd)
        output, versions = rnd.partial.result()
        return rnd.prompts, output, versions

    def _submit(self, version: int, prompts: DataProto, gen_batch: DataProto) -> None:
        self.submitted += 1
        if self.partial_tokens:
            rnd = _Round(self.submitted, version, prompts, Future())
            rnd.partial = PartialRound(gen_batch, self.response_length)
            self._rounds.append(rnd)
            self._segment(rnd, version, to_end=False)
            return
        weights = self._publish(version)
        future = self._executor.submit(self._generate, self._keyed(gen_batch), weights, version)
        self._rounds.append(_Round(self.submitted, version, prompts, future))

    def _keyed(self, gen_batch: DataProto) -> DataProto:
        if self.agent_keys:  # drawn on the trainer's thread, in request order, as the sync trainer draws it
            gen_batch.meta_info["agent_call_key"] = (self.agent_rng or random).getrandbits(63)
        return gen_batch

    def generate_now(self, gen_batch: DataProto, version: int) -> DataProto:
        """``gen_batch`` generated by ``version`` now, after the rounds already queued (validation through the ahead
        engine or the replicas: the agent loop on the Ray backend has no other per-request server)."""
        future = self._executor.submit(self._generate, self._keyed(gen_batch), self._publish(version), version)
        try:
            return future.result(timeout=self.timeout_s)
        except FutureTimeout:
            raise TimeoutError(
                f"{len(gen_batch)} rows to generate at policy version {version} did not finish within "
                f"{self.timeout_s:.0f} s: the rollout engine is stuck"
            ) from None

    def _segment(self, rnd: _Round, version: int, to_end: bool) -> None:
        """Queue ``rnd``'s next segment under ``version``: ``partial_tokens`` more tokens, or (``to_end``) the rest.
        Segments run in the engine's one thread in the order queued, so a round's segments never overlap."""
        weights, partial, k = self._publish(version), rnd.partial, self.partial_tokens

        def run() -> DataProto:
            if not partial.done:
                stop = None if to_end else partial.generated + k
                partial.absorb(self._generate(partial.next_segment(stop), weights, version), version)
            return partial.output

        rnd.segment_version = version
        rnd.future = self._executor.submit(run)

    def _publish(self, version: int) -> dict:
        """The actor's weights at ``version``, copied once per version (the ahead engine loads them later)."""
        if self._weights is None or self._weights[0] != version:
            t = time.perf_counter()
            self._weights = (version, self.wg.policy_weights()[0])
            self._publish_s += time.perf_counter() - t
            self._publish_mb += payload_bytes(self._weights[1]) / 2**20
        return self._weights[1]

    def _generate(self, gen_batch: DataProto, weights: dict, version: int) -> DataProto:
        """On the engine's thread: load the round's version, then generate."""
        start = time.perf_counter()
        with self._stats_lock:
            if self._idle_since is not None:
                self._idle_s += start - self._idle_since
            self._idle_since = None
        try:
            sync_s = self.wg.load_ahead_weights(weights, version)[0]
            if self.agent is not None:  # the agent loop in this process
                key = gen_batch.meta_info.pop("agent_call_key")
                out = asyncio.run(self.agent.generate_sequences(gen_batch, key))
            else:
                out = self.wg.generate_sequences_ahead(gen_batch)
                out.meta_info.pop("sampled_by", None)  # the replicas' record: the logical schedule fixes the version
        finally:
            end = time.perf_counter()
            with self._stats_lock:
                self._idle_since = end
        with self._stats_lock:
            self._sync_s += sync_s
            self._busy_s += end - start - sync_s
        return out

    def _result(self, rnd: _Round) -> DataProto:
        if rnd.saved is not None:
            return rnd.saved
        try:
            return rnd.future.result(timeout=self.timeout_s)
        except FutureTimeout:
            raise TimeoutError(
                f"colocate_async: round {rnd.number} (policy version {rnd.version}) was not generated within "
                f"{self.timeout_s:.0f} s: the ahead rollout engine is stuck"
            ) from None

    # ------------------------------------------------------------------------------------------------ reporting
    def pop_metrics(self) -> dict[str, float]:
        """Since the last call: the engine's generation, weight-load and idle seconds, the controller's seconds
        publishing versions, and the rounds generated ahead and waiting."""
        now = time.perf_counter()
        with self._stats_lock:
            idle = self._idle_s + (now - self._idle_since if self._idle_since is not None else 0.0)
            out = {
                "async/rollout_busy_s": self._busy_s,
                "async/rollout_idle_s": idle,
                "timing_s/update_weights": self._sync_s + self._publish_s,
                "async/update_weights_mb": self._publish_mb,
            }
            self._busy_s = self._sync_s = self._publish_s = self._idle_s = self._publish_mb = 0.0
            if self._idle_since is not None:
                self._idle_since = now
        out["async/queue_depth"] = float(sum(1 for r in self._rounds if r.saved is not None or r.future.done()))
        out["async/rounds_in_flight"] = float(len(self._rounds))
        return out

    # ------------------------------------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Waits for the rounds in flight, then returns them with the round count (for `load_state_dict`); a partial
        round is saved with its segments so far, and resumes from them."""
        rounds = [(r.number, r.version, r.prompts, self._result(r)) for r in self._rounds]
        partial = {r.number: (r.partial.state_dict(), r.segment_version) for r in self._rounds if r.partial}
        state = {"submitted": self.submitted, "rounds": rounds, "engine_rng": self.wg.ahead_rng_state()[0]}
        if self.agent_rng is not None:
            state["agent_rng"] = self.agent_rng.getstate()
        return {**state, "partial": partial} if partial else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:  # a checkpoint of a sync run: nothing was generated ahead
            return
        self.drain()
        self._rounds.clear()
        self.submitted = int(state["submitted"])
        self.wg.set_ahead_rng_state(state["engine_rng"])
        if self.agent_rng is not None and "agent_rng" in state:
            self.agent_rng.setstate(state["agent_rng"])
        partial = state.get("partial", {})
        for number, version, prompts, output in state["rounds"]:
            done: Future = Future()
            done.set_result(output)
            if number in partial:  # its later segments are still to come: not a finished output
                rnd = _Round(number, version, prompts, done, partial=PartialRound.from_state(partial[number][0]))
                rnd.segment_version = partial[number][1]
                self._rounds.append(rnd)
            else:
                self._rounds.append(_Round(number, version, prompts, done, saved=output))

    # ------------------------------------------------------------------------------------------------ shutdown
    def drain(self) -> None:
        """Wait for the round being generated (its result stays for the next request)."""
        for rnd in self._rounds:
            if rnd.saved is None:
                try:
                    rnd.future.result(timeout=self.timeout_s)
                except Exception:  # noqa: BLE001 -- reported when the round is asked for
                    pass

    def shutdown(self) -> None:
        self.drain()
        self._executor.shutdown(wait=True)
