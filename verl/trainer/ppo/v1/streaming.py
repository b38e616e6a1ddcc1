"""``separate_async``'s wall-clock schedule (``trainer.deterministic=false``): the replicas generate continuously.

A feeder thread keeps the standalone replicas busy: it takes the oldest pending prompt groups, a chunk at a time
(``ppo_mini_batch_size`` prompts), has the replicas generate them with the newest policy version the trainer has
published, and files the finished groups in the `ReplayBuffer`. The trainer asks for a batch: it publishes its
current version, tops the prompts up to ``(1 + num_warmup_batches) x train_batch_size`` groups alive, and takes
``train_batch_size`` groups as the buffer's staleness rules allow (``trainer.v1.sampler``), waiting while it may not.
So while a step trains, at most ``num_warmup_batches`` batches of groups are generated ahead of it: a group is
trained at most ``num_warmup_batches`` versions after its first token unless a step waits longer for stragglers,
which ``drop`` evicts and ``wait`` trains first.

Unlike the logical schedule (`verl.trainer.ppo.v1.colocate_async`), which version samples which group depends on
timing, so runs differ in their bits; in exchange a replica never waits for a version and a slow group never holds
the others. Weights change between chunks, and with partial rollout (``trainer.v1.partial_rollout_tokens=k``) also
within one: the chunk is generated ``k`` response tokens at a time, and each segment's unfinished rows continue under
the newest version published by then (their tokens kept and prefilled, `verl.workers.rollout.partial`), so a long
trajectory is not held to the version that started it. Without it a group is sampled by one version.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.reward import PROMPT_KEYS
from verl.trainer.ppo.v1.colocate_async import ROUND_TIMEOUT_S, payload_bytes
from verl.trainer.ppo.v1.replay_buffer import PromptGroup, ReplayBuffer
from verl.trainer.ppo.validation import concat_left_padded
from verl.workers.rollout.partial import PartialRound

__all__ = ["StreamingRollout"]


class StreamingRollout:
    """The trainer's source of batches in wall-clock ``separate_async`` (see the module docstring). ``engine``: a
    `verl.trainer.ppo.v1.separate_async.ReplicaEngine`; ``sampler``: ``trainer.v1.sampler``."""

    def __init__(
        self, engine: Any, sampler: Any, lag: int, batch_prompts: int, chunk_prompts: int, n: int,
        timeout_s: float = ROUND_TIMEOUT_S, partial_tokens: int = 0, response_length: int = 0,
        agent_keys: bool = False, feeders: int = 1,
    ):  # fmt: skip
        self.feeders = max(1, int(feeders))  # chunks in flight at once (agent loops waiting on tools overlap)
        self.agent_keys = agent_keys  # each chunk carries a seed key for the replicas' agent loops
        self._agent_rng = random.Random(f"agent-keys-{batch_prompts}-{n}")
        self.engine, self.n, self.timeout_s = engine, n, timeout_s
        self.partial_tokens, self.response_length = int(partial_tokens), int(response_length)
        self.batch_prompts, self.chunk = batch_prompts, max(1, chunk_prompts)
        self.capacity = (1 + lag) * batch_prompts
        self.buffer = ReplayBuffer(sampler.max_off_policy_threshold, sampler.max_off_policy_strategy, self._refill)
        self._queue: deque[DataProto] = deque()  # prompts taken from the dataloader, one row each, not yet groups
        self._next_index = 0
        self._make_round: Callable[[], tuple[DataProto, DataProto]] | None = None
        self._cond = threading.Condition()
        self._latest: tuple[int, dict] | None = None  # the newest published version and its weights
        self._loaded: int | None = None  # the version the replicas hold
        self._running = 0  # chunks being generated
        self._most_running = 0  # the most at once since the last report
        self._paused = False  # a checkpoint is being taken: no new chunk starts
        self._stop = False
        self._error: BaseException | None = None
        self._stats = {"busy": 0.0, "sync": 0.0, "publish": 0.0, "idle": 0.0, "publish_mb": 0.0}
        self._idle_since: float | None = None
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------------------------------------ the trainer
    def next_round(
        self, version: int, make_round: Callable[[], tuple[DataProto, DataProto]]
    ) -> tuple[DataProto, DataProto, tuple[np.ndarray, np.ndarray]]:
        """``train_batch_size`` groups to train at ``version``: their prompts, their responses and, per response,
        the first and last version that sampled it."""
        self._make_round = make_round
        self._publish(version)
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            self._paused = False
            self._top_up()
            self._start_feeder()
            self._cond.notify_all()  # feeders asleep for want of prompts (or paused) take the new ones now
            while (taken := self.buffer.take(self.batch_prompts, version)) is None:
                self._raise_if_failed()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"separate_async: {self.batch_prompts} prompt groups trainable at policy version {version} did "
                        f"not arrive within {self.timeout_s:.0f} s ({self.buffer.count('finished')} finished, "
                        f"{self.buffer.count('running')} being generated): the rollout replicas are stuck"
                    )
                self._cond.wait(min(left, 1.0))
            self._cond.notify_all()  # the refills of evicted groups
        prompts = self._concat([g.prompt for g in taken])
        output = self._concat([g.output for g in taken])
        first = np.repeat(np.array([g.first_version for g in taken], dtype=np.int64), self.n)
        last = np.concatenate([g.last_version for g in taken])
        return prompts, output, (first, last)

    def _publish(self, version: int) -> None:
        if self._latest is None or self._latest[0] != version:
            t = time.perf_counter()
            weights = self.engine.policy_weights()[0]
            with self._cond:
                self._latest = (version, weights)
                self._stats["publish"] += time.perf_counter() - t
                self._stats["publish_mb"] += payload_bytes(weights) / 2**20
                self._cond.notify_all()

    def _refill(self, k: int) -> None:
        """``k`` new pending groups from the dataloader (the buffer's refill; under the lock, on the trainer's
        thread)."""
        while len(self._queue) < k:
            prompts, _ = self._make_round()
            self._queue.extend(prompts[i : i + 1] for i in range(len(prompts)))
        groups = []
        for _ in range(k):
            groups.append(PromptGroup(self._next_index, self._queue.popleft()))
            self._next_index += 1
        self.buffer.add(groups)

    def _top_up(self) -> None:
        if (missing := self.capacity - len(self.buffer.groups)) > 0:
            self._refill(missing)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    # ------------------------------------------------------------------------------------------------ the feeder
    def _start_feeder(self) -> None:
        if not self._threads:
            self._idle_since = time.perf_counter()
        for i in range(len(self._threads), self.feeders):
            self._threads.append(threading.Thread(target=self._feed, name=f"verl-rollout-feeder-{i}", daemon=True))
            self._threads[-1].start()

    def _feed(self) -> None:
        while True:
            with self._cond:
                while not self._stop and (self._paused or not self.buffer.pending(1)):
                    self._cond.wait()
                if self._stop:
                    return
                if self._running == 0 and self._idle_since is not None:  # the rollout idled until now
                    self._stats["idle"] += time.perf_counter() - self._idle_since
                    self._idle_since = None
                groups = self.buffer.pending(self.chunk)
                version, weights = self._latest
                self.buffer.start(groups, version)
                self._running += 1
                self._most_running = max(self._most_running, self._running)
            try:
                out, (first, last), busy, sync = self._generate_chunk(self._generation_batch(groups), version, weights)
            except BaseException as e:  # a dead replica: the trainer raises it with the worker's own message
                with self._cond:
                    self._error = e
                    self._chunk_done()
                return
            with self._cond:
                for i, g in enumerate(groups):
                    rows = slice(i * self.n, (i + 1) * self.n)
                    g.first_version = int(first[rows].min())  # the version that really started it
                    self.buffer.finish(g, out.slice(rows.start, rows.stop), last[rows])
                self._stats["busy"] += busy
                self._stats["sync"] += sync
                self._chunk_done()

    def _chunk_done(self) -> None:
        """A chunk ended (under the lock): the last one running starts the rollout's idle time."""
        self._running -= 1
        if self._running == 0:
            self._idle_since = time.perf_counter()
        self._cond.notify_all()

    def _generate_chunk(
        self, gen: DataProto, version: int, weights: dict
    ) -> tuple[DataProto, tuple[np.ndarray, np.ndarray], float, float]:
        """One chunk's responses, per row the first and last version that sampled it (as the replicas report it:
        with several chunks in flight another one may have loaded a newer version first), and the seconds
        generating and loading weights. With partial rollout every segment after the first runs under the newest
        version published."""
        busy = sync = 0.0
        partial = PartialRound(gen, self.response_length) if self.partial_tokens else None
        while True:
            start = time.perf_counter()
            load = 0.0
            if self._loaded is None or self._loaded < version:
                load = self.engine.load_ahead_weights(weights, version)[0]
                self._loaded = max(self._loaded or 0, version)
            if partial is None:
                out = self.engine.generate_sequences_ahead(gen)
                used = out.meta_info.pop("sampled_by", np.full(len(gen), version, dtype=np.int64))
            else:
                segment = self.engine.generate_sequences_ahead(
                    partial.next_segment(partial.generated + self.partial_tokens)
                )
                partial.absorb(segment, int(segment.meta_info.pop("sampled_by", [version]).max()))
            busy, sync = busy + time.perf_counter() - start - load, sync + load
            if partial is None:
                return out, (used, used), busy, sync
            if partial.done:
                return partial.result() + (busy, sync)
            with self._cond:
                version, weights = self._latest  # a newer version resumes the unfinished rows

    @staticmethod
    def _concat(batches: list[DataProto]) -> DataProto:
        """Groups of different dataloader batches, whose prompts were left-padded to different widths: left-padded
        to the widest (with the pad id their own padding uses)."""
        if "input_ids" not in batches[0].batch.keys():
            return DataProto.concat(batches)
        ids = batches[0].batch["input_ids"]
        mask = batches[0].batch.get("attention_mask")
        pad = int(ids[mask == 0][0]) if mask is not None and bool((mask == 0).any()) else 0
        return concat_left_padded(batches, pad)

    def _generation_batch(self, groups: list[PromptGroup]) -> DataProto:
        gen = self._concat([g.prompt for g in groups]).select(batch_keys=PROMPT_KEYS).repeat(self.n, interleave=True)
        # a response's sampling keys: its group's place in the dataloader order and its place in the group
        index = torch.tensor([g.index for g in groups], dtype=torch.int64)
        gen.batch["sample_index"] = (index[:, None] * self.n + torch.arange(self.n)).reshape(-1)
        if self.agent_keys:  # from the chunk's first group: the wall clock decides which chunk a group is in anyway
            gen.meta_info["agent_call_key"] = int(np.random.default_rng(int(index[0])).integers(2**62))
        return gen

    def generate_now(self, gen: DataProto, version: int) -> DataProto:
        """``gen`` generated by ``version`` now (validation of an agent task on the replicas): the feeder is paused
        until the next batch is taken, once its chunk in flight is done."""
        self.drain()
        self._publish(version)
        with self._cond:
            weights = self._latest[1]
        if self.agent_keys:  # Ray's driver draws from the global RNG itself: a generator of the feeder's own
            gen.meta_info["agent_call_key"] = self._agent_rng.getrandbits(63)
        if self._loaded != version:
            self.engine.load_ahead_weights(weights, version)
            self._loaded = version
        return self.engine.generate_sequences_ahead(gen)

    # ------------------------------------------------------------------------------------------------ reporting
    def pop_metrics(self) -> dict[str, float]:
        with self._cond:
            now = time.perf_counter()
            idle = self._stats["idle"] + (now - self._idle_since if self._idle_since is not None else 0.0)
            out = {
                "async/rollout_busy_s": self._stats["busy"],
                "async/chunks_in_flight_max": float(self._most_running),
                "async/rollout_idle_s": idle,
                "timing_s/update_weights": self._stats["sync"] + self._stats["publish"],
                "async/update_weights_mb": self._stats["publish_mb"],
                **self.buffer.pop_metrics(),
            }
            self._stats = dict.fromkeys(self._stats, 0.0)
            self._most_running = self._running
            if self._idle_since is not None:
                self._idle_since = now
        return out

    # ------------------------------------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Pauses the feeder until the chunk in flight is done (the next batch resumes it), then saves every group:
        finished ones with their responses, the others as prompts (reissued on resume), and the prompts taken from
        the dataloader."""
        with self._cond:
            self._paused = True
            while self._running and self._error is None:
                self._cond.wait()
            groups = [
                (g.index, g.prompt, g.state == "finished", g.first_version, g.output, g.last_version)
                for g in sorted(self.buffer.groups.values(), key=lambda g: g.index)
            ]
            state = {"groups": groups, "queue": list(self._queue), "next_index": self._next_index}
        state["engine_rng"] = self.engine.ahead_rng_state()[0]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state or "groups" not in state:  # a checkpoint of another mode: start from the dataloader
            return
        with self._cond:
            self.buffer.groups.clear()
            for index, prompt, finished, first, output, last in state["groups"]:
                g = PromptGroup(index, prompt)
                if finished:
                    g.state, g.first_version, g.output, g.last_version = "finished", first, output, last
                self.buffer.groups[index] = g
            self._queue = deque(state["queue"])
            self._next_index = int(state["next_index"])
        self.engine.set_ahead_rng_state(state["engine_rng"])

    # ------------------------------------------------------------------------------------------------ shutdown
    def drain(self) -> None:
        """Stop starting chunks and wait for the one in flight (its groups stay for the next batch, which starts the
        feeding again): nothing generates while the trainer is not training."""
        with self._cond:
            self._paused = True
            while self._running and self._error is None:
                self._cond.wait()

    def shutdown(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=self.timeout_s)
