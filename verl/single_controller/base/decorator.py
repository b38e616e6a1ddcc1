"""``@register(dispatch_mode=...)``: how a worker method's call is spread over a worker group and gathered back.

The controller calls ``worker_group.method(data)`` once; the mode says what each of the group's ``world_size``
workers receives and how their results become one value (as in verl's ``single_controller``):

- ``ONE_TO_ALL``: every worker gets the same arguments; the results come back as a list (one per rank).
- ``DP_COMPUTE_PROTO``: every `DataProto` argument is split into ``world_size`` equal slices (contiguous chunks, or
  mini-batch-interleaved and token-balanced: `dp_row_order`); the returned DataProtos are put back in the caller's
  row order, and ``meta_info["metrics"]`` lists are merged.
  With ``pad=True`` (inference methods) an uneven batch is padded with copies of its first rows and the result is
  trimmed back; without it (updates: copied rows would bias the gradient) an uneven batch is an error.
- ``RANK_ZERO``: every worker runs the call (collective methods need all ranks) and rank 0's result is returned.
- ``ALL_TO_ALL`` (the default, as in verl): an argument that is a list of ``world_size`` items gives rank r its r-th
  item when every argument is such a list; otherwise every worker gets the same arguments. Results come back as a
  list. ``DP_COMPUTE``: the same, but every argument must be such a list.
- A dict ``{"dispatch_fn": f, "collect_fn": g}`` is a custom mode: ``f(worker_group, *args, **kwargs)`` returns
  per-rank lists of arguments and ``g(worker_group, outputs)`` joins the results (verl's form, used by
  `make_nd_compute_dataproto_dispatch_fn`).

verl's other `register` arguments: ``blocking=False`` makes the group call return at once with futures (a
``DataProtoFuture`` for ``DP_COMPUTE_PROTO``, else Ray object refs), ``execute_mode=Execute.RANK_ZERO`` runs the
method on rank 0 only, ``materialize_futures`` fetches ``DataProtoFuture`` arguments before the call.

The local backend ignores the modes and calls the method directly: there ``world_size`` is 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch

from verl.protocol import DataProto, pad_dataproto_to_divisor, unpad_dataproto
from verl.single_controller.base.nd_dispatch import make_nd_compute_dataproto_dispatch_fn  # noqa: F401 (verl's path)
from verl.utils.seqlen_balancing import get_seqlen_balanced_partitions

MAGIC_ATTR = "_verl_dispatch_mode"
PAD_ATTR = "_verl_dispatch_pad"
CALL_ATTR = "_verl_call_options"


class Dispatch(str, Enum):
    ONE_TO_ALL = "one_to_all"
    ALL_TO_ALL = "all_to_all"
    DP_COMPUTE = "dp_compute"
    DP_COMPUTE_PROTO = "dp_compute_proto"
    RANK_ZERO = "rank_zero"


class Execute(str, Enum):
    """Which ranks run a call: all of them, or rank 0 alone (verl's execute modes)."""

    ALL = "all"
    RANK_ZERO = "rank_zero"


@dataclass(frozen=True)
class CallOptions:
    """How a group call of a registered method behaves besides its dispatch mode (see the module docstring)."""

    execute_mode: Execute = Execute.ALL
    blocking: bool = True
    materialize_futures: bool = True


def _as_dispatch(mode: Dispatch | str | dict) -> Dispatch | dict:
    if isinstance(mode, dict):
        missing = {"dispatch_fn", "collect_fn"} - set(mode)
        if missing:
            raise ValueError(f"a custom dispatch mode is a dict with dispatch_fn and collect_fn; missing {missing}")
        return mode
    try:
        return Dispatch(mode)
    except ValueError:
        raise ValueError(f"dispatch mode {mode!r}: use one of {[m.name for m in Dispatch]} or a dict") from None


def register(
    dispatch_mode: Dispatch | dict = Dispatch.ALL_TO_ALL,
    execute_mode: Execute = Execute.ALL,
    blocking: bool = True,
    materialize_futures: bool = True,
    pad: bool = False,
) -> Callable:
    """Mark a worker method as callable through a worker group with ``dispatch_mode`` (``pad`` and verl's other
    arguments: see above)."""
    mode = _as_dispatch(dispatch_mode)
    options = CallOptions(Execute(execute_mode), bool(blocking), bool(materialize_futures))

    def decorate(fn: Callable) -> Callable:
        setattr(fn, MAGIC_ATTR, mode)
        setattr(fn, PAD_ATTR, bool(pad))
        setattr(fn, CALL_ATTR, options)
        return fn

    return decorate


def call_options(cls: type, name: str) -> CallOptions:
    """The `CallOptions` of ``cls``'s registered method ``name``."""
    return getattr(getattr(cls, name, None), CALL_ATTR, CallOptions())


def registered_methods(cls: type) -> dict[str, tuple[Dispatch, bool]]:
    """``{method name: (dispatch mode, pad)}`` of every ``@register``-ed method of ``cls`` (inherited included)."""
    out = {}
    for name in dir(cls):
        fn = getattr(cls, name, None)
        mode = getattr(fn, MAGIC_ATTR, None)
        if mode is not None:
            out[name] = (mode, getattr(fn, PAD_ATTR, False))
    return out


def dp_row_order(data: DataProto, world_size: int, what: str) -> list[list[int]]:
    """Row indices of each rank's slice of ``data``, for ``DP_COMPUTE_PROTO``.

    Plain: equal contiguous chunks. Two ``meta_info`` hints refine it:

    - ``mini_batch_rows`` (M): the rows are consumed in optimizer mini-batches of M; each mini-batch is cut into one
      part per rank and rank r gets its part of every mini-batch, in order. Rank r's local mini-batch k is then
      its part of the global mini-batch k, so the update equals the single-process one on any worker count.
    - ``balance_batch``: the parts get similar token counts (``attention_mask`` sums), verl's sequence balancing.

    An uneven batch is an error naming the sizes (FSDP ranks must run the same number of forward passes).
    """
    n = len(data)
    if n % world_size:
        raise ValueError(
            f"{what}: a batch of {n} rows does not split evenly over {world_size} data-parallel workers; "
            f"make data.train_batch_size x rollout.n (and the validation set size, or data.val_batch_size) a "
            f"multiple of trainer.nnodes x trainer.n_gpus_per_node = {world_size}"
        )
    mini = int(data.meta_info.get("mini_batch_rows") or n)
    if n % mini or mini % world_size:
        mini = n
    balance = bool(data.meta_info.get("balance_batch")) and data.batch is not None and "attention_mask" in data.batch
    seqlens = data.batch["attention_mask"].sum(-1).tolist() if balance else None
    per_rank: list[list[int]] = [[] for _ in range(world_size)]
    for start in range(0, n, mini):
        rows = list(range(start, start + mini))
        if balance:
            parts = get_seqlen_balanced_partitions([seqlens[i] for i in rows], world_size, equal_size=True)
            parts = [[rows[i] for i in part] for part in parts]
        else:
            size = mini // world_size
            parts = [rows[r * size : (r + 1) * size] for r in range(world_size)]
        for r in range(world_size):
            per_rank[r].extend(parts[r])
    return per_rank


def with_mini_batch_rows(batch: DataProto, ppo_mini_batch_size: int) -> DataProto:
    """``batch`` (same tensors, new ``meta_info``) with the ``mini_batch_rows`` hint of `dp_row_order`:
    ``ppo_mini_batch_size`` prompts x ``meta_info["rollout_n"]`` responses per optimizer mini-batch."""
    rows = ppo_mini_batch_size * batch.meta_info.get("rollout_n", 1)
    meta = {**batch.meta_info, "mini_batch_rows": rows}
    return DataProto(batch=batch.batch, non_tensor_batch=batch.non_tensor_batch, meta_info=meta)


def dispatch_args(
    mode: Dispatch, world_size: int, args: tuple, kwargs: dict, what: str, pad: bool = False
) -> tuple[list[tuple[tuple, dict]], int, list[int] | None]:
    """Per-rank ``(args, kwargs)`` for one call, the number of padding rows added, and the row order the ranks'
    concatenated results come back in (None: unchanged); `collect_results` undoes both."""
    if mode in (Dispatch.ALL_TO_ALL, Dispatch.DP_COMPUTE):
        return split_per_rank(world_size, args, kwargs, what, strict=mode == Dispatch.DP_COMPUTE), 0, None
    if mode != Dispatch.DP_COMPUTE_PROTO:
        return [(args, kwargs)] * world_size, 0, None
    args, kwargs = list(args), dict(kwargs)
    protos = [(i, a) for i, a in enumerate(args) if isinstance(a, DataProto)]
    protos += [(k, v) for k, v in kwargs.items() if isinstance(v, DataProto)]
    if not protos:
        return [(tuple(args), kwargs)] * world_size, 0, None
    pad_size = 0
    # verl's auto padding: a DataProto may opt in itself (from_dict(auto_padding=True), DataProtoConfig.auto_padding)
    if pad or any(getattr(v, "is_padding_enabled", lambda: False)() for _, v in protos):
        for key, value in protos:
            padded, pad_size = pad_dataproto_to_divisor(value, world_size)
            if isinstance(key, int):
                args[key] = padded
            else:
                kwargs[key] = padded
    first = args[protos[0][0]] if isinstance(protos[0][0], int) else kwargs[protos[0][0]]
    rows = dp_row_order(first, world_size, what)
    contiguous = all(r == list(range(i * len(r), (i + 1) * len(r))) for i, r in enumerate(rows))
    per_rank = []
    for r in range(world_size):
        index = torch.tensor(rows[r], dtype=torch.long)

        def take(v: Any, index=index) -> Any:
            return v[index] if isinstance(v, DataProto) else v

        per_rank.append((tuple(take(a) for a in args), {k: take(v) for k, v in kwargs.items()}))
    order = None if contiguous else [i for r in rows for i in r]
    return per_rank, pad_size, order


def split_per_rank(world_size: int, args: tuple, kwargs: dict, what: str, strict: bool = False) -> list:
    """Per-rank ``(args, kwargs)``: rank r gets item r of each argument when every argument is a list of
    ``world_size`` items, else every rank gets the same arguments (``strict``: that is an error)."""
    values = [*args, *kwargs.values()]
    if values and all(isinstance(v, (list, tuple)) and len(v) == world_size for v in values):
        return [(tuple(a[r] for a in args), {k: v[r] for k, v in kwargs.items()}) for r in range(world_size)]
    if strict:
        raise ValueError(f"{what}: DP_COMPUTE needs every argument as a list of {world_size} items, one per rank")
    return [(args, kwargs)] * world_size


def collect_results(mode: Dispatch, results: list[Any], pad_size: int = 0, order: list[int] | None = None) -> Any:
    """One value from the per-rank ``results`` of a call: rows put back in the caller's order (``order`` from
    `dispatch_args`) and ``pad_size`` padding rows trimmed from the end."""
    if mode == Dispatch.RANK_ZERO:
        return results[0]
    if mode in (Dispatch.ONE_TO_ALL, Dispatch.ALL_TO_ALL, Dispatch.DP_COMPUTE):
        return results
    if not all(isinstance(r, DataProto) for r in results):
        return results
    with_rows = [r for r in results if (r.batch is not None and len(r.batch.keys())) or r.non_tensor_batch]
    # the rows are joined without their meta_info (concat would refuse per-rank values that differ, e.g. timings):
    # the result carries the first rank's meta_info, plus every rank's metrics below
    meta = dict((with_rows or results)[0].meta_info)
    out = DataProto(meta_info=meta)
    if with_rows:
        out = DataProto.concat([DataProto(batch=r.batch, non_tensor_batch=r.non_tensor_batch) for r in with_rows])
        out.meta_info = meta
    if order is not None and with_rows:
        inverse = torch.empty(len(order), dtype=torch.long)
        inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
        out = out[inverse]
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
