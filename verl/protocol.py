"""`DataProto`: the single batch type exchanged between every stage of the trainer, as public verl has it.

A `DataProto` holds three things:

* ``batch``: a ``tensordict.TensorDict`` with one batch dimension (or ``None``) -- per-sample tensors; every
  tensor's dim 0 is the sample dimension. A plain ``dict`` of tensors given as ``batch`` (on construction or by
  assignment) is turned into one, so ``DataProto(batch={"x": t})`` keeps working.
* ``non_tensor_batch``: ``dict[str, np.ndarray]`` -- per-sample Python objects (strings, dicts, ragged lists)
  kept in numpy arrays, usually ``dtype=object``; dim 0 is again the sample dimension.
* ``meta_info``: ``dict`` -- batch-level information (temperature, global step, metrics...) that is not indexed
  per sample and is carried along by row operations.

Every tensor and every non-tensor array must agree on dim 0; that size is ``len(data)``. The invariant is
checked on construction (`DataProto.check_consistency`) so a mismatch fails where it is created, naming the key.

Row operations (indexing, `slice`, `chunk`, `split`, `repeat`, `concat`, ...) apply to tensors and non-tensors
together, so per-sample data never goes out of step. Derived objects get a shallow copy of ``meta_info`` (the
dict is new, its values are shared). Basic slices are views of the parent's tensors, as with torch; index
lists / masks copy. Where verl asserts, the errors here are `DataProtoError` (a ``ValueError`` and an
``AssertionError``) naming the key and the fix.

The object is plain-picklable (it crosses Ray process boundaries); pickling compacts tensors that are views of a
larger storage so a small slice does not ship its parent's whole buffer. The TensorDict conversions, iteration
helpers live in `verl.protocol_ops` and are importable from here; the helpers that build or recognise the class
(`collate_fn`, `pad_dataproto_to_divisor`, `DataProtoFuture`) are defined below it.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

import verl.protocol_ops as ops
from verl.protocol_ops import fold_batch_dim, unfold_batch_dim, unpad_dataproto  # re-exported (__all__)
from verl.protocol_tensordict import concat_tensordict
from verl.protocol_utils import (
    DataProtoConfig,
    DataProtoError,
    IndexLike,
    _as_non_tensor,
    _index_array,
    _merge_dicts,  # noqa: F401 (kept importable from verl.protocol)
    check_fields,
    deserialize_single_tensor,
    deserialize_tensordict,
    index_batch,
    list_of_dict_to_dict_of_list,
    new_batch_like,
    pack_batch,
    serialize_single_tensor,
    serialize_tensordict,
    split_sizes,
    tensordict_from_mapping,
    to_object_array,
    union_numpy_dict,
    union_tensor_dict,
    unpack_batch,
)

__all__ = [
    "DataProto",
    "DataProtoConfig",
    "DataProtoError",
    "DataProtoFuture",
    "DataProtoItem",
    "collate_fn",
    "deserialize_single_tensor",
    "deserialize_tensordict",
    "fold_batch_dim",
    "list_of_dict_to_dict_of_list",
    "pad_dataproto_to_divisor",
    "serialize_single_tensor",
    "serialize_tensordict",
    "to_object_array",
    "unfold_batch_dim",
    "union_numpy_dict",
    "union_tensor_dict",
    "unpad_dataproto",
]


@dataclass(eq=False)
class DataProtoItem:
    """One row of a `DataProto` (what ``data[i]`` returns): the batch's row (a 0-dim TensorDict) and each
    non-tensor array's element ``i``."""

    batch: TensorDict | None = None
    non_tensor_batch: dict[str, Any] = field(default_factory=dict)
    meta_info: dict = field(default_factory=dict)


