"""`DataProto`: the single batch type exchanged between every stage of the trainer.

A `DataProto` holds three things:

* ``batch``: ``dict[str, torch.Tensor]`` (or ``None``) -- per-sample tensors; every tensor's dim 0 is the
  sample dimension.
* ``non_tensor_batch``: ``dict[str, np.ndarray]`` -- per-sample Python objects (strings, dicts, ragged lists)
  kept in numpy arrays, usually ``dtype=object``; dim 0 is again the sample dimension.
* ``meta_info``: ``dict`` -- batch-level information (temperature, global step, metrics...) that is not indexed
  per sample and is carried along unchanged by row operations.

Every tensor and every non-tensor array must agree on dim 0; that size is ``len(data)``. The invariant is
checked on construction (`DataProto.check_consistency`) so a mismatch fails where it is created, naming the key.

Row operations (indexing, `slice`, `chunk`, `split`, `repeat`, `concat`, ...) apply to tensors and non-tensors
together, so per-sample data never goes out of step. Derived objects get a shallow copy of ``meta_info`` (the
dict is new, its values are shared). Basic slices are views of the parent's tensors, as with torch; index
lists / masks copy.

The object is plain-picklable (it will cross Ray process boundaries); pickling compacts tensors that are
views of a larger storage so a small slice does not ship its parent's whole buffer.

The public names mirror volcengine/verl's ``verl/protocol.py`` so user code ports over, but the storage is a
plain dict rather than a TensorDict.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from verl.protocol_utils import (  # the helpers that do not need the class; public ones re-exported below
    IndexLike,
    _as_non_tensor,
    _compact,
    _deep_equal,
    _index_array,
    _merge_dicts,  # noqa: F401 (kept importable from verl.protocol)
    _tensor_equal,
    list_of_dict_to_dict_of_list,
    to_object_array,
    union_numpy_dict,
    union_tensor_dict,
)

__all__ = [
    "DataProto",
    "DataProtoItem",
    "pad_dataproto_to_divisor",
    "unpad_dataproto",
    "union_tensor_dict",
    "union_numpy_dict",
    "list_of_dict_to_dict_of_list",
    "to_object_array",
]


# ---------------------------------------------------------------------------------------------------------------
# DataProtoItem
# ---------------------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class DataProtoItem:
    """One row of a `DataProto` (what ``data[i]`` returns): each tensor / array indexed at ``i``."""

    batch: dict[str, torch.Tensor] | None = None
    non_tensor_batch: dict[str, Any] = field(default_factory=dict)
    meta_info: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------------------
# DataProto
# ---------------------------------------------------------------------------------------------------------------


@dataclass(eq=False, repr=False)
class DataProto:
    """A batch of samples: per-sample tensors, per-sample non-tensors, and batch-level meta_info.

    See the module docstring for the invariants. Construct with `DataProto.from_dict` /
    `DataProto.from_single_dict` (which convert lists), or directly with the three fields.
    """

    batch: dict[str, torch.Tensor] | None = None
    non_tensor_batch: dict[str, np.ndarray] = field(default_factory=dict)
    meta_info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.batch is not None and not isinstance(self.batch, dict):
            if not isinstance(self.batch, Mapping):
                raise TypeError(f"DataProto.batch must be a dict of tensors or None, got {type(self.batch).__name__}")
            self.batch = dict(self.batch)
        if self.non_tensor_batch is None:
            self.non_tensor_batch = {}
        elif not isinstance(self.non_tensor_batch, Mapping):
            raise TypeError(
                f"DataProto.non_tensor_batch must be a dict of numpy arrays, got {type(self.non_tensor_batch).__name__}"
            )
        self.non_tensor_batch = {k: _as_non_tensor(k, v) for k, v in self.non_tensor_batch.items()}
        if self.meta_info is None:
            self.meta_info = {}
        self.check_consistency()

    # ----------------------------------------------------------------------------------------------- validation

    def check_consistency(self) -> None:
        """Raise if the fields break the invariants (types, and one shared dim-0 size).

        Public so callers can re-check after mutating the dicts by hand.
        """
        if not isinstance(self.meta_info, dict):
            raise TypeError(f"DataProto.meta_info must be a dict, got {type(self.meta_info).__name__}")
        ref_key: str | None = None
        ref_size = 0
        for key, val in (self.batch or {}).items():
            if not isinstance(val, torch.Tensor):
                raise TypeError(f"DataProto.batch[{key!r}] must be a torch.Tensor, got {type(val).__name__}")
            if val.dim() == 0:
                raise ValueError(f"DataProto.batch[{key!r}] is a 0-d tensor; per-sample data needs a batch dim 0")
            if ref_key is None:
                ref_key, ref_size = key, val.shape[0]
            elif val.shape[0] != ref_size:
                raise ValueError(
                    f"DataProto: tensor {key!r} has size {val.shape[0]} in dim 0, "
                    f"but tensor {ref_key!r} has size {ref_size}"
                )
        for key, val in self.non_tensor_batch.items():
            if not isinstance(val, np.ndarray):
                raise TypeError(
                    f"DataProto.non_tensor_batch[{key!r}] must be a numpy array (dtype=object), got {type(val).__name__}"
                )
            if val.ndim == 0:
                raise ValueError(f"DataProto.non_tensor_batch[{key!r}] is a 0-d array; it needs a batch dim 0")
            if ref_key is None:
                ref_key, ref_size = key, val.shape[0]
            elif val.shape[0] != ref_size:
                raise ValueError(
                    f"DataProto: non-tensor {key!r} has length {val.shape[0]}, but {ref_key!r} has size {ref_size}"
                )

    # --------------------------------------------------------------------------------------------- construction

    @classmethod
    def from_dict(
        cls,
        tensors: Mapping[str, torch.Tensor] | None = None,
        non_tensors: Mapping[str, np.ndarray | Sequence[Any]] | None = None,
        meta_info: dict | None = None,
    ) -> DataProto:
        """Build from a dict of tensors plus optional non-tensors and meta_info.

        Non-tensor lists become 1-D object arrays (a list of N dicts/lists stays length N). ``batch`` is ``None``
        when no tensors are given. The input dicts are copied, so later `pop`/`rename` do not touch them.
        """
        batch = None
        if tensors:
            batch = {}
            for key, val in tensors.items():
                if not isinstance(val, torch.Tensor):
                    raise TypeError(f"DataProto.from_dict: tensors[{key!r}] is {type(val).__name__}, not a Tensor")
                batch[key] = val
        non_tensor_batch = {k: _as_non_tensor(k, v) for k, v in (non_tensors or {}).items()}
        return cls(batch=batch, non_tensor_batch=non_tensor_batch, meta_info=dict(meta_info or {}))

    @classmethod
    def from_single_dict(cls, data: Mapping[str, Any], meta_info: dict | None = None) -> DataProto:
        """Build from one mixed dict: tensors go to ``batch``; numpy arrays and lists to ``non_tensor_batch``."""
        tensors: dict[str, torch.Tensor] = {}
        non_tensors: dict[str, Any] = {}
        for key, val in data.items():
            if isinstance(val, torch.Tensor):
                tensors[key] = val
            elif isinstance(val, (np.ndarray, list, tuple)):
                non_tensors[key] = val
            else:
                raise TypeError(
                    f"DataProto.from_single_dict: value {key!r} has unsupported type {type(val).__name__} "
                    "(expected torch.Tensor, numpy array or list)"
                )
        return cls.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info=meta_info)

    def _new(
        self,
        batch: dict[str, torch.Tensor] | None,
        non_tensor_batch: dict[str, np.ndarray],
        meta_info: dict | None = None,
    ) -> DataProto:
        """Derived object of the same class; meta_info is shallow-copied from self unless given."""
        return type(self)(
            batch=batch,
            non_tensor_batch=non_tensor_batch,
            meta_info=dict(self.meta_info) if meta_info is None else meta_info,
        )

    # ------------------------------------------------------------------------------------------- basic protocol

    def __len__(self) -> int:
        """Number of samples: dim 0 of any tensor, else of any non-tensor array, else 0."""
        if self.batch:
            return next(iter(self.batch.values())).shape[0]
        if self.non_tensor_batch:
            return next(iter(self.non_tensor_batch.values())).shape[0]
        return 0

    def __getitem__(self, item: int | np.integer | slice | IndexLike) -> DataProtoItem | DataProto:
        """``data[i]`` -> `DataProtoItem` (one row); slice, index list/array/tensor or bool mask -> `DataProto`."""
        if isinstance(item, slice):
            return self.slice(item.start, item.stop, item.step)
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            n = len(self)
            i = int(item)
            if not -n <= i < n:
                raise IndexError(f"DataProto index {i} is out of range for length {n}")
            row_batch = None if self.batch is None else {k: v[i] for k, v in self.batch.items()}
            row_non_tensor = {k: v[i] for k, v in self.non_tensor_batch.items()}
            return DataProtoItem(batch=row_batch, non_tensor_batch=row_non_tensor, meta_info=self.meta_info)
        if isinstance(item, torch.Tensor) and item.dim() == 0 and item.dtype == torch.bool:
            raise TypeError("DataProto index: a 0-d bool tensor is neither a row number nor a per-row mask")
        if isinstance(item, torch.Tensor) and item.dim() == 0 and not item.dtype.is_floating_point:
            return self[int(item)]
        if isinstance(item, (list, tuple, np.ndarray, torch.Tensor)):
            return self.select_idxs(item)
        if isinstance(item, str):
            raise TypeError(
                f"DataProto indexes rows, not keys; use data.batch[{item!r}] or data.non_tensor_batch[{item!r}]"
            )
        raise TypeError(f"DataProto cannot be indexed with {type(item).__name__}")

    def __iter__(self) -> Iterator[DataProtoItem]:
        """Iterate rows as `DataProtoItem`s."""
        for i in range(len(self)):
            yield self[i]  # type: ignore[misc]

    def __getstate__(self) -> dict:
        # Tensors that are views into a bigger buffer (e.g. after slicing/chunking) would pickle the whole
        # buffer; ship compact copies instead.
        batch = None if self.batch is None else {k: _compact(v) for k, v in self.batch.items()}
        return {"batch": batch, "non_tensor_batch": self.non_tensor_batch, "meta_info": self.meta_info}

    def __setstate__(self, state: dict) -> None:
        self.batch = state["batch"]
        self.non_tensor_batch = state["non_tensor_batch"]
        self.meta_info = state["meta_info"]

    def _summary(self) -> str:
        parts = []
        if self.batch is not None:
            items = ", ".join(
                f"{k}: {tuple(v.shape)} {str(v.dtype).removeprefix('torch.')} {v.device}" for k, v in self.batch.items()
            )
            parts.append(f"batch={{{items}}}")
        else:
            parts.append("batch=None")
        items = ", ".join(f"{k}: {v.shape} {v.dtype}" for k, v in self.non_tensor_batch.items())
        parts.append(f"non_tensor_batch={{{items}}}")
        parts.append(f"meta_info_keys={list(self.meta_info)}")
        return f"{type(self).__name__}(len={len(self)}, " + ", ".join(parts) + ")"

    def __repr__(self) -> str:
        return self._summary()

    def get_data_info(self) -> str:
        """Short human-readable description: length, keys, shapes, dtypes (for logs and error messages)."""
        return self._summary()

    def print_size(self, prefix: str = "") -> None:
        """Print the memory held by tensors and by non-tensor arrays (in GB), plus the summary."""
        tensor_bytes = sum(v.element_size() * v.numel() for v in (self.batch or {}).values())
        array_bytes = sum(v.nbytes for v in self.non_tensor_batch.values())
        msg = (
            f"Size of tensors: {tensor_bytes / 1024**3:.6f} GB, size of non_tensor_batch: "
            f"{array_bytes / 1024**3:.6f} GB; {self._summary()}"
        )
        print(f"{prefix}, {msg}" if prefix else msg)

    # ----------------------------------------------------------------------------------------------- persistence

    def save_to_disk(self, filepath: str | Any) -> None:
        """Write to ``filepath`` with ``torch.save``.

        The format is pickle: only load files you trust (see `load_from_disk`).
        """
        torch.save(self, filepath)

    @staticmethod
    def load_from_disk(filepath: str | Any) -> DataProto:
        """Read a file written by `save_to_disk`.

        Uses ``torch.load(weights_only=False)``, i.e. full pickle: loading can run arbitrary code, so only
        load files you trust.
        """
        data = torch.load(filepath, weights_only=False)
        if not isinstance(data, DataProto):
            raise TypeError(f"{filepath!s} does not contain a DataProto (got {type(data).__name__})")
        return data

    # ---------------------------------------------------------------------------------------------- row ops

    def to(self, device: str | torch.device) -> DataProto:
        """Move all tensors to ``device`` (in place); returns self for chaining."""
        if self.batch is not None:
            self.batch = {k: v.to(device) for k, v in self.batch.items()}
        return self

    def select_idxs(self, idxs: IndexLike) -> DataProto:
        """Rows at integer positions ``idxs`` (list/array/tensor, negatives allowed) or where a bool mask is True.

        Returns a new DataProto with copied rows.
        """
        pos = _index_array(idxs, len(self))
        batch = None
        if self.batch is not None:
            batch = {}
            for k, v in self.batch.items():
                batch[k] = v[torch.from_numpy(pos).to(v.device)]
        non_tensor = {k: v[pos] for k, v in self.non_tensor_batch.items()}
        return self._new(batch, non_tensor)

    def slice(self, start: int | None = None, end: int | None = None, step: int | None = None) -> DataProto:
        """Rows ``start:end:step`` (Python slice semantics). Positive steps give views; negative steps copy."""
        s = slice(start, end, step)
        if s.step is not None and s.step < 0:  # torch tensors cannot be sliced with a negative step
            return self.select_idxs(np.arange(len(self))[s])
        batch = None if self.batch is None else {k: v[s] for k, v in self.batch.items()}
        non_tensor = {k: v[s] for k, v in self.non_tensor_batch.items()}
        return self._new(batch, non_tensor)

    def select(
        self,
        batch_keys: Sequence[str] | None = None,
        non_tensor_batch_keys: Sequence[str] | None = None,
        meta_info_keys: Sequence[str] | None = None,
        deepcopy: bool = False,
    ) -> DataProto:
        """Keep only the given keys (``None`` keeps all of that kind). Self is unchanged.

        Without ``deepcopy`` the result shares tensors/arrays with self; with it, everything is copied.
        """

        def pick(src: Mapping, keys: Sequence[str] | None, what: str) -> dict:
            if keys is None:
                return dict(src)
            if isinstance(keys, str):
                keys = [keys]
            missing = [k for k in keys if k not in src]
            if missing:
                raise KeyError(f"DataProto.select: {what} key(s) {missing} not found; available: {list(src)}")
            return {k: src[k] for k in keys}

        batch = None if self.batch is None else pick(self.batch, batch_keys, "tensor")
        if self.batch is None and batch_keys:
            raise KeyError(f"DataProto.select: tensor key(s) {list(batch_keys)} requested but batch is None")
        non_tensor = pick(self.non_tensor_batch, non_tensor_batch_keys, "non-tensor")
        meta = pick(self.meta_info, meta_info_keys, "meta_info")
        if deepcopy:
            batch, non_tensor, meta = copy.deepcopy((batch, non_tensor, meta))
        return self._new(batch, non_tensor, meta)

    def pop(
        self,
        batch_keys: Sequence[str] | None = None,
        non_tensor_batch_keys: Sequence[str] | None = None,
        meta_info_keys: Sequence[str] | None = None,
    ) -> DataProto:
        """Remove the given keys from self and return them as a new DataProto (``None`` pops nothing).

        The popped DataProto gets only the popped meta_info keys. A DataProto left without any tensors keeps
        ``batch == {}``, and its length then comes from the non-tensors.
        """

        def take(src: dict, keys: Sequence[str] | None, what: str) -> dict:
            if keys is None:
                return {}
            if isinstance(keys, str):
                keys = [keys]
            missing = [k for k in keys if k not in src]
            if missing:
                raise KeyError(f"DataProto.pop: {what} key(s) {missing} not found; available: {list(src)}")
            return {k: src.pop(k) for k in keys}

        if self.batch is None and batch_keys:
            raise KeyError(f"DataProto.pop: tensor key(s) {list(batch_keys)} requested but batch is None")
        batch = None if self.batch is None else take(self.batch, batch_keys, "tensor")
        non_tensor = take(self.non_tensor_batch, non_tensor_batch_keys, "non-tensor")
        meta = take(self.meta_info, meta_info_keys, "meta_info")
        return self._new(batch or None, non_tensor, meta)

    def rename(self, old_keys: str | Sequence[str], new_keys: str | Sequence[str]) -> DataProto:
        """Rename keys in place (tensor keys first, else non-tensor keys); returns self."""
        olds = [old_keys] if isinstance(old_keys, str) else list(old_keys)
        news = [new_keys] if isinstance(new_keys, str) else list(new_keys)
        if len(olds) != len(news):
            raise ValueError(f"DataProto.rename: {len(olds)} old keys but {len(news)} new keys")
        for old, new in zip(olds, news):
            if self.batch is not None and old in self.batch:
                target = self.batch
            elif old in self.non_tensor_batch:
                target = self.non_tensor_batch
            else:
                raise KeyError(f"DataProto.rename: key {old!r} not found")
            if new != old and (new in (self.batch or {}) or new in self.non_tensor_batch):
                raise ValueError(f"DataProto.rename: cannot rename {old!r} to {new!r}, which already exists")
            target[new] = target.pop(old)
        return self

    def union(self, other: DataProto) -> DataProto:
        """Merge ``other``'s tensors, non-tensors and meta_info into self (in place); returns self.

        Both must have the same length unless one of them holds no per-sample data at all (e.g. only
        meta_info). A key present in both must hold equal values, else ValueError naming the key.
        """
        has_rows_self = bool(self.batch) or bool(self.non_tensor_batch)
        has_rows_other = bool(other.batch) or bool(other.non_tensor_batch)
        if has_rows_self and has_rows_other and len(self) != len(other):
            raise ValueError(f"DataProto.union: lengths differ ({len(self)} vs {len(other)})")
        # validate everything before mutating, so a failed union leaves self untouched
        for key, val in (other.batch or {}).items():
            if self.batch is not None and key in self.batch and not _tensor_equal(self.batch[key], val):
                raise ValueError(f"DataProto.union: tensor key {key!r} exists in both operands with different values")
        for key, val in other.non_tensor_batch.items():
            if key in self.non_tensor_batch and not _deep_equal(self.non_tensor_batch[key], val):
                raise ValueError(
                    f"DataProto.union: non-tensor key {key!r} exists in both operands with different values"
                )
        for key, val in other.meta_info.items():
            if key in self.meta_info and not _deep_equal(self.meta_info[key], val):
                raise ValueError(
                    f"DataProto.union: meta_info key {key!r} exists in both operands with different values"
                )
        if other.batch is not None:
            if self.batch is None:
                self.batch = {}
            self.batch.update(other.batch)
        self.non_tensor_batch.update(other.non_tensor_batch)
        self.meta_info.update(other.meta_info)
        return self

    @staticmethod
    def concat(data: Sequence[DataProto]) -> DataProto:
        """Stack DataProtos along dim 0 (tensors with torch.cat, non-tensors with np.concatenate).

        All parts must have the same tensor and non-tensor keys; meta_info comes from the first part.
        """
        if len(data) == 0:
            raise ValueError("DataProto.concat: need at least one DataProto")
        first = data[0]
        tensor_keys = set(first.batch or {})
        nt_keys = set(first.non_tensor_batch)
        for i, d in enumerate(data[1:], start=1):
            for what, ref, got in (
                ("tensor", tensor_keys, set(d.batch or {})),
                ("non-tensor", nt_keys, set(d.non_tensor_batch)),
            ):
                if ref != got:
                    key = sorted(ref ^ got)[0]
                    where = "part 0" if key in ref else f"part {i}"
                    raise ValueError(
                        f"DataProto.concat: {what} key {key!r} is only in {where} (part 0 keys {sorted(ref)}, "
                        f"part {i} keys {sorted(got)})"
                    )
        batch = None
        if first.batch is not None or any(d.batch is not None for d in data):
            batch = {}
            for key in first.batch or {}:
                try:
                    batch[key] = torch.cat([d.batch[key] for d in data], dim=0)
                except RuntimeError as e:
                    raise ValueError(f"DataProto.concat: cannot concatenate tensor {key!r}: {e}") from e
        non_tensor = {}
        for key in first.non_tensor_batch:
            try:
                non_tensor[key] = np.concatenate([d.non_tensor_batch[key] for d in data], axis=0)
            except ValueError as e:
                raise ValueError(f"DataProto.concat: cannot concatenate non-tensor {key!r}: {e}") from e
        return type(first)(batch=batch, non_tensor_batch=non_tensor, meta_info=dict(first.meta_info))

    def chunk(self, chunks: int) -> list[DataProto]:
        """Split into ``chunks`` equal consecutive pieces (views). The length must be divisible by ``chunks``."""
        if not isinstance(chunks, int) or chunks <= 0:
            raise ValueError(f"DataProto.chunk: chunks must be a positive int, got {chunks!r}")
        n = len(self)
        if n % chunks != 0:
            raise ValueError(
                f"DataProto.chunk: length {n} is not divisible by chunks={chunks}. Use split(split_size) for "
                f"uneven pieces, or pad first with pad_dataproto_to_divisor(data, {chunks}) and unpad afterwards."
            )
        size = n // chunks
        return [self.slice(i * size, (i + 1) * size) for i in range(chunks)]

    def split(self, split_size: int) -> list[DataProto]:
        """Consecutive pieces of ``split_size`` rows (views); the last piece may be shorter.

        An empty DataProto gives one empty piece, so ``concat(split(x))`` always rebuilds ``x``.
        """
        if not isinstance(split_size, int) or split_size <= 0:
            raise ValueError(f"DataProto.split: split_size must be a positive int, got {split_size!r}")
        n = len(self)
        if n == 0:
            return [self.slice(0, 0)]
        return [self.slice(i, min(i + split_size, n)) for i in range(0, n, split_size)]

    def repeat(self, repeat_times: int = 2, interleave: bool = True) -> DataProto:
        """Repeat every row ``repeat_times`` times.

        ``interleave=True``: ``[a, b] -> [a, a, b, b]`` (each prompt's samples adjacent, as GRPO groups expect);
        ``interleave=False``: ``[a, b] -> [a, b, a, b]``.
        """
        if not isinstance(repeat_times, int) or repeat_times < 1:
            raise ValueError(f"DataProto.repeat: repeat_times must be an int >= 1, got {repeat_times!r}")
        batch = None
        if self.batch is not None:
            batch = {}
            for k, v in self.batch.items():
                if interleave:
                    batch[k] = v.repeat_interleave(repeat_times, dim=0)
                else:
                    batch[k] = v.repeat(repeat_times, *([1] * (v.dim() - 1)))
        non_tensor = {}
        for k, v in self.non_tensor_batch.items():
            if interleave:
                non_tensor[k] = np.repeat(v, repeat_times, axis=0)
            else:
                non_tensor[k] = np.tile(v, (repeat_times,) + (1,) * (v.ndim - 1))
        return self._new(batch, non_tensor)

    def reorder(self, indices: IndexLike) -> None:
        """Permute rows in place: row ``j`` becomes old row ``indices[j]``. ``indices`` must be a permutation."""
        n = len(self)
        pos = _index_array(indices, n)
        if pos.shape[0] != n or not np.array_equal(np.sort(pos), np.arange(n)):
            raise ValueError(f"DataProto.reorder: indices must be a permutation of range({n})")
        if self.batch is not None:
            self.batch = {k: v[torch.from_numpy(pos).to(v.device)] for k, v in self.batch.items()}
        self.non_tensor_batch = {k: v[pos] for k, v in self.non_tensor_batch.items()}


# ---------------------------------------------------------------------------------------------------------------
# padding
# ---------------------------------------------------------------------------------------------------------------


def pad_dataproto_to_divisor(data: DataProto, size_divisor: int) -> tuple[DataProto, int]:
    """Pad ``data`` so its length is a multiple of ``size_divisor``, e.g. before ``chunk(world_size)``.

    Padding rows are copies of rows from the start (cycling again if more padding than rows is needed).
    Returns ``(padded, pad_size)``; undo with ``unpad_dataproto(result, pad_size)``. An empty DataProto is
    returned unchanged with ``pad_size == 0`` (there is nothing to copy).
    """
    if not isinstance(data, DataProto):
        raise TypeError(f"pad_dataproto_to_divisor expects a DataProto, got {type(data).__name__}")
    if not isinstance(size_divisor, int) or size_divisor <= 0:
        raise ValueError(f"size_divisor must be a positive int, got {size_divisor!r}")
    n = len(data)
    if n == 0 or n % size_divisor == 0:
        return data, 0
    pad_size = size_divisor - n % size_divisor
    padding = data.select_idxs(np.arange(pad_size) % n)
    return DataProto.concat([data, padding]), pad_size


def unpad_dataproto(data: DataProto, pad_size: int) -> DataProto:
    """Drop the last ``pad_size`` rows added by `pad_dataproto_to_divisor`."""
    if pad_size < 0 or pad_size > len(data):
        raise ValueError(f"unpad_dataproto: pad_size {pad_size} is out of range for length {len(data)}")
    if pad_size == 0:
        return data
    return data[: len(data) - pad_size]  # type: ignore[return-value]
