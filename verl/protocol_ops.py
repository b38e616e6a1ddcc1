"""The class-free helpers of `verl.protocol.DataProto` (verl's ``verl/protocol.py`` API): the conversion to and from
one ``TensorDict`` (verl's v2 batch form), the bodies of the key operations (``select``, ``pop``, ``rename``,
``union``) and of ``repeat``, mini-batch iteration (`make_iterator`), grouping rows (`fold_batch_dim` /
`unfold_batch_dim`, `unfold_column` for ``DataProto.unfold_column_chunks``) and the text of
``DataProto.get_data_info``.

``verl.protocol`` imports this module and re-exports its public names, so nothing here names the class: a helper
takes any object with a DataProto's fields (`RowBatch`) and builds results with ``type(data)``.
"""

from __future__ import annotations

import copy
import os
import pickle
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
import torch
from tensordict import TensorDict

from verl.protocol_tensordict import get_tensordict
from verl.protocol_utils import DataProtoError, _deep_equal, merge_meta_info, new_batch_like, to_object_array


class RowBatch(Protocol):
    """What these helpers use of a `verl.protocol.DataProto`."""

    batch: TensorDict | None
    non_tensor_batch: dict[str, np.ndarray]
    meta_info: dict

    def __len__(self) -> int: ...

    def __getitem__(self, item: Any) -> Any: ...

    def select_idxs(self, idxs: Any) -> Any: ...


Batch = TypeVar("Batch", bound=RowBatch)  # a helper that returns rows returns the class it was given

__all__ = ["fold_batch_dim", "unfold_batch_dim"]


# ---------------------------------------------------------------------------------------------------------------
# one TensorDict <-> DataProto
# ---------------------------------------------------------------------------------------------------------------


def dataproto_to_tensordict(data: RowBatch) -> TensorDict:
    """Tensors as they are, each non-tensor column as a ``NonTensorStack`` (one element per row, nested lists and
    dicts kept whole) and each meta_info entry as ``NonTensorData``. A key may not be in two of the three."""
    from tensordict.tensorclass import NonTensorData, NonTensorStack

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


def concat_dataprotos(data: Sequence[Batch]) -> Batch:
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


def unpad_dataproto(data: Batch, pad_size: int) -> Batch:
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


def fold_batch_dim(data: Batch, new_batch_size: int) -> Batch:
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


def unfold_batch_dim(data: Batch, batch_dims: int = 2) -> Batch:
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


def make_iterator(
    data: Batch, mini_batch_size: int, epochs: int, seed: int | None, dataloader_kwargs: dict | None
) -> Iterator[Batch]:
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

    def batches() -> Iterator[Batch]:
        for _ in range(epochs):
            for mini in loader:
                mini.meta_info = data.meta_info
                yield mini

    return iter(batches())


# ---------------------------------------------------------------------------------------------------------------
# description
# ---------------------------------------------------------------------------------------------------------------


def summary(data: RowBatch) -> str:
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


def size_report(data: RowBatch) -> str:
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


def data_info(data: RowBatch) -> str:
    """``DataProto.get_data_info``'s text."""
    lines = ["batch"]
    for key, val in [] if data.batch is None else data.batch.items():
        lines.append(f"  {key}: {tuple(val.shape)} ({val.dtype}) {val.device}")
    lines.append("non_tensor_batch")
    lines += [f"  {key}: ndarray{arr.shape} ({arr.dtype})" for key, arr in data.non_tensor_batch.items()]
    lines.append("meta_info")
    lines += [f"  {key}: {_type_info(val)}" for key, val in data.meta_info.items()]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# keys and repeats: the bodies of DataProto.select / pop / rename / union / repeat
# ---------------------------------------------------------------------------------------------------------------


def selected(
    data: RowBatch,
    batch_keys: Sequence[str] | None,
    non_tensor_batch_keys: Sequence[str] | None,
    meta_info_keys: Sequence[str] | None,
    deepcopy: bool,
) -> tuple[TensorDict | None, dict[str, np.ndarray], dict]:
    """The fields ``DataProto.select`` keeps (see its docstring); ``data`` is unchanged."""

    def pick(src: Mapping, keys: Sequence[str] | None, what: str) -> list[str]:
        if keys is None:
            return list(src.keys())
        keys = [keys] if isinstance(keys, str) else list(keys)
        missing = [k for k in keys if k not in src.keys()]
        if missing:
            raise KeyError(f"DataProto.select: {what} key(s) {missing} not found; available: {list(src.keys())}")
        return keys

    if data.batch is None and batch_keys:
        raise KeyError(f"DataProto.select: tensor key(s) {list(batch_keys)} requested but batch is None")
    batch = None if data.batch is None else data.batch.select(*pick(data.batch, batch_keys, "tensor"))
    non_tensor = {k: data.non_tensor_batch[k] for k in pick(data.non_tensor_batch, non_tensor_batch_keys, "non-tensor")}
    meta = {k: data.meta_info[k] for k in pick(data.meta_info, meta_info_keys, "meta_info")}
    if deepcopy:
        batch = None if batch is None else batch.clone()
        non_tensor, meta = copy.deepcopy((non_tensor, meta))
    return batch, non_tensor, meta


