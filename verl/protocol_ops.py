"""The parts of verl's ``verl/protocol.py`` API around `verl.protocol.DataProto` that are not row operations: the
conversion to and from one ``TensorDict`` (verl's v2 batch form), mini-batch iteration (`make_iterator`,
`collate_fn`), grouping rows (`fold_batch_dim` / `unfold_batch_dim`, `unfold_column` for
``DataProto.unfold_column_chunks``), `DataProtoFuture` (results of Ray calls not fetched yet) and the text of
``DataProto.get_data_info``.

All names are importable from `verl.protocol`; this module imports the class lazily (``verl.protocol`` imports this
one at load time).
"""

from __future__ import annotations

import os
import pickle
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDict

from verl.protocol_utils import (
    DataProtoError,
    list_of_dict_to_dict_of_list,
    merge_meta_info,
    new_batch_like,
    to_object_array,
)

if TYPE_CHECKING:
    from verl.protocol import DataProto, DataProtoItem

__all__ = ["DataProtoFuture", "collate_fn", "fold_batch_dim", "unfold_batch_dim"]


# ---------------------------------------------------------------------------------------------------------------
# one TensorDict <-> DataProto
# ---------------------------------------------------------------------------------------------------------------


def dataproto_to_tensordict(data: DataProto) -> TensorDict:
    """Tensors as they are, each non-tensor column as a ``NonTensorStack`` (one element per row, nested lists and
    dicts kept whole) and each meta_info entry as ``NonTensorData``. A key may not be in two of the three."""
    from tensordict.tensorclass import NonTensorData, NonTensorStack

    from verl.utils.tensordict_utils import get_tensordict

    tensors: dict[str, Any] = {} if data.batch is None else data.batch.to_dict()
    for group, keys in (("non_tensor_batch", data.non_tensor_batch), ("meta_info", data.meta_info)):
        clash = sorted(set(keys) & set(tensors))
        if clash:
            raise DataProtoError(f"DataProto.to_tensordict: key(s) {clash} are both tensors and in {group}; rename one")
        if group == "non_tensor_batch":
            for key, val in data.non_tensor_batch.items():
                tensors[key] = NonTensorStack.from_list([NonTensorData(item) for item in val])
    return get_tensordict(tensor_dict=tensors, non_tensor_dict=dict(data.meta_info))


def dataproto_fields_from_tensordict(td: TensorDict) -> tuple[dict[str, torch.Tensor], dict[str, np.ndarray], dict]:
    """``(tensors, non-tensor columns, meta_info)`` of a TensorDict made by `dataproto_to_tensordict` (or verl's
    ``tensordict_utils.get_tensordict``)."""
    from tensordict.tensorclass import NonTensorData, NonTensorStack

    tensors: dict[str, torch.Tensor] = {}
    non_tensors: dict[str, np.ndarray] = {}
    meta: dict = {}
    for key, val in td.items():
        if isinstance(val, torch.Tensor):
            tensors[key] = val
        elif isinstance(val, NonTensorStack):
            non_tensors[key] = to_object_array(val.tolist())
        elif isinstance(val, NonTensorData):
            meta[key] = val.data
        else:
            raise TypeError(f"DataProto.from_tensordict: {key!r} holds a {type(val).__name__}, not a tensor or data")
    return tensors, non_tensors, meta


# ---------------------------------------------------------------------------------------------------------------
# joining and padding
# ---------------------------------------------------------------------------------------------------------------


def concat_dataprotos(data: Sequence[DataProto]) -> DataProto:
    """``DataProto.concat`` (see its docstring); the result has the first part's class."""
    if len(data) == 0:
        raise DataProtoError("DataProto.concat: need at least one DataProto")
    first = data[0]
    tensor_keys = set() if first.batch is None else set(first.batch.keys())
    nt_keys = set(first.non_tensor_batch)
    for i, d in enumerate(data[1:], start=1):
        for what, ref, got in (
            ("tensor", tensor_keys, set() if d.batch is None else set(d.batch.keys())),
            ("non-tensor", nt_keys, set(d.non_tensor_batch)),
        ):
            if ref != got:
                key = sorted(ref ^ got)[0]
                where = "part 0" if key in ref else f"part {i}"
                raise DataProtoError(
                    f"DataProto.concat: {what} key {key!r} is only in {where} (part 0 keys {sorted(ref)}, "
                    f"part {i} keys {sorted(got)})"
                )
    batch = None
    if any(d.batch is not None for d in data):
        tensors = {}
        for key in first.batch.keys() if first.batch is not None else []:
            try:
                tensors[key] = torch.cat([d.batch[key] for d in data], dim=0)
            except RuntimeError as e:
                raise DataProtoError(f"DataProto.concat: cannot concatenate tensor {key!r}: {e}") from e
        like = next(d.batch for d in data if d.batch is not None)
        batch = new_batch_like(tensors, sum(len(d) for d in data), like)
    non_tensor = {}
    for key in first.non_tensor_batch:
        try:
            non_tensor[key] = np.concatenate([d.non_tensor_batch[key] for d in data], axis=0)
        except ValueError as e:
            raise DataProtoError(f"DataProto.concat: cannot concatenate non-tensor {key!r}: {e}") from e
    meta = merge_meta_info([d.meta_info for d in data])
    return type(first)(batch=batch, non_tensor_batch=non_tensor, meta_info=meta)


