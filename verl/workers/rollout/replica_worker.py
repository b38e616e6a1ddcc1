"""`RolloutReplicaWorker`: a standalone rollout replica (``trainer.v1.trainer_mode=separate_async``, docs/async.md).

Each replica is a worker process of its own resource pool (verl's top-level ``rollout.nnodes`` x
``rollout.n_gpus_per_node``; on CPU one process with its share of the cores) holding a whole copy of the policy
and an engine of ``rollout.name``. It never trains: the controller hands it each policy version it is to sample with
(`load_weights`, the trainer's full weights gathered from its FSDP shards, a LoRA policy's adapters merged in), and it
generates batches (`generate_sequences`) while the trainer's processes update the actor. Its sampling is keyed as the
hybrid engine's (seed, call, row), so a replica handed version ``v`` samples the tokens the trainer's own engine
would have sampled with ``v``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto
from verl.single_controller.base import Dispatch, Worker, register
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.failpoints import failpoint
from verl.utils.lora import apply_lora, lora_enabled
from verl.utils.model import load_causal_lm, load_tokenizer
from verl.workers.config import ActorRolloutRefConfig
from verl.workers.rollout.ahead import copy_named_weights

__all__ = ["SAMPLED_BY", "RolloutReplicaWorker", "VersionLock"]

SAMPLED_BY = "rollout_policy_version"  # per output row: the policy version the replica sampled it with


class VersionLock:
    """Many generations at once, or one weight load: a load waits for the generations in flight and holds back new
    ones, so every generation samples with one version from start to end."""

    def __init__(self):
        self.guard = threading.Lock()
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            while self._writer:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            while self._writer:
                self._cond.wait()
            self._writer = True  # new readers wait from here
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class RolloutReplicaWorker(Worker):
    """One replica: ``config`` is the ``actor_rollout_ref`` section (model and rollout settings), ``seed`` the run's,
    ``job_config`` the whole job's (the agent loop reads its ``data`` and tool settings)."""

    def __init__(self, config, seed: int = 0, job_config: Any = None, agent_loop_factory: Callable | None = None):
        self.config: ActorRolloutRefConfig = omega_conf_to_dataclass(config, ActorRolloutRefConfig)
        self.seed = seed
        self.job_config = job_config
        # (job_config, engine, tokenizer) -> an AgentLoopWorker: handed in by the trainer, which owns the agent loop
        self.agent_loop_factory = agent_loop_factory
        self.version: int | None = None
        self._agent_loop: Any = None
        self._weights_lock = VersionLock()  # generations in flight (several, with max_concurrency) vs a load
        self._event_loop: asyncio.AbstractEventLoop | None = None

    @register(Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        from verl.workers.fsdp_workers import rollout_engine, stop_token_ids

        cfg = self.config
        m = cfg.model
        self.tokenizer = load_tokenizer(m.path, trust_remote_code=m.trust_remote_code)
        override = dict(m.override_config)
        self.module = load_causal_lm(
            m.path, dtype=m.dtype, override_config=override, trust_remote_code=m.trust_remote_code
        )
        self.module.requires_grad_(False)
        self.module.to(self.device)
        self.state = self.module.state_dict()  # the base model's tensors, under its names (kept by a PEFT wrap)
        self.adapter_state: dict[str, torch.Tensor] = {}
        if lora_enabled(m):  # the trainer's adapters on this frozen base: a version then sends its adapters alone
            self.module = apply_lora(self.module, m, self.seed, key="actor_rollout_ref.model")
            self.module.requires_grad_(False)
            self.adapter_state = {k: v for k, v in self.module.state_dict().items() if ".lora_" in k}
        self.engine = rollout_engine(cfg.rollout.name, cfg.rollout.mode).build_hybrid(
            module=self.module,
            config=cfg.rollout,
            tokenizer=self.tokenizer,
            eos_token_ids=stop_token_ids(m.path, self.tokenizer),
            seed=self.seed,
            model_path=m.path,
        )

    @register(Dispatch.ONE_TO_ALL)
    def load_weights(self, weights: dict[str, dict[str, torch.Tensor]], version: int) -> float:
        """Copy the policy at ``version`` into this replica (``ActorRolloutRefWorker.full_policy_weights``: the
        whole weights under the base model's names, and a LoRA policy's adapters); the seconds it took."""
        if self.version is not None and version <= self.version:
            return 0.0  # held already, or older than what concurrent callers have loaded since: versions only advance
        t = time.perf_counter()
        owner = f"rollout replica rank {self.rank}"
        with self._weights_lock.writing():  # after the generations in flight, before any new one
            if "base" in weights:
                copy_named_weights(self.state, weights["base"], owner)
            if "adapter" in weights:
                if not self.adapter_state:
                    raise ValueError(f"{owner}: sent LoRA adapters, but actor_rollout_ref.model.lora_rank is 0 here")
                copy_named_weights(self.adapter_state, weights["adapter"], owner)
            self.version = version
        return time.perf_counter() - t

    @register(Dispatch.DP_COMPUTE_PROTO, pad=True)
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        """This replica's share of ``prompts``, sampled with the version it was last handed (named per row in the
        output's ``SAMPLED_BY`` column: with concurrent callers, the one that really sampled it)."""
        if self.version is None:
            raise RuntimeError("rollout replica: generate_sequences before any weights were loaded (load_weights)")
        key = prompts.meta_info.pop("agent_call_key", None)
        with self._weights_lock.reading():
            version = self.version
            if key is None:
                out = self.engine.generate_sequences(self.to_device(prompts))
            else:  # the agent loop (multi_turn): every row's turns on this replica's engine, tools in this process;
                # concurrent calls share one event loop, so their model turns batch together and their waits overlap
                coroutine = self.agent_loop().generate_sequences(prompts, key)
                out = asyncio.run_coroutine_threadsafe(coroutine, self._agent_event_loop()).result()
        out.non_tensor_batch[SAMPLED_BY] = np.full(len(out), version, dtype=np.int64)
        failpoint("rollout.generate")
        return self.to_host(out)

    def _agent_event_loop(self) -> asyncio.AbstractEventLoop:
        """The replica's one event loop for agent loops, on a thread of its own (started on first use)."""
        with self._weights_lock.guard:
            if self._event_loop is None:
                self._event_loop = asyncio.new_event_loop()
                threading.Thread(target=self._event_loop.run_forever, name="replica-agent-loop", daemon=True).start()
        return self._event_loop

    def agent_loop(self) -> Any:
        """The `AgentLoopWorker` whose one server is this replica's engine (built on first use)."""
        if self._agent_loop is None:
            if self.job_config is None or self.agent_loop_factory is None:
                raise RuntimeError("rollout replica: the agent loop needs the job's config and agent_loop_factory")
            self._agent_loop = self.agent_loop_factory(self.job_config, self.engine, self.tokenizer)
        return self._agent_loop

    @register(Dispatch.ONE_TO_ALL)
    def get_rng_state(self) -> torch.Tensor:
        return self.engine.get_rng_state()

    @register(Dispatch.ONE_TO_ALL)
    def set_rng_state(self, state: torch.Tensor) -> None:
        self.engine.set_rng_state(state)

    @register(Dispatch.ONE_TO_ALL)
    def memory_stats(self) -> dict[str, int]:
        """The replica's weight bytes (it holds no optimizer)."""
        params = sum(t.numel() * t.element_size() for t in self.state.values())
        return {"param_bytes": params, "optim_bytes": 0}
