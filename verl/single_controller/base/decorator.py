"""``@register(dispatch_mode=...)``: how a worker method's call is spread over a worker group and gathered back.

The controller calls ``worker_group.method(data)`` once; the mode says what each of the group's ``world_size``
workers receives and how their results become one value (as in verl's ``single_controller``):

- ``ONE_TO_ALL``: every worker gets the same arguments; the results come back as a list (one per rank).
- ``DP_COMPUTE_PROTO``: every `DataProto` argument is split into ``world_size`` equal contiguous chunks (rank r gets
  chunk r); the returned DataProtos are concatenated in rank order, and ``meta_info["metrics"]`` lists are merged.
  With ``pad=True`` (inference methods) an uneven batch is padded with copies of its first rows and the result is
  trimmed back; without it (updates: copied rows would bias the gradient) an uneven batch is an error.
- ``RANK_ZERO``: every worker runs the call (collective methods need all ranks) and rank 0's result is returned.

The local backend ignores the modes and calls the method directly: there ``world_size`` is 1.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

from verl.protocol import DataProto, pad_dataproto_to_divisor, unpad_dataproto

MAGIC_ATTR = "_verl_dispatch_mode"
PAD_ATTR = "_verl_dispatch_pad"


class Dispatch(str, Enum):
    ONE_TO_ALL = "one_to_all"
    DP_COMPUTE_PROTO = "dp_compute_proto"
    RANK_ZERO = "rank_zero"


def register(dispatch_mode: Dispatch = Dispatch.ONE_TO_ALL, pad: bool = False) -> Callable:
    """Mark a worker method as callable through a worker group with ``dispatch_mode`` (``pad``: see above)."""

    def decorate(fn: Callable) -> Callable:
        setattr(fn, MAGIC_ATTR, Dispatch(dispatch_mode))
        setattr(fn, PAD_ATTR, bool(pad))
        return fn

    return decorate


def registered_methods(cls: type) -> dict[str, tuple[Dispatch, bool]]:
    """``{method name: (dispatch mode, pad)}`` of every ``@register``-ed method of ``cls`` (inherited included)."""
    out = {}
    for name in dir(cls):
        fn = getattr(cls, name, None)
        mode = getattr(fn, MAGIC_ATTR, None)
        if mode is not None:
            out[name] = (mode, getattr(fn, PAD_ATTR, False))
    return out


def split_for_dp(data: DataProto, world_size: int, what: str) -> list[DataProto]:
    """``world_size`` equal contiguous chunks of ``data``; an uneven batch is an error naming the sizes (FSDP ranks
    must run the same number of forward passes, so no rank may get a different row count)."""
    if len(data) % world_size:
        raise ValueError(
            f"{what}: a batch of {len(data)} rows does not split evenly over {world_size} data-parallel workers; "
            f"make data.train_batch_size x rollout.n (and the validation set size, or data.val_batch_size) a "
            f"multiple of trainer.nnodes x trainer.n_gpus_per_node = {world_size}"
        )
    return data.chunk(world_size)


def dispatch_args(
    mode: Dispatch, world_size: int, args: tuple, kwargs: dict, what: str, pad: bool = False
) -> tuple[list[tuple[tuple, dict]], int]:
    """Per-rank ``(args, kwargs)`` for one call, and the number of padding rows added (to trim from the result)."""
    if mode != Dispatch.DP_COMPUTE_PROTO:
        return [(args, kwargs)] * world_size, 0
    pad_size = 0
    if pad:
        args = list(args)
        for i, a in enumerate(args):
            if isinstance(a, DataProto):
                args[i], pad_size = pad_dataproto_to_divisor(a, world_size)
        for k, v in kwargs.items():
            if isinstance(v, DataProto):
                kwargs[k], pad_size = pad_dataproto_to_divisor(v, world_size)
    split_args = [split_for_dp(a, world_size, what) if isinstance(a, DataProto) else [a] * world_size for a in args]
    split_kwargs = {
        k: split_for_dp(v, world_size, what) if isinstance(v, DataProto) else [v] * world_size
        for k, v in kwargs.items()
    }
    per_rank = [
        (tuple(a[r] for a in split_args), {k: v[r] for k, v in split_kwargs.items()}) for r in range(world_size)
    ]
    return per_rank, pad_size


def collect_results(mode: Dispatch, results: list[Any], pad_size: int = 0) -> Any:
    """One value from the per-rank ``results`` of a call (``pad_size`` padding rows trimmed from the end)."""
    if mode == Dispatch.RANK_ZERO:
        return results[0]
    if mode == Dispatch.ONE_TO_ALL:
        return results
    if not all(isinstance(r, DataProto) for r in results):
        return results
    with_rows = [r for r in results if r.batch or r.non_tensor_batch]
    out = DataProto.concat(with_rows) if with_rows else DataProto(meta_info=dict(results[0].meta_info))
    if pad_size and with_rows:
        out = unpad_dataproto(out, pad_size)
    metrics = [r.meta_info.get("metrics") for r in results]
    if any(m is not None for m in metrics):
        merged: dict[str, list] = {}
        for m in metrics:
            for k, v in (m or {}).items():
                merged.setdefault(k, []).extend(v if isinstance(v, list) else [v])
        out.meta_info["metrics"] = merged
    return out