def pad_dataproto_to_divisor(data: DataProto, size_divisor: int) -> tuple[DataProto, int]:
    """Pad ``data`` so its length is a multiple of ``size_divisor``, e.g. before ``chunk(world_size)``.

    Padding rows are copies of rows from the start (cycling again if more padding than rows is needed).
    Returns ``(padded, pad_size)``; undo with ``unpad_dataproto(result, pad_size)``. An empty DataProto is
    returned unchanged with ``pad_size == 0`` (there is nothing to copy).
    """
    from verl.protocol import DataProto

    if not isinstance(data, DataProto):
        raise TypeError(f"pad_dataproto_to_divisor expects a DataProto, got {type(data).__name__}")
    if not isinstance(size_divisor, int) or size_divisor <= 0:
        raise DataProtoError(f"size_divisor must be a positive int, got {size_divisor!r}")
    n = len(data)
    if n == 0 or n % size_divisor == 0:
        return data, 0
    pad_size = size_divisor - n % size_divisor
    padding = data.select_idxs(np.arange(pad_size) % n)
    return concat_dataprotos([data, padding]), pad_size


def unpad_dataproto(data: DataProto, pad_size: int) -> DataProto:
    """Drop the last ``pad_size`` rows added by `pad_dataproto_to_divisor`."""
    if pad_size < 0 or pad_size > len(data):
        raise DataProtoError(f"unpad_dataproto: pad_size {pad_size} is out of range for length {len(data)}")
    if pad_size == 0:
        return data
    return data[: len(data) - pad_size]  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------------------------
# repeating and regrouping rows
# ---------------------------------------------------------------------------------------------------------------


def repeat_counts(repeat_times: Sequence[int] | np.ndarray | torch.Tensor, rows: int) -> np.ndarray:
    """``repeat_times`` of ``DataProto.sample_level_repeat`` as an int64 array, one non-negative count per row."""
    if isinstance(repeat_times, torch.Tensor):
        repeat_times = repeat_times.detach().cpu().numpy()
    counts = np.asarray(repeat_times)
    if counts.ndim != 1 or counts.shape[0] != rows:
        raise DataProtoError(
            f"DataProto.sample_level_repeat: repeat_times needs one count per row ({rows}), got shape {counts.shape}"
        )
    if counts.size and (not np.issubdtype(counts.dtype, np.integer) or counts.min() < 0):
        raise DataProtoError(f"DataProto.sample_level_repeat: repeat_times must be non-negative ints, got {counts}")
    return counts.astype(np.int64)