@dataclass(eq=False, repr=False)
class DataProto:
    """A batch of samples: per-sample tensors (a TensorDict), per-sample non-tensors, and batch-level meta_info.

    See the module docstring for the invariants. Construct with `DataProto.from_dict` /
    `DataProto.from_single_dict` (which convert lists), or directly with the three fields.
    """

    batch: TensorDict | None = None
    non_tensor_batch: dict[str, np.ndarray] = field(default_factory=dict)
    meta_info: dict = field(default_factory=dict)

    def __setattr__(self, name: str, value: Any) -> None:
        # a dict given as the batch becomes a TensorDict; during __init__ that waits for __post_init__, which knows
        # the non-tensors' length (the rows of a batch without tensors)
        if name != "batch" or "meta_info" not in vars(self):
            object.__setattr__(self, name, value)
            return
        nt = self.non_tensor_batch
        if value is not None and not isinstance(value, TensorDict):
            value = tensordict_from_mapping(value, rows=next(iter(nt.values())).shape[0] if nt else None)
        check_fields(value, nt, self.meta_info)  # a new batch must fit the non-tensors
        object.__setattr__(self, name, value)

    def __post_init__(self) -> None:
        if self.non_tensor_batch is None:
            self.non_tensor_batch = {}
        elif not isinstance(self.non_tensor_batch, Mapping):
            raise TypeError(
                f"DataProto.non_tensor_batch must be a dict of numpy arrays, got {type(self.non_tensor_batch).__name__}"
            )
        self.non_tensor_batch = {k: _as_non_tensor(k, v) for k, v in self.non_tensor_batch.items()}
        if self.meta_info is None:
            self.meta_info = {}
        self.batch = self.batch  # converts a dict and checks the fields (see __setattr__)

    # ----------------------------------------------------------------------------------------------- validation

    def check_consistency(self) -> None:
        """Raise if the fields break the invariants (types, one batch dim, one shared dim-0 size).

        Public so callers can re-check after mutating the dicts by hand.
        """
        check_fields(self.batch, self.non_tensor_batch, self.meta_info)

    # --------------------------------------------------------------------------------------------- construction

    @classmethod
    def from_dict(
        cls,
        tensors: Mapping[str, torch.Tensor] | None = None,
        non_tensors: Mapping[str, np.ndarray | Sequence[Any]] | None = None,
        meta_info: dict | None = None,
        num_batch_dims: int = 1,
        auto_padding: bool = False,
    ) -> DataProto:
        """Build from a dict of tensors plus optional non-tensors and meta_info.

        Non-tensor lists become 1-D object arrays (a list of N dicts/lists stays length N). ``batch`` is ``None``
        when no tensors are given. The input dicts are copied, so later `pop`/`rename` do not touch them.
        ``num_batch_dims`` must be 1 (verl's parameter; a DataProto has one batch dim). ``auto_padding=True`` lets
        this DataProto `chunk` unevenly (see `DataProtoConfig`).
        """
        if num_batch_dims != 1:
            raise DataProtoError(
                f"DataProto.from_dict: num_batch_dims={num_batch_dims}, but a DataProto has exactly one batch dim; "
                "pass num_batch_dims=1 (fold rows into groups with fold_batch_dim instead)"
            )
        batch = tensordict_from_mapping(tensors or {}, rows=None, where="DataProto.from_dict")
        non_tensor_batch = {k: _as_non_tensor(k, v) for k, v in (non_tensors or {}).items()}
        meta = dict(meta_info or {})
        if auto_padding:
            meta[DataProtoConfig.auto_padding_key] = True
        return cls(batch=batch, non_tensor_batch=non_tensor_batch, meta_info=meta)

    @classmethod
    def from_single_dict(
        cls, data: Mapping[str, Any], meta_info: dict | None = None, auto_padding: bool = False
    ) -> DataProto:
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
        return cls.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info=meta_info, auto_padding=auto_padding)

    @classmethod
    def from_tensordict(
        cls, tensor_dict: TensorDict, meta_info: dict | None = None, num_batch_dims: int = 1
    ) -> DataProto:
        """The inverse of `to_tensordict`: tensors -> ``batch``, ``NonTensorStack`` -> non-tensor object arrays,
        ``NonTensorData`` -> ``meta_info``."""
        if num_batch_dims != 1:
            raise DataProtoError(f"DataProto.from_tensordict: num_batch_dims={num_batch_dims}; only 1 is supported")
        tensors, non_tensors, meta = ops.dataproto_fields_from_tensordict(tensor_dict)
        rows = tensor_dict.batch_size[0] if len(tensor_dict.batch_size) else None
        batch = tensordict_from_mapping(tensors, rows=rows if non_tensors or tensors else None)
        return cls(batch=batch, non_tensor_batch=non_tensors, meta_info={**(meta_info or {}), **meta})

    def to_tensordict(self) -> TensorDict:
        """One TensorDict holding everything (verl's v2 batch form): tensors, each non-tensor column as a
        ``NonTensorStack`` and each meta_info entry as ``NonTensorData``."""
        return ops.dataproto_to_tensordict(self)

    def _new(
        self,
        batch: TensorDict | None,
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
        """Number of samples: the batch's size, else dim 0 of any non-tensor array, else 0."""
        if self.batch is not None:
            return self.batch.batch_size[0]
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
            row_batch = None if self.batch is None else self.batch[i]
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
        return {"batch": pack_batch(self.batch), "non_tensor_batch": self.non_tensor_batch, "meta_info": self.meta_info}

    def __setstate__(self, state: dict) -> None:
        vars(self).update(state, batch=unpack_batch(state["batch"]))

    def __repr__(self) -> str:
        return ops.summary(self)

    def get_data_info(self) -> str:
        """Multi-line description (verl's layout): each tensor's shape/dtype/device, each non-tensor's shape/dtype,
        and each meta_info value's (nested) type."""
        return ops.data_info(self)

    def print_size(self, prefix: str = "") -> None:
        """Print the memory held by tensors and by non-tensor arrays (in GB), plus the summary."""
        msg = ops.size_report(self)
        print(f"{prefix}, {msg}" if prefix else msg)

    # ----------------------------------------------------------------------------------------------- persistence

    def save_to_disk(self, filepath: str | os.PathLike) -> None:
        """Write to ``filepath`` with pickle (as verl does, so either can read the other's files).

        Only load files you trust (see `load_from_disk`).
        """
        with open(filepath, "wb") as f:
            pickle.dump(self, f)

    @staticmethod
    def load_from_disk(filepath: str | os.PathLike) -> DataProto:
        """Read a file written by `save_to_disk` (or by ``torch.save``, as older versions of this package did).

        Unpickling can run arbitrary code: only load files you trust.
        """
        data = ops.read_pickle(filepath)
        if not isinstance(data, DataProto):
            raise TypeError(f"{filepath!s} does not contain a DataProto (got {type(data).__name__})")
        return data

    # ---------------------------------------------------------------------------------------------- row ops

    def to(self, device: str | torch.device) -> DataProto:
        """Move all tensors to ``device`` (in place); returns self for chaining."""
        if self.batch is not None:
            self.batch = self.batch.to(device)
        return self

    def select_idxs(self, idxs: IndexLike) -> DataProto:
        """Rows at integer positions ``idxs`` (list/array/tensor, negatives allowed) or where a bool mask is True.

        Returns a new DataProto with copied rows.
        """
        pos = _index_array(idxs, len(self))
        batch = None if self.batch is None else index_batch(self.batch, torch.from_numpy(pos), len(pos))
        non_tensor = {k: v[pos] for k, v in self.non_tensor_batch.items()}
        return self._new(batch, non_tensor)

    def slice(self, start: int | None = None, end: int | None = None, step: int | None = None) -> DataProto:
        """Rows ``start:end:step`` (Python slice semantics). Positive steps give views; negative steps copy."""
        s = slice(start, end, step)
        if s.step is not None and s.step < 0:  # torch tensors cannot be sliced with a negative step
            return self.select_idxs(np.arange(len(self))[s])
        batch = None if self.batch is None else index_batch(self.batch, s, len(range(*s.indices(len(self)))))
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

        Without ``deepcopy`` the result shares tensors/arrays with self (in new containers); with it, everything is
        copied.
        """
        return self._new(*ops.selected(self, batch_keys, non_tensor_batch_keys, meta_info_keys, deepcopy))

    def pop(
        self,
        batch_keys: Sequence[str] | None = None,
        non_tensor_batch_keys: Sequence[str] | None = None,
        meta_info_keys: Sequence[str] | None = None,
    ) -> DataProto:
        """Remove the given keys from self and return them as a new DataProto (``None`` pops nothing).

        The popped DataProto gets only the popped meta_info keys, and ``batch is None`` if no tensor was popped.
        Self keeps its length when all its tensors are popped (its batch is then an empty TensorDict of that size).
        """
        return self._new(*ops.popped(self, batch_keys, non_tensor_batch_keys, meta_info_keys))

    def rename(self, old_keys: str | Sequence[str], new_keys: str | Sequence[str]) -> DataProto:
        """Rename keys in place (tensor keys first, else non-tensor keys); returns self."""
        ops.rename_keys(self, old_keys, new_keys)
        return self

    def union(self, other: DataProto) -> DataProto:
        """Merge ``other``'s tensors, non-tensors and meta_info into self (in place); returns self.

        Both must have the same length unless one of them holds no per-sample data at all (e.g. only
        meta_info). A key present in both must hold equal values, else `DataProtoError` naming the key; nothing is
        changed then.
        """
        ops.union_into(self, other)
        return self

    @staticmethod
    def concat(data: Sequence[DataProto]) -> DataProto:
        """Stack DataProtos along dim 0 (tensors with torch.cat, non-tensors with np.concatenate).

        All parts must have the same tensor and non-tensor keys. ``meta_info`` is merged as verl does
        (`merge_meta_info`): each part's keys, a key in several parts must be equal (`DataProtoError` naming it
        otherwise), and ``meta_info["metrics"]`` collects every part's metrics into one dict of lists.
        """
        return ops.concat_dataprotos(data)

    def is_padding_enabled(self) -> bool:
        """Whether `chunk` may cut uneven pieces: this DataProto opted in (``from_dict(auto_padding=True)``) or
        ``DataProtoConfig.auto_padding`` / ``VERL_AUTO_PADDING=1`` is on."""
        return bool(self.meta_info.get(DataProtoConfig.auto_padding_key, False)) or DataProtoConfig.auto_padding

    def chunk(self, chunks: int) -> list[DataProto]:
        """Split into ``chunks`` consecutive pieces (views). The length must be divisible by ``chunks`` unless
        padding is enabled (`is_padding_enabled`); then the pieces' sizes differ by at most one."""
        if not isinstance(chunks, int) or chunks <= 0:
            raise DataProtoError(f"DataProto.chunk: chunks must be a positive int, got {chunks!r}")
        n = len(self)
        if n % chunks != 0 and not self.is_padding_enabled():
            raise DataProtoError(
                f"DataProto.chunk: length {n} is not divisible by chunks={chunks}. Use split(split_size) for "
                f"uneven pieces, or pad first with pad_dataproto_to_divisor(data, {chunks}) and unpad afterwards."
            )
        out, start = [], 0
        for size in split_sizes(n, chunks):
            out.append(self.slice(start, start + size))
            start += size
        return out

    def split(self, split_size: int) -> list[DataProto]:
        """Consecutive pieces of ``split_size`` rows (views); the last piece may be shorter.

        An empty DataProto gives one empty piece, so ``concat(split(x))`` always rebuilds ``x``.
        """
        if not isinstance(split_size, int) or split_size <= 0:
            raise DataProtoError(f"DataProto.split: split_size must be a positive int, got {split_size!r}")
        n = len(self)
        if n == 0:
            return [self.slice(0, 0)]
        return [self.slice(i, min(i + split_size, n)) for i in range(0, n, split_size)]

    def repeat(self, repeat_times: int = 2, interleave: bool = True) -> DataProto:
        """Repeat every row ``repeat_times`` times.

        ``interleave=True``: ``[a, b] -> [a, a, b, b]`` (each prompt's samples adjacent, as GRPO groups expect);
        ``interleave=False``: ``[a, b] -> [a, b, a, b]``.
        """
        return self._new(*ops.repeated(self, repeat_times, interleave))

    def sample_level_repeat(self, repeat_times: Sequence[int] | np.ndarray | torch.Tensor) -> DataProto:
        """Repeat row ``i`` ``repeat_times[i]`` times, copies adjacent (``[a, b], [2, 1] -> [a, a, b]``); a count
        of 0 drops the row."""
        counts = ops.repeat_counts(repeat_times, len(self))
        total = int(counts.sum())
        batch = None
        if self.batch is not None:
            tensors = {
                k: v.repeat_interleave(torch.from_numpy(counts).to(v.device), dim=0) for k, v in self.batch.items()
            }
            batch = new_batch_like(tensors, total, self.batch)
        non_tensor = {k: np.repeat(v, counts, axis=0) for k, v in self.non_tensor_batch.items()}
        return self._new(batch, non_tensor)

    def unfold_column_chunks(self, n_split: int, split_keys: Sequence[str] | None = None) -> DataProto:
        """Cut dim 1 of the ``split_keys`` columns into ``n_split`` pieces that become rows of their own (row
        ``i`` -> rows ``i*n_split ... i*n_split + n_split - 1``); every other column is repeated to match. Keeps
        grouped values (e.g. a prompt's n responses) together through a shuffle. A 1-D object column of equal-length
        sequences counts as 2-D."""
        keys = set(split_keys or [])
        batch = None
        if self.batch is not None:
            tensors = {k: ops.unfold_column(k, v, n_split, k in keys) for k, v in self.batch.items()}
            batch = new_batch_like(tensors, len(self) * n_split, self.batch)
        non_tensor = {k: ops.unfold_column(k, v, n_split, k in keys) for k, v in self.non_tensor_batch.items()}
        return self._new(batch, non_tensor)

    def padding(self, padding_size: int, padding_candidate: str = "") -> None:
        """Append ``padding_size`` copies of the first (``padding_candidate="first"``) or last row, in place."""
        if padding_size == 0:
            return
        if len(self) == 0:
            raise DataProtoError("DataProto.padding: an empty DataProto has no row to repeat")
        row = self.select_idxs([0 if padding_candidate == "first" else len(self) - 1])
        padded = DataProto.concat([self, row.repeat(padding_size)])
        vars(self).update(batch=padded.batch, non_tensor_batch=padded.non_tensor_batch)

    def reorder(self, indices: IndexLike) -> None:
        """Permute rows in place: row ``j`` becomes old row ``indices[j]``. ``indices`` must be a permutation."""
        n = len(self)
        pos = _index_array(indices, n)
        if pos.shape[0] != n or not np.array_equal(np.sort(pos), np.arange(n)):
            raise DataProtoError(f"DataProto.reorder: indices must be a permutation of range({n})")
        if self.batch is not None:
            self.batch = index_batch(self.batch, torch.from_numpy(pos), n)
        self.non_tensor_batch = {k: v[pos] for k, v in self.non_tensor_batch.items()}

    def make_iterator(
        self, mini_batch_size: int, epochs: int, seed: int | None = None, dataloader_kwargs: dict | None = None
    ) -> Iterator[DataProto]:
        """Mini-batches of ``mini_batch_size`` rows for ``epochs`` passes, drawn by a ``torch.utils.data.DataLoader``
        (``dataloader_kwargs``, e.g. ``{"shuffle": True}``; ``seed`` fixes its generator). Each mini-batch carries
        this DataProto's meta_info. The same sampler as verl's, so a seed gives the same rows."""
        return ops.make_iterator(self, mini_batch_size, epochs, seed, dataloader_kwargs)


