"""Running a batch of agent loops: ``AgentLoopWorker`` (all rows concurrently on one event loop) and
``AgentLoopManager`` (verl's trainer-facing ``generate_sequences(prompts) -> DataProto``).

For each row of the prompt batch the worker builds the loop its ``agent_name`` column names (default
``rollout.agent.default_agent_loop``), gives it a `TrajectoryServer` and the row's columns, runs every loop
concurrently with ``asyncio.gather`` and pads the trajectories into the trainer's batch (`batch_output`). The
rollout's per-request ``generate`` batches the concurrent model turns.

Sampling settings come from the rollout config as the batch call's do (``val_kwargs`` when ``meta_info["validate"]``,
then ``meta_info``'s own: `verl.workers.rollout.sampling.batch_sampling_params`); the response budget is
``rollout.response_length`` for the whole multi-turn response.

Reproducibility: each batch call draws one key from Python's ``random`` (seeded by ``trainer.seed`` and saved in
checkpoints); every model turn's seed is a hash of that key, the row's ``sample_index`` and the turn number
(`server_manager.request_seed`). With ``rollout.agent.lockstep`` (default) the turns of all unfinished trajectories
reach the sampler together, one round at a time, so the same seed gives the same trajectories bit for bit.
"""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

from verl.experimental.agent_loop import single_turn_agent_loop, tool_agent_loop  # noqa: F401 (register the loops)
from verl.experimental.agent_loop.base import DictConfigWrap, agent_loop_class, load_agent_loop_config
from verl.experimental.agent_loop.batch_output import check_output, output_columns, outputs_to_tensors
from verl.experimental.agent_loop.server_manager import AsyncLLMServerManager, LockstepRounds, TrajectoryServer
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.sampling import batch_sampling_params

__all__ = ["AgentLoopManager", "AgentLoopWorker"]


def _row_prompt_ids(batch: DataProto) -> list[list[int]] | None:
    """Each row's prompt ids without padding (verl's ``raw_prompt_ids``), from ``input_ids``/``attention_mask``."""
    if batch.batch is None or "input_ids" not in batch.batch.keys():
        return None
    ids, mask = batch.batch["input_ids"], batch.batch.get("attention_mask")
    if mask is None:
        return [row.tolist() for row in ids]
    return [row[m.bool()].tolist() for row, m in zip(ids, mask)]


