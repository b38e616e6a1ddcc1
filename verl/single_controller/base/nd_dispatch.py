"""verl's n-d dispatch: a batch split by data-parallel rank of a device mesh, whatever else the ranks do.

With tensor or pipeline parallelism several ranks hold the same data-parallel rank. Each worker declares its
place once (``self._register_dispatch_collect_info(mesh_name, dp_rank, is_collect)``); a method registered with
``dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name)`` then gets chunk ``dp_rank`` of every
DataProto / TensorDict argument (``dp_size`` = the largest dp_rank + 1 chunks), and the results of the ranks
marked ``is_collect`` are concatenated in rank order (a future of that for a non-blocking method).
"""

from __future__ import annotations

from functools import partial
from typing import Any

__all__ = ["make_nd_compute_dataproto_dispatch_fn"]


def _mesh_info(worker_group: Any, mesh_name: str) -> tuple[list[int], list[bool]]:
    """Each rank's data-parallel rank and collect flag for ``mesh_name`` (asked once per group, then cached)."""
    cache = worker_group.__dict__.setdefault("_nd_mesh_cache", {})
    if mesh_name not in cache:
        dp_ranks = worker_group.execute_all_sync("_query_dispatch_info", mesh_name)
        collect = worker_group.execute_all_sync("_query_collect_info", mesh_name)
        cache[mesh_name] = (list(dp_ranks), list(collect))
    return cache[mesh_name]


def _chunks(value: Any, n: int) -> list[Any] | None:
    """``value`` in ``n`` chunks along the batch dim, or None when it is not a batch."""
    from tensordict import TensorDict

    from verl.protocol import DataProto

    if isinstance(value, DataProto):
        return value.chunk(n)
    if isinstance(value, TensorDict):
        try:
            from verl.utils.tensordict_utils import chunk_tensordict
        except ImportError:
            return list(value.chunk(n))
        return chunk_tensordict(value, n)
    return None


def _concat(outputs: list[Any]) -> Any:
    import ray
    from tensordict import TensorDict

    from verl.protocol import DataProto

    if not outputs:
        return outputs
    if isinstance(outputs[0], ray.ObjectRef):
        from verl.protocol import DataProtoFuture

        return DataProtoFuture.concat(outputs)
    if isinstance(outputs[0], DataProto):
        return DataProto.concat(outputs)
    if isinstance(outputs[0], TensorDict):
        from verl.utils.tensordict_utils import concat_tensordict

        return concat_tensordict(outputs)
    return outputs


def dispatch_nd_compute_dataproto(mesh_name: str, worker_group: Any, *args: Any, **kwargs: Any):
    dp_ranks, _ = _mesh_info(worker_group, mesh_name)
    dp_size = max(dp_ranks) + 1

    def per_rank(value: Any) -> list[Any]:
        chunks = _chunks(value, dp_size)
        return [chunks[d] for d in dp_ranks] if chunks is not None else [value] * len(dp_ranks)

    return tuple(per_rank(a) for a in args), {k: per_rank(v) for k, v in kwargs.items()}


def collect_nd_compute_dataproto(mesh_name: str, worker_group: Any, outputs: list[Any]) -> Any:
    _, collect = _mesh_info(worker_group, mesh_name)
    return _concat([o for o, keep in zip(outputs, collect) if keep])


def make_nd_compute_dataproto_dispatch_fn(mesh_name: str) -> dict[str, Any]:
    """The dispatch mode (module docstring) for the device mesh ``mesh_name``."""
    return {
        "dispatch_fn": partial(dispatch_nd_compute_dataproto, mesh_name),
        "collect_fn": partial(collect_nd_compute_dataproto, mesh_name),
    }
