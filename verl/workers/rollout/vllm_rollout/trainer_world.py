"""vLLM engines inside the trainer's own ``torch.distributed`` world (the Ray backend: one worker process per rank).

On the Ray backend each `ActorRolloutRefWorker` is one rank of a process group of W ranks (gloo on CPU, NCCL on GPU)
that FSDP2 shards the actor over. An engine built there must not start a world of its own (vLLM's one-process
executor would try to, and its parallel groups would then not match the trainer's ranks). vLLM's
``external_launcher`` executor is made for this (torchrun-style SPMD inference, verl's SPMD rollout): every rank
builds its own ``vllm.LLM``, vLLM adopts the process group already up as its world and cuts it into tensor-parallel
groups of ``tp = rollout.tensor_model_parallel_size`` consecutive ranks
(`vllm.distributed.parallel_state.initialize_model_parallel`: the layout is external data parallel x TP). So:

- ``tp = 1``: W independent engines, one per rank, each sampling that rank's data-parallel share of the prompts;
- ``tp > 1``: W / tp engines, each sharded over tp ranks. external_launcher has no driver: every rank of an engine
  runs the engine's scheduler, so all of them must submit the same requests in the same order, and then step in
  lockstep through the engine's all-reduces. The worker group still hands each rank its own 1/W of the batch;
  `TensorParallelRows` all-gathers the shares of an engine's ranks, the engine samples the union on each of them,
  and each rank keeps its own rows -- so the group call returns every row once, in the caller's order.

The trainer's world is left as it was: vLLM's groups are new groups on top of it, and `release_engine_groups`
tears down only those.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from verl.protocol import DataProto

__all__ = [
    "TensorParallelRows",
    "external_launcher_kwargs",
    "note_engine_built",
    "release_engine_groups",
    "trainer_world_size",
    "world_is_up",
]

# whether a vLLM engine of this process started its process group (the local backend's one-process world), which
# is then vLLM's to tear down; a world that was up before the engine (the trainer's) never is
_world_started_by_vllm = False


def world_is_up() -> bool:
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized()


def trainer_world_size() -> int:
    """Ranks of the process group this process belongs to (1 when none is up, or when the only one is a group of one,
    such as the one vLLM's own executor starts in the local backend)."""
    return torch.distributed.get_world_size() if world_is_up() else 1


def note_engine_built(world_was_up: bool) -> None:
    """Record, after an engine is built, whether it started this process's process group (``world_was_up``: whether
    one was up before the build)."""
    global _world_started_by_vllm
    if not world_was_up and world_is_up():
        _world_started_by_vllm = True


def external_launcher_kwargs(tensor_parallel_size: int, world_size: int) -> dict[str, Any]:
    """``vllm.LLM`` arguments for an engine of ``tensor_parallel_size`` ranks in a trainer world of ``world_size``.

    vLLM's external_launcher reads its place from ``RANK`` and ``LOCAL_RANK`` (torchrun's variables): they are set
    here from the process group (``LOCAL_RANK``: the CUDA device this process uses, which Ray makes device 0)."""
    if tensor_parallel_size < 1 or world_size % tensor_parallel_size:
        raise ValueError(
            f"actor_rollout_ref.rollout.tensor_model_parallel_size={tensor_parallel_size} must be >= 1 and divide the "
            f"number of worker processes (trainer.nnodes x trainer.n_gpus_per_node = {world_size}): each vLLM engine "
            "spans that many consecutive ranks"
        )
    os.environ["RANK"] = str(torch.distributed.get_rank())
    os.environ["LOCAL_RANK"] = str(torch.cuda.current_device() if torch.cuda.is_initialized() else 0)
    return {"distributed_executor_backend": "external_launcher", "tensor_parallel_size": int(tensor_parallel_size)}


class TensorParallelRows:
    """The prompts of one tensor-parallel engine: the union of its ranks' shares, the same on each of them."""

    def __init__(self) -> None:
        from vllm.distributed.parallel_state import get_tp_group

        group = get_tp_group()
        self.group, self.size, self.rank = group.cpu_group, group.world_size, group.rank_in_group

    def gather(self, prompts: DataProto) -> DataProto:
        """Every rank's share of the engine's group, in rank order (each share must have the same number of rows:
        the worker group's even split, with padding, guarantees it)."""
        shares: list[Any] = [None] * self.size
        torch.distributed.all_gather_object(shares, prompts, group=self.group)
        sizes = [len(s) for s in shares]
        if len(set(sizes)) != 1:
            raise ValueError(
                f"the ranks of one vLLM engine (tensor_model_parallel_size={self.size}) got {sizes} prompt rows: "
                "they must get equal shares (call generate_sequences through the worker group, which splits evenly)"
            )
        return DataProto.concat(shares)

    def own_rows(self, union: DataProto, rows: int) -> DataProto:
        """This rank's ``rows`` rows of an output sampled for the whole group."""
        return union[self.rank * rows : (self.rank + 1) * rows]


def release_engine_groups() -> None:
    """Tear down the process groups vLLM built for its engines (after they are dropped). A world that vLLM started
    (the local backend's one-process world) goes too, so later code that asks ``torch.distributed.is_initialized()``
    sees a plain process; the trainer's world stays up (its collectives still need it)."""
    global _world_started_by_vllm
    from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

    destroy_model_parallel()
    if _world_started_by_vllm:
        destroy_distributed_environment()
        _world_started_by_vllm = False