def unfold_column(key: str, val: Any, n_split: int, split: bool) -> Any:
    """One column of ``DataProto.unfold_column_chunks``: dim 1 cut into ``n_split`` rows (``split``), else every
    row repeated ``n_split`` times. ``val`` is a tensor or a numpy array."""
    if not split:
        if isinstance(val, torch.Tensor):
            return val.repeat_interleave(n_split, dim=0)
        return np.repeat(val, n_split, axis=0)
    if isinstance(val, np.ndarray) and val.ndim == 1 and val.dtype == object:
        lengths = {len(x) for x in val}
        if len(lengths) > 1:
            raise DataProtoError(
                f"unfold_column_chunks: {key!r} holds sequences of different lengths {sorted(lengths)}"
            )
        rows = np.empty((len(val), lengths.pop() if lengths else 0), dtype=object)
        for i, x in enumerate(val):
            rows[i, :] = list(x)
        val = rows
    if val.ndim < 2 or val.shape[1] % n_split:
        raise DataProtoError(
            f"unfold_column_chunks: {key!r} has shape {tuple(val.shape)}; its dim 1 must divide into n_split={n_split}"
        )
    shape = (val.shape[0] * n_split, val.shape[1] // n_split, *val.shape[2:])
    return val.reshape(shape)


def fold_batch_dim(data: DataProto, new_batch_size: int) -> DataProto:
    """Group consecutive rows: ``[bs, ...] -> [new_batch_size, bs // new_batch_size, ...]`` for every tensor and
    non-tensor (e.g. a prompt's n responses into one row), so shuffles and chunks move whole groups."""
    n = len(data)
    if new_batch_size <= 0 or n % new_batch_size:
        raise DataProtoError(f"fold_batch_dim: {n} rows do not fold into new_batch_size={new_batch_size} groups")
    batch = None
    if data.batch is not None:
        tensors = {k: v.reshape(new_batch_size, -1, *v.shape[1:]) for k, v in data.batch.items()}
        batch = TensorDict(tensors, batch_size=[new_batch_size], device=data.batch.device)
    non_tensor = {k: np.reshape(v, (new_batch_size, -1, *v.shape[1:])) for k, v in data.non_tensor_batch.items()}
    return type(data)(batch=batch, non_tensor_batch=non_tensor, meta_info=data.meta_info)


def unfold_batch_dim(data: DataProto, batch_dims: int = 2) -> DataProto:
    """The inverse of `fold_batch_dim`: the first ``batch_dims`` dims of every column become one row dim."""
    if batch_dims < 1:
        raise DataProtoError(f"unfold_batch_dim: batch_dims must be >= 1, got {batch_dims}")

    def flat(key: str, v: Any) -> Any:
        if v.ndim < batch_dims:
            raise DataProtoError(f"unfold_batch_dim: {key!r} has {v.ndim} dims, fewer than batch_dims={batch_dims}")
        return v.reshape(-1, *v.shape[batch_dims:])

    batch = None
    if data.batch is not None:
        tensors = {k: flat(k, v) for k, v in data.batch.items()}
        rows = next(iter(tensors.values())).shape[0] if tensors else len(data)
        batch = TensorDict(tensors, batch_size=[rows], device=data.batch.device)
    non_tensor = {k: flat(k, v) for k, v in data.non_tensor_batch.items()}
    return type(data)(batch=batch, non_tensor_batch=non_tensor, meta_info=data.meta_info)


# ---------------------------------------------------------------------------------------------------------------
# mini-batch iteration
# ---------------------------------------------------------------------------------------------------------------


def _stack_column(values: list[Any]) -> np.ndarray:
    """A non-tensor column rebuilt from its rows: equal-shape arrays (rows of a 2-D column) stack back, anything
    else becomes a 1-D object array."""
    if values and all(isinstance(v, np.ndarray) for v in values) and len({v.shape for v in values}) == 1:
        return np.stack(values).astype(object)
    return to_object_array(values)


def collate_fn(items: list[DataProtoItem]) -> DataProto:
    """A `DataProto` from rows (`DataProtoItem`s), as a ``DataLoader`` over a DataProto yields them."""
    from verl.protocol import DataProto

    batches = [it.batch for it in items]
    batch = None if not batches or batches[0] is None else torch.stack(batches).contiguous()
    columns = list_of_dict_to_dict_of_list([it.non_tensor_batch for it in items])
    return DataProto(batch=batch, non_tensor_batch={k: _stack_column(v) for k, v in columns.items()})


def make_iterator(
    data: DataProto, mini_batch_size: int, epochs: int, seed: int | None, dataloader_kwargs: dict | None
) -> Iterator[DataProto]:
    """``DataProto.make_iterator``: a ``DataLoader`` over the row numbers (the sampler, and so the order for a
    seed, is what a loader over the DataProto itself would draw), each mini-batch taken with ``select_idxs``."""
    from torch.utils.data import DataLoader

    if not isinstance(mini_batch_size, int) or mini_batch_size <= 0 or len(data) % mini_batch_size:
        raise DataProtoError(
            f"DataProto.make_iterator: {len(data)} rows do not split into mini-batches of {mini_batch_size}; "
            "choose a mini_batch_size that divides the length"
        )
    kwargs = dict(dataloader_kwargs or {})
    generator = None
    if seed is not None:
        generator = torch.Generator()
        generator.manual_seed(seed)
    loader = DataLoader(
        range(len(data)), batch_size=mini_batch_size, collate_fn=data.select_idxs, generator=generator, **kwargs
    )

    def batches() -> Iterator[DataProto]:
        for _ in range(epochs):
            for mini in loader:
                mini.meta_info = data.meta_info
                yield mini

    return iter(batches())


# ---------------------------------------------------------------------------------------------------------------
# futures
# ---------------------------------------------------------------------------------------------------------------


def _take_chunk(data: Any, index: int, chunks: int) -> Any:
    return data.chunk(chunks=chunks)[index]


@dataclass
class DataProtoFuture:
    """The not-yet-fetched result of Ray calls on a worker group: ``futures`` (``ray.ObjectRef``s, one per rank),
    ``collect_fn`` to join them, and ``dispatch_fn`` to cut the joined result for one consumer rank. Passing it
    from one worker-group call to the next keeps the data off the driver. Only `get` and `chunk` work on it."""

    collect_fn: Callable
    futures: list[Any]
    dispatch_fn: Callable | None = None

    @staticmethod
    def concat(data: list[Any]) -> DataProtoFuture:
        """A future of the `DataProto.concat` of the results behind ``data``."""
        from verl.protocol import DataProto

        return DataProtoFuture(collect_fn=DataProto.concat, futures=data)

    def chunk(self, chunks: int) -> list[DataProtoFuture]:
        """``chunks`` futures, the i-th resolving to chunk i of this one's result."""
        return [
            DataProtoFuture(self.collect_fn, self.futures, dispatch_fn=partial(_take_chunk, index=i, chunks=chunks))
            for i in range(chunks)
        ]

    def get(self) -> Any:
        """Fetch the results (``ray.get``), join them (DataProtos with `DataProto.concat`, TensorDicts with
        ``tensordict_utils.concat_tensordict``) and apply ``dispatch_fn``."""
        import ray

        from verl.protocol import DataProto

        outputs = ray.get(self.futures)
        if all(isinstance(o, DataProto) for o in outputs):
            output = DataProto.concat(outputs)
        elif all(isinstance(o, TensorDict) for o in outputs):
            from verl.utils.tensordict_utils import concat_tensordict

            output = concat_tensordict(outputs)
        else:
            kinds = sorted({type(o).__name__ for o in outputs})
            raise TypeError(f"DataProtoFuture.get: the futures hold {kinds}; expected all DataProto or all TensorDict")
        return output if self.dispatch_fn is None else self.dispatch_fn(output)


# ---------------------------------------------------------------------------------------------------------------
# description
# ---------------------------------------------------------------------------------------------------------------


def summary(data: DataProto) -> str:
    """``repr(data)``: one line with the length, each tensor's shape/dtype/device, the non-tensors, meta_info keys."""
    parts = ["batch=None"]
    if data.batch is not None:
        items = ", ".join(
            f"{k}: {tuple(v.shape)} {str(v.dtype).removeprefix('torch.')} {v.device}" for k, v in data.batch.items()
        )
        parts = [f"batch={{{items}}}"]
    items = ", ".join(f"{k}: {v.shape} {v.dtype}" for k, v in data.non_tensor_batch.items())
    parts += [f"non_tensor_batch={{{items}}}", f"meta_info_keys={list(data.meta_info)}"]
    return f"{type(data).__name__}(len={len(data)}, " + ", ".join(parts) + ")"


def size_report(data: DataProto) -> str:
    """``DataProto.print_size``'s text: GB held by the tensors and by the non-tensor arrays, and the summary."""
    tensor_bytes = 0 if data.batch is None else sum(v.element_size() * v.numel() for v in data.batch.values())
    array_bytes = sum(v.nbytes for v in data.non_tensor_batch.values())
    return (
        f"Size of tensordict: {tensor_bytes / 1024**3:.6f} GB, size of non_tensor_batch: "
        f"{array_bytes / 1024**3:.6f} GB; {summary(data)}"
    )


def read_pickle(filepath: str | os.PathLike) -> Any:
    """What ``DataProto.load_from_disk`` reads: a pickle (``save_to_disk``, verl's format) or a ``torch.save`` zip
    file (this package's format before). Unpickling can run arbitrary code."""
    if zipfile.is_zipfile(filepath):
        return torch.load(filepath, weights_only=False)
    with open(filepath, "rb") as f:
        return pickle.load(f)


def _type_info(value: Any) -> str:
    """Short nested type of a meta_info value: ``list[int]``, ``dict[str: float]``, ``ndarray(3,) (object)``."""
    if isinstance(value, list):
        kinds = sorted({_type_info(v) for v in value[:3]})
        return f"list[{'|'.join(kinds) if kinds else '...'}]"
    if isinstance(value, tuple):
        return f"tuple({', '.join(_type_info(v) for v in value)})"
    if isinstance(value, dict):
        if not value:
            return "dict"
        k, v = next(iter(value.items()))
        return f"dict[{_type_info(k)}: {_type_info(v)}]"
    if isinstance(value, np.ndarray):
        return f"ndarray{value.shape} ({value.dtype})"
    return type(value).__name__


def data_info(data: DataProto) -> str:
    """``DataProto.get_data_info``'s text."""
    lines = ["batch"]
    for key, val in [] if data.batch is None else data.batch.items():
        lines.append(f"  {key}: {tuple(val.shape)} ({val.dtype}) {val.device}")
    lines.append("non_tensor_batch")
    lines += [f"  {key}: ndarray{arr.shape} ({arr.dtype})" for key, arr in data.non_tensor_batch.items()]
    lines.append("meta_info")
    lines += [f"  {key}: {_type_info(val)}" for key, val in data.meta_info.items()]
    return "\n".join(lines)