class AgentLoopWorker:
    """Runs one batch's agent loops concurrently (see the module docstring).

    Args:
        config: the job config (``actor_rollout_ref``, ``data``).
        server_handles: objects with the rollout's ``async generate(prompt_ids, sampling_params, request_id, ...)``.
        tokenizer: the policy's tokenizer (None: loaded from ``actor_rollout_ref.model.path``).
    """

    def __init__(self, config: Any, server_handles: list[Any], tokenizer: Any = None):
        self.config = config
        self.server_manager = AsyncLLMServerManager(config, server_handles)
        if tokenizer is None:
            from verl.utils.model import load_tokenizer

            model = config.actor_rollout_ref.model
            tokenizer = load_tokenizer(model.path, trust_remote_code=model.trust_remote_code)
        self.tokenizer = tokenizer
        agent = config.actor_rollout_ref.rollout.agent
        if agent.agent_loop_config_path:
            load_agent_loop_config(agent.agent_loop_config_path)
        self.lockstep = bool(agent.lockstep)
        self.last_rounds: LockstepRounds | None = None  # the last batch's rounds (tests, benchmarks)

    def sampling_params(self, meta_info: dict[str, Any]) -> dict[str, Any]:
        """The vLLM-style settings of every model turn of this batch (each turn adds its budget and seed)."""
        params = batch_sampling_params(self.config.actor_rollout_ref.rollout, meta_info, engine="agent loop")
        greedy = not params["do_sample"]
        return {
            "temperature": 0.0 if greedy else params["temperature"],
            "top_p": params["top_p"],
            "top_k": params["top_k"],
            "do_sample": params["do_sample"],
        }

    async def generate_sequences(self, batch: DataProto, call_key: int) -> DataProto:
        """One trajectory per row of ``batch`` (left-padded prompts and the rows' columns); ``call_key`` seeds this
        call's turns. Output layout: `verl.experimental.agent_loop.batch_output`."""
        rollout = self.config.actor_rollout_ref.rollout
        n = len(batch)
        sampling_params = self.sampling_params(batch.meta_info)
        default = rollout.agent.default_agent_loop
        names = batch.non_tensor_batch.get("agent_name")
        names = [default if names is None or names[i] in (None, "") else str(names[i]) for i in range(n)]
        has_index = batch.batch is not None and "sample_index" in batch.batch.keys()
        sample_index = batch.batch["sample_index"].tolist() if has_index else list(range(n))
        prompt_ids = _row_prompt_ids(batch)
        rounds = LockstepRounds(range(n)) if self.lockstep else None
        self.last_rounds = rounds
        runs = []
        for i in range(n):
            kwargs = {k: v[i] for k, v in batch.non_tensor_batch.items() if k != "agent_name"}
            if prompt_ids is not None:
                kwargs["raw_prompt_ids"] = prompt_ids[i]
            server = TrajectoryServer(self.server_manager, i, sample_index[i], call_key, rounds)
            runs.append(self._run_one(i, names[i], server, rounds, sampling_params, kwargs))
        results = await asyncio.gather(*runs)
        outputs = [out for out, _ in results]
        tensors = outputs_to_tensors(
            outputs, self.tokenizer.pad_token_id, int(rollout.prompt_length), int(rollout.response_length)
        )
        non_tensor = dict(batch.non_tensor_batch)
        non_tensor.update(output_columns(outputs, [metrics for _, metrics in results]))
        return DataProto.from_dict(tensors, non_tensor, meta_info=dict(batch.meta_info))

    async def _run_one(self, row: int, name: str, server: TrajectoryServer, rounds, sampling_params, kwargs):
        where = f"agent loop {name!r} on row {row}"
        try:
            cls, extra = agent_loop_class(name)
            loop = cls(
                trainer_config=DictConfigWrap(self.config),
                server_manager=server,
                tokenizer=self.tokenizer,
                processor=None,
                dataset_cls=RLHFDataset,
                dataset_config=DictConfigWrap(self.config.data),
                **extra,
            )
            out = await loop.run(dict(sampling_params), **kwargs)
        except Exception as e:
            if hasattr(e, "add_note"):
                e.add_note(f"(in {where})")
            raise
        finally:
            if rounds is not None:
                rounds.finish(row)
        out = check_output(out, int(self.config.actor_rollout_ref.rollout.response_length), where)
        metrics = out.metrics.model_dump() if hasattr(out.metrics, "model_dump") else dict(out.metrics or {})
        metrics.setdefault("generate_sequences", server.generate_s)
        metrics.setdefault("tool_calls", 0.0)
        metrics.setdefault("num_preempted", server.num_preempted)
        return out, metrics


class AgentLoopManager:
    """verl's trainer-facing agent loop: ``generate_sequences(prompts) -> DataProto`` runs the batch's trajectories
    concurrently (an `AgentLoopWorker` in this process; ``rollout.agent.num_workers`` has no effect).

    Args:
        config: the job config.
        worker_group: the actor's rollout worker group (verl's argument); its handle is the server when
            ``server_handles`` is not given.
        server_handles: the rollout servers (``verl.trainer.ppo.rollout_servers.async_rollout_servers``).
        tokenizer: the policy's tokenizer (None: loaded from the model path).
    """

    def __init__(
        self,
        config: Any,
        worker_group: Any = None,
        rollout_resource_pool: Any = None,
        rm_resource_pool: Any = None,
        *,
        server_handles: list[Any] | None = None,
        tokenizer: Any = None,
    ):
        if server_handles is None:
            if worker_group is None:
                raise ValueError("AgentLoopManager needs the actor's worker_group or server_handles")
            server_handles = [worker_group]
        self.config = config
        self.worker_group = worker_group
        self.server_handles = list(server_handles)
        self.worker = AgentLoopWorker(config, self.server_handles, tokenizer)

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        """One trajectory per prompt row (see `AgentLoopWorker.generate_sequences`). Draws this call's seed key
        from Python's ``random``."""
        call_key = random.getrandbits(63)
        return _run_sync(self.worker.generate_sequences(prompts, call_key))


def _run_sync(coroutine: Any) -> Any:
    """``asyncio.run(coroutine)``; from inside a running event loop (a notebook), on a fresh thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(coroutine)
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    thread = threading.Thread(target=target, name="agent-loop")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]
