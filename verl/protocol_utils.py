"""Helpers of `verl.protocol.DataProto` that do not need the class: equality and merging of tensors, arrays and
nested values (what `DataProto.union` checks), dict utilities, non-tensor normalisation, row-index normalisation,
and compacting sliced tensors before pickling.

`verl.protocol` imports these and re-exports the public ones (``from verl.protocol import union_tensor_dict`` etc.
keep working); import them from there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = [
    "IndexLike",
    "list_of_dict_to_dict_of_list",
    "to_object_array",
    "union_numpy_dict",
    "union_tensor_dict",
]

IndexLike = Sequence[int] | Sequence[bool] | np.ndarray | torch.Tensor


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
# equality and merging (DataProto.union)
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


def _deep_equal(a: Any, b: Any) -> bool:
    """Equality used by `union` for non-tensor values and meta_info.

    Handles tensors, numpy arrays (object arrays element-wise, NaN == NaN), nested lists/tuples/dicts, and
    objects whose ``==`` returns something that is not a plain bool.
    """
    if a is b:
        return True
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and _tensor_equal(a, b)
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
        return all(_deep_equal(x, y) for x, y in zip(a.flat, b.flat))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:
        return False


def _merge_dicts(dst: dict, src: Mapping, what: str) -> dict:
    """Add ``src`` into ``dst`` in place; a key present in both must hold equal values."""
    for key, val in src.items():
        if key in dst and not _deep_equal(dst[key], val):
            raise ValueError(f"DataProto.union: {what} key {key!r} exists in both operands with different values")
        dst[key] = val
    return dst


def union_tensor_dict(tensor_dict1: dict[str, torch.Tensor], tensor_dict2: dict[str, torch.Tensor]) -> dict:
    """Add the tensors of ``tensor_dict2`` into ``tensor_dict1`` (in place); shared keys must be equal."""
    return _merge_dicts(tensor_dict1, tensor_dict2, "tensor")


def union_numpy_dict(dict1: dict[str, np.ndarray], dict2: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Add the arrays of ``dict2`` into ``dict1`` (in place); shared keys must be equal."""
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


# ---------------------------------------------------------------------------------------------------------------
# pickling
# ---------------------------------------------------------------------------------------------------------------


def _compact(t: torch.Tensor) -> torch.Tensor:
    """Return ``t`` itself if it owns its whole storage, else a compact copy (used before pickling)."""
    try:
        storage_bytes = t.untyped_storage().nbytes()
    except Exception:  # sparse / exotic layouts: leave to torch
        return t
    if t.is_contiguous() and storage_bytes == t.numel() * t.element_size() and t.storage_offset() == 0:
        return t
    return t.clone(memory_format=torch.contiguous_format)
