"""Helpers of `verl.protocol.DataProto` that do not need the class: the error type, equality and merging of tensors,
arrays and nested values (what `DataProto.union` and `DataProto.concat` check), dict utilities, non-tensor
normalisation, turning a dict of tensors into the ``TensorDict`` a batch is, row-index normalisation, and
pickling/serialising tensors.

`verl.protocol` imports these and re-exports the public ones (``from verl.protocol import union_tensor_dict`` etc.
keep working); import them from there.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

__all__ = [
    "DataProtoConfig",
    "DataProtoError",
    "IndexLike",
    "deserialize_single_tensor",
    "deserialize_tensordict",
    "list_of_dict_to_dict_of_list",
    "merge_meta_info",
    "serialize_single_tensor",
    "serialize_tensordict",
    "to_object_array",
    "union_numpy_dict",
    "union_tensor_dict",
]

IndexLike = Sequence[int] | Sequence[bool] | np.ndarray | torch.Tensor


class _DataProtoConfigMeta(type):
    """``DataProtoConfig.auto_padding`` as a class-level property (verl's spelling), also on with the environment
    variable ``VERL_AUTO_PADDING=1``."""

    _config: dict[str, bool] = {}
    auto_padding_key = "_verl_auto_padding"

    @property
    def auto_padding(cls) -> bool:
        by_env = os.getenv("VERL_AUTO_PADDING", "FALSE").upper() in ("TRUE", "1")
        return by_env or cls._config.get(cls.auto_padding_key, False)

    @auto_padding.setter
    def auto_padding(cls, enabled: bool) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"DataProtoConfig.auto_padding must be a bool, got {enabled!r}")
        cls._config[cls.auto_padding_key] = enabled


class DataProtoConfig(metaclass=_DataProtoConfigMeta):
    """Process-wide DataProto switches: ``DataProtoConfig.auto_padding = True`` lets `DataProto.chunk` cut
    lengths that do not divide evenly (each DataProto can also opt in with ``from_dict(..., auto_padding=True)``)."""


class DataProtoError(ValueError, AssertionError):
    """Bad input to a `DataProto` operation (sizes, conflicting keys, uneven chunks), with a message naming the key
    or sizes and the fix.

    It is a ``ValueError`` for our callers and also an ``AssertionError``, because verl's own ``DataProto`` asserts
    in these places and code ported from it catches ``AssertionError``."""


# ---------------------------------------------------------------------------------------------------------------
# non-tensor values
# ---------------------------------------------------------------------------------------------------------------


def to_object_array(values: Sequence[Any]) -> np.ndarray:
    """Turn a Python sequence into a 1-D ``dtype=object`` array of the same length.

    ``np.array(values, dtype=object)`` would build a 2-D array from a list of equal-length lists (and fail on
    some ragged inputs); here each element is stored as one object, so a list of N lists/dicts/arrays always
    becomes an array of shape ``(N,)``.
    """
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _as_non_tensor(key: str, val: Any) -> np.ndarray:
    """Normalise one non-tensor value: ndarray kept as is, list/tuple -> 1-D object array."""
    if isinstance(val, np.ndarray):
        return val
    if isinstance(val, (list, tuple)):
        return to_object_array(val)
    raise TypeError(f"DataProto: non-tensor value {key!r} must be a numpy array or a list, got {type(val).__name__}")


# ---------------------------------------------------------------------------------------------------------------
# the batch: a TensorDict with one batch dimension
# ---------------------------------------------------------------------------------------------------------------


def tensordict_from_mapping(
    tensors: Mapping[str, Any], rows: int | None, where: str = "DataProto"
) -> TensorDict | None:
    """The ``TensorDict`` (batch size ``[N]``) holding ``tensors``, checked with errors that name the key.

    Every value must be a ``torch.Tensor`` with a dim 0 of the same size ``N``. An empty mapping gives an empty
    ``TensorDict`` of ``rows`` rows (the non-tensors' length), or ``None`` when ``rows`` is unknown. The tensors are
    stored as they are (no copy).
    """
    if not isinstance(tensors, Mapping):
        raise TypeError(f"{where}.batch must be a TensorDict, a dict of tensors or None, got {type(tensors).__name__}")
    size: int | None = None
    first = ""
    for key, val in tensors.items():
        if not isinstance(val, torch.Tensor):
            raise TypeError(f"{where}: batch[{key!r}] must be a torch.Tensor, got {type(val).__name__}")
        if val.dim() == 0:
            raise DataProtoError(f"{where}: batch[{key!r}] is a 0-d tensor; per-sample data needs a batch dim 0")
        if size is None:
            size, first = val.shape[0], key
        elif val.shape[0] != size:
            raise DataProtoError(
                f"{where}: tensor {key!r} has size {val.shape[0]} in dim 0, but tensor {first!r} has size {size}"
            )
    if size is None:
        return None if rows is None else TensorDict({}, batch_size=[rows])
    return TensorDict(dict(tensors), batch_size=[size])


def check_fields(batch: TensorDict | None, non_tensor_batch: dict[str, np.ndarray], meta_info: dict) -> None:
    """``DataProto.check_consistency``: types, exactly one batch dim, one dim-0 size, errors naming the key. Runs on
    every construction, so the common case does no more than compare sizes."""
    if not isinstance(meta_info, dict):
        raise TypeError(f"DataProto.meta_info must be a dict, got {type(meta_info).__name__}")
    ref_size = None
    if batch is not None:
        if not isinstance(batch, TensorDict):
            raise TypeError(f"DataProto.batch must be a TensorDict or None, got {type(batch).__name__}")
        batch_size = batch.batch_size
        if len(batch_size) != 1:
            raise DataProtoError(
                f"DataProto.batch has batch_size {list(batch_size)}; DataProto supports exactly one "
                "batch dim (num_batch_dims=1): build it with TensorDict(..., batch_size=[N]), or use "
                "fold_batch_dim/unfold_batch_dim to group rows"
            )
        ref_size = batch_size[0]
    for key, val in non_tensor_batch.items():
        if not isinstance(val, np.ndarray):
            raise TypeError(
                f"DataProto.non_tensor_batch[{key!r}] must be a numpy array (dtype=object), got {type(val).__name__}"
            )
        if val.ndim == 0:
            raise DataProtoError(f"DataProto.non_tensor_batch[{key!r}] is a 0-d array; it needs a batch dim 0")
        if ref_size is None:
            ref_size = val.shape[0]
        elif val.shape[0] != ref_size:
            if batch is not None:
                first = next(iter(batch.keys()), None)
                ref_name = "the batch" if first is None else f"tensor {first!r}"
            else:
                ref_name = repr(next(iter(non_tensor_batch)))
            raise DataProtoError(
                f"DataProto: non-tensor {key!r} has length {val.shape[0]}, but {ref_name} has size {ref_size}"
            )


def index_batch(batch: TensorDict, index: slice | torch.Tensor, rows: int) -> TensorDict:
    """``batch[index]`` for a slice or a 1-D int64 CPU index of ``rows`` rows. Plain tensors are indexed one by one
    (half the cost of TensorDict's generic indexing, which every split into micro-batches pays); other leaf types
    go through TensorDict."""
    tensors = dict(batch.items())
    if not all(type(v) is torch.Tensor and not v.is_nested for v in tensors.values()):
        return batch[index]
    if isinstance(index, slice):
        out = {k: v[index] for k, v in tensors.items()}
    else:
        out = {k: v[index if v.device.type == "cpu" else index.to(v.device)] for k, v in tensors.items()}
    return TensorDict(out, batch_size=[rows], device=batch.device)


def new_batch_like(tensors: dict[str, torch.Tensor], rows: int, like: TensorDict) -> TensorDict:
    """A ``TensorDict`` of ``rows`` rows holding ``tensors`` (already checked), on ``like``'s device setting."""
    return TensorDict(tensors, batch_size=[rows], device=like.device)


# ---------------------------------------------------------------------------------------------------------------
# equality and merging (DataProto.union, DataProto.concat)
# ---------------------------------------------------------------------------------------------------------------


def _tensor_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Exact equality of two tensors (shape, dtype, values); NaNs in the same positions count as equal."""
    if a is b:
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.device != b.device:
        b = b.to(a.device)
    if torch.equal(a, b):
        return True
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return False


def _deep_equal(a: Any, b: Any, visiting: set[int] | None = None) -> bool:
    """Equality used by `union` and `concat` for non-tensor values and meta_info.

    Handles tensors, numpy arrays (object arrays element-wise, NaN == NaN), nested lists/tuples/dicts, objects
    whose ``==`` returns something that is not a plain bool, and self-referencing containers (an object already
    being compared on the current path counts as equal, so a cycle ends instead of recursing forever).
    """
    if a is b:
        return True
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and _tensor_equal(a, b)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    visiting = set() if visiting is None else visiting
    if id(a) in visiting:  # back at a container being compared further up: equal if b is the same kind
        return type(a) is type(b)
    container = isinstance(a, (np.ndarray, list, tuple, Mapping))
    if container:
        visiting.add(id(a))
    try:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
                return False
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            if a.dtype != object:
                try:
                    return bool(np.array_equal(a, b, equal_nan=True))
                except TypeError:  # dtypes where NaN is meaningless (str, bool)
                    return bool(np.array_equal(a, b))
            return all(_deep_equal(x, y, visiting) for x, y in zip(a.flat, b.flat))
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(_deep_equal(x, y, visiting) for x, y in zip(a, b))
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            return a.keys() == b.keys() and all(_deep_equal(a[k], b[k], visiting) for k in a)
        try:
            return bool(a == b)
        except Exception:
            return False
    finally:
        if container:
            visiting.discard(id(a))


def _merge_dicts(dst: dict, src: Mapping, what: str) -> dict:
    """Add ``src`` into ``dst`` in place; a key present in both must hold equal values."""
    for key, val in src.items():
        if key in dst and not _deep_equal(dst[key], val):
            raise DataProtoError(
                f"`{key}` in tensor_dict1 and tensor_dict2 are not the same object. The {what} key {key!r} holds "
                "different values in the two dicts being merged; rename or drop one of them first."
            )
        dst[key] = val
    return dst


def union_tensor_dict(
    tensor_dict1: TensorDict | dict[str, torch.Tensor], tensor_dict2: TensorDict | Mapping[str, torch.Tensor]
) -> TensorDict | dict[str, torch.Tensor]:
    """Add the tensors of ``tensor_dict2`` into ``tensor_dict1`` (in place) and return it; shared keys must hold
    equal tensors (NaN == NaN) and two TensorDicts must have the same batch size, else `DataProtoError`."""
    if isinstance(tensor_dict1, TensorDict) and isinstance(tensor_dict2, TensorDict):
        if tensor_dict1.batch_size != tensor_dict2.batch_size:
            raise DataProtoError(
                f"union_tensor_dict: batch sizes differ ({list(tensor_dict1.batch_size)} vs "
                f"{list(tensor_dict2.batch_size)}); both need the same rows"
            )
    for key in tensor_dict2.keys():
        val = tensor_dict2[key]
        if key in tensor_dict1.keys():
            if not _deep_equal(tensor_dict1[key], val):
                raise DataProtoError(
                    f"{key} in tensor_dict1 and tensor_dict2 are not the same object: tensor key {key!r} holds "
                    "different values in the two batches being merged; rename or pop one of them first."
                )
        else:
            tensor_dict1[key] = val
    return tensor_dict1


def union_numpy_dict(dict1: dict[str, np.ndarray], dict2: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Add the arrays of ``dict2`` into ``dict1`` (in place); shared keys must be equal (NaN == NaN, object arrays
    compared element by element, cycles allowed), else `DataProtoError`."""
    return _merge_dicts(dict1, dict2, "non-tensor")


def list_of_dict_to_dict_of_list(list_of_dict: list[dict]) -> dict[str, list]:
    """``[{"a": 1}, {"a": 2}] -> {"a": [1, 2]}``; every dict must have the keys of the first one."""
    if not list_of_dict:
        return {}
    keys = list(list_of_dict[0].keys())
    out: dict[str, list] = {k: [] for k in keys}
    for i, d in enumerate(list_of_dict):
        if set(d.keys()) != set(keys):
            raise ValueError(f"dict #{i} has keys {sorted(d.keys())}, expected {sorted(keys)}")
        for k in keys:
            out[k].append(d[k])
    return out


def merge_meta_info(metas: Sequence[Mapping]) -> dict:
    """The ``meta_info`` of a concatenation (verl's rule): every part's keys, where a key in several parts must
    hold equal values, except ``"metrics"``, which every part (e.g. every data-parallel worker) contributes to.

    Each part's metrics are a dict or a list of dicts; the result is one dict of lists, the values of each metric in
    part order (``[{"loss": 0.5}], {"loss": 0.6} -> {"loss": [0.5, 0.6]}``). A metric missing from some parts just
    has fewer values.
    """
    merged: dict = {}
    metrics: dict[str, list] = {}
    for i, meta in enumerate(metas):
        for key, val in meta.items():
            if key == "metrics":
                for entry in val if isinstance(val, list) else ([] if val is None else [val]):
                    for name, value in entry.items():
                        metrics.setdefault(name, []).append(value)
            elif key not in merged:
                merged[key] = val
            elif not _deep_equal(merged[key], val):
                raise DataProtoError(
                    f"Conflicting values for meta_info key {key!r}: part {i} has {val!r}, an earlier part "
                    f"{merged[key]!r}. Parts of one concat must agree on batch-level settings; pop or overwrite the "
                    "key in the parts first."
                )
    if metrics:
        merged["metrics"] = metrics
    return merged


# ---------------------------------------------------------------------------------------------------------------
# row indices
# ---------------------------------------------------------------------------------------------------------------


def _index_array(idxs: IndexLike, n: int) -> np.ndarray:
    """Normalise an index list / array / tensor / boolean mask into a 1-D int64 numpy array of positions."""
    if isinstance(idxs, torch.Tensor):
        arr = idxs.detach().cpu().numpy()
    else:
        arr = np.asarray(idxs)
        if arr.size == 0 and arr.dtype != bool:
            arr = arr.astype(np.int64)
    if arr.ndim != 1:
        raise IndexError(f"DataProto: index array must be 1-D, got shape {arr.shape}")
    if arr.dtype == bool:
        if arr.shape[0] != n:
            raise IndexError(f"DataProto: boolean mask has length {arr.shape[0]} but DataProto has length {n}")
        return np.flatnonzero(arr)
    if not np.issubdtype(arr.dtype, np.integer):
        raise IndexError(f"DataProto: index array must be integer or boolean, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < -n or arr.max() >= n):
        bad = arr[(arr < -n) | (arr >= n)][0]
        raise IndexError(f"DataProto: index {int(bad)} is out of range for length {n}")
    return np.where(arr < 0, arr + n, arr)


def split_sizes(n: int, chunks: int) -> list[int]:
    """Sizes of ``chunks`` consecutive pieces of ``n`` rows that differ by at most one, larger ones first."""
    base, extra = divmod(n, chunks)
    return [base + 1] * extra + [base] * (chunks - extra)


# ---------------------------------------------------------------------------------------------------------------
# pickling and serialisation
# ---------------------------------------------------------------------------------------------------------------


def _compact(t: torch.Tensor) -> torch.Tensor:
    """Return ``t`` itself if it owns its whole storage, else a compact copy (used before pickling)."""
    try:
        storage_bytes = t.untyped_storage().nbytes()
    except Exception:  # nested / sparse / exotic layouts: leave to torch
        return t
    if t.is_contiguous() and storage_bytes == t.numel() * t.element_size() and t.storage_offset() == 0:
        return t
    return t.clone(memory_format=torch.contiguous_format)


def pack_batch(batch: TensorDict | None) -> Any:
    """The batch as `DataProto` pickles it: tensors that are views into a bigger buffer (after slicing or chunking)
    would pickle the whole buffer, so they are compacted; a TensorDict holding other leaf types is kept as is."""
    if batch is None or not all(isinstance(v, torch.Tensor) for v in batch.values()):
        return batch
    device = None if batch.device is None else str(batch.device)
    tensors = {k: _compact(v) for k, v in batch.items()}
    return {"tensors": tensors, "batch_size": list(batch.batch_size), "device": device}


def unpack_batch(packed: Any) -> TensorDict | None:
    """The batch of `pack_batch`'s output (also a plain dict of tensors, as versions before the TensorDict wrote)."""
    if isinstance(packed, dict) and "batch_size" in packed:
        return TensorDict(packed["tensors"], batch_size=packed["batch_size"], device=packed["device"])
    if isinstance(packed, dict):
        return tensordict_from_mapping(packed, rows=None)
    return packed


def serialize_single_tensor(tensor: torch.Tensor) -> tuple[str, torch.Size, np.ndarray]:
    """``(dtype name, shape, raw bytes as a uint8 array)`` of a dense tensor: a form that needs no pickle of torch
    objects (any dtype, bf16 and fp8 too, since the bytes are reinterpreted, not converted)."""
    data = tensor.detach().cpu().flatten().contiguous().view(torch.uint8).numpy()
    return str(tensor.dtype).removeprefix("torch."), tensor.shape, data


def deserialize_single_tensor(encoded: tuple[str, Sequence[int], Any]) -> torch.Tensor:
    """The tensor of `serialize_single_tensor`'s ``(dtype, shape, bytes)`` (a new CPU tensor owning its memory)."""
    dtype_name, shape, data = encoded
    dtype = getattr(torch, dtype_name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"deserialize_single_tensor: {dtype_name!r} is not a torch dtype")
    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8) if len(data) else torch.empty(0, dtype=torch.uint8)
    return raw.view(dtype).view(tuple(shape))


def serialize_tensordict(batch: TensorDict) -> tuple[tuple[int, ...], str | None, dict[str, tuple]]:
    """``(batch size, device, {key: encoded})`` of a TensorDict of dense and nested tensors; a dense tensor is
    encoded as `serialize_single_tensor` does, a nested one as ``(layout name, [each component encoded])``."""
    items: dict[str, tuple] = {}
    for key, val in batch.items():
        if val.is_nested:
            items[key] = (str(val.layout).removeprefix("torch."), [serialize_single_tensor(t) for t in val.unbind()])
        else:
            items[key] = serialize_single_tensor(val)
    device = None if batch.device is None else str(batch.device)
    return tuple(batch.batch_size), device, items


def deserialize_tensordict(encoded: tuple[Sequence[int], str | None, dict[str, tuple]]) -> TensorDict:
    """The TensorDict of `serialize_tensordict`'s output."""
    batch_size, device, items = encoded
    out: dict[str, torch.Tensor] = {}
    for key, val in items.items():
        if len(val) == 3:
            out[key] = deserialize_single_tensor(val)
        elif len(val) == 2:
            layout, parts = val
            out[key] = torch.nested.as_nested_tensor(
                [deserialize_single_tensor(p) for p in parts], layout=getattr(torch, layout)
            )
        else:
            raise ValueError(f"deserialize_tensordict: {key!r} has {len(val)} fields; expected 3 (dense) or 2 (nested)")
    return TensorDict(out, batch_size=list(batch_size), device=device)