def popped(
    data: RowBatch,
    batch_keys: Sequence[str] | None,
    non_tensor_batch_keys: Sequence[str] | None,
    meta_info_keys: Sequence[str] | None,
) -> tuple[TensorDict | None, dict[str, np.ndarray], dict]:
    """The fields ``DataProto.pop`` removes from ``data`` (see its docstring)."""

    def check(src: Mapping, keys: Sequence[str] | None, what: str) -> list[str]:
        keys = [] if keys is None else [keys] if isinstance(keys, str) else list(keys)
        missing = [k for k in keys if k not in src.keys()]
        if missing:
            raise KeyError(f"DataProto.pop: {what} key(s) {missing} not found; available: {list(src.keys())}")
        return keys

    if data.batch is None and batch_keys:
        raise KeyError(f"DataProto.pop: tensor key(s) {list(batch_keys)} requested but batch is None")
    tensor_keys = [] if data.batch is None else check(data.batch, batch_keys, "tensor")
    nt_keys = check(data.non_tensor_batch, non_tensor_batch_keys, "non-tensor")
    meta_keys = check(data.meta_info, meta_info_keys, "meta_info")
    batch = None
    if tensor_keys:
        batch = new_batch_like({k: data.batch.pop(k) for k in tensor_keys}, len(data), data.batch)
    non_tensor = {k: data.non_tensor_batch.pop(k) for k in nt_keys}
    meta = {k: data.meta_info.pop(k) for k in meta_keys}
    return batch, non_tensor, meta


def rename_keys(data: RowBatch, old_keys: str | Sequence[str], new_keys: str | Sequence[str]) -> None:
    """``DataProto.rename`` in place (see its docstring)."""
    olds = [old_keys] if isinstance(old_keys, str) else list(old_keys)
    news = [new_keys] if isinstance(new_keys, str) else list(new_keys)
    if len(olds) != len(news):
        raise ValueError(f"DataProto.rename: {len(olds)} old keys but {len(news)} new keys")
    tensor_keys = set() if data.batch is None else set(data.batch.keys())
    for old, new in zip(olds, news):
        if old not in tensor_keys and old not in data.non_tensor_batch:
            raise KeyError(f"DataProto.rename: key {old!r} not found")
        if new != old and (new in tensor_keys or new in data.non_tensor_batch):
            raise ValueError(f"DataProto.rename: cannot rename {old!r} to {new!r}, which already exists")
        if old in tensor_keys:
            data.batch.rename_key_(old, new)
            tensor_keys = (tensor_keys - {old}) | {new}
        else:
            data.non_tensor_batch[new] = data.non_tensor_batch.pop(old)


def union_into(data: RowBatch, other: RowBatch) -> None:
    """``DataProto.union`` in place (see its docstring)."""
    has_rows_self = data.batch is not None or bool(data.non_tensor_batch)
    has_rows_other = other.batch is not None or bool(other.non_tensor_batch)
    if has_rows_self and has_rows_other and len(data) != len(other):
        raise DataProtoError(f"DataProto.union: lengths differ ({len(data)} vs {len(other)})")
    # validate everything before mutating, so a failed union leaves data untouched
    for what, mine, theirs in (
        ("tensor", data.batch, other.batch),
        ("non-tensor", data.non_tensor_batch, other.non_tensor_batch),
        ("meta_info", data.meta_info, other.meta_info),
    ):
        if mine is None or theirs is None:
            continue
        for key in theirs.keys():
            if key in mine.keys() and not _deep_equal(mine[key], theirs[key]):
                raise DataProtoError(
                    f"DataProto.union: {what} key {key!r} exists in both operands with different values; "
                    "rename or pop it on one side first"
                )
    if other.batch is not None:
        if data.batch is None:
            data.batch = other.batch.copy()
        else:
            for key, val in other.batch.items():
                if key not in data.batch.keys():
                    data.batch[key] = val
    data.non_tensor_batch.update(other.non_tensor_batch)
    data.meta_info.update(other.meta_info)


def repeated(data: RowBatch, repeat_times: int, interleave: bool) -> tuple[TensorDict | None, dict[str, np.ndarray]]:
    """The fields of ``DataProto.repeat`` (see its docstring)."""
    if not isinstance(repeat_times, int) or repeat_times < 1:
        raise DataProtoError(f"DataProto.repeat: repeat_times must be an int >= 1, got {repeat_times!r}")
    batch = None
    if data.batch is not None:
        tensors = {}
        for k, v in data.batch.items():
            if interleave:
                tensors[k] = v.repeat_interleave(repeat_times, dim=0)
            else:
                tensors[k] = v.repeat(repeat_times, *([1] * (v.dim() - 1)))
        batch = new_batch_like(tensors, len(data) * repeat_times, data.batch)
    non_tensor = {}
    for k, v in data.non_tensor_batch.items():
        if interleave:
            non_tensor[k] = np.repeat(v, repeat_times, axis=0)
        else:
            non_tensor[k] = np.tile(v, (repeat_times,) + (1,) * (v.ndim - 1))
    return batch, non_tensor