# ---------------------------------------------------------------------------------------------------------------
# rows, padding and futures: the helpers that build or recognise a DataProto
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
        raise DataProtoError(f"size_divisor must be a positive int, got {size_divisor!r}")
    n = len(data)
    if n == 0 or n % size_divisor == 0:
        return data, 0
    pad_size = size_divisor - n % size_divisor
    padding = data.select_idxs(np.arange(pad_size) % n)
    return ops.concat_dataprotos([data, padding]), pad_size


def _stack_column(values: list[Any]) -> np.ndarray:
    """A non-tensor column rebuilt from its rows: equal-shape arrays (rows of a 2-D column) stack back, anything
    else becomes a 1-D object array."""
    if values and all(isinstance(v, np.ndarray) for v in values) and len({v.shape for v in values}) == 1:
        return np.stack(values).astype(object)
    return to_object_array(values)


def collate_fn(items: list[DataProtoItem]) -> DataProto:
    """A `DataProto` from rows (`DataProtoItem`s), as a ``DataLoader`` over a DataProto yields them."""
    batches = [it.batch for it in items]
    batch = None if not batches or batches[0] is None else torch.stack(batches).contiguous()
    columns = list_of_dict_to_dict_of_list([it.non_tensor_batch for it in items])
    return DataProto(batch=batch, non_tensor_batch={k: _stack_column(v) for k, v in columns.items()})


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

        outputs = ray.get(self.futures)
        if all(isinstance(o, DataProto) for o in outputs):
            output = DataProto.concat(outputs)
        elif all(isinstance(o, TensorDict) for o in outputs):
            output = concat_tensordict(outputs)
        else:
            kinds = sorted({type(o).__name__ for o in outputs})
            raise TypeError(f"DataProtoFuture.get: the futures hold {kinds}; expected all DataProto or all TensorDict")
        return output if self.dispatch_fn is None else self.dispatch_fn(output)
