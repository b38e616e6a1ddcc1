"""verl's TensorDict batch helpers (its "v2" batch form; verl imports them as ``verl.utils.tensordict_utils``): one
``TensorDict`` holds everything a `verl.protocol.DataProto` splits into three fields.

* per-row tensors, also jagged nested tensors (``torch.nested.as_nested_tensor(..., layout=torch.jagged)``) for
  unpadded sequences;
* per-row Python values (strings, ragged lists, dicts) as a ``NonTensorStack`` with one ``NonTensorData`` per row;
* batch-level values (meta info) as one ``NonTensorData``.

`get_tensordict` builds one; `get` / `pop` return plain values (tensor, list, or the stored object);
`index_select_tensor_dict`, `concat_tensordict`, `chunk_tensordict`, `pad_to_divisor` / `unpad` and `make_iterator`
are the row operations that also handle nested tensors, which TensorDict's own methods do not in every case.
Bad input raises `verl.protocol_utils.DataProtoError` (a ``ValueError`` and an ``AssertionError``) naming the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch
from tensordict import TensorDict
from tensordict.tensorclass import NonTensorData, NonTensorStack

from verl.protocol_utils import DataProtoError, _deep_equal

__all__ = [
    "assert_tensordict_eq",
    "assign_non_tensor",
    "assign_non_tensor_data",
    "assign_non_tensor_stack",
    "chunk_tensordict",
    "concat_nested_tensors",
    "concat_tensordict",
    "contiguous",
    "get",
    "get_keys",
    "get_non_tensor_data",
    "get_tensordict",
    "index_select_tensor_dict",
    "make_iterator",
    "pad_to_divisor",
    "pop",
    "pop_keys",
    "union_tensor_dict",
    "unpad",
    "unwrap_non_tensor_data",
]


def _require_tensordict(td: Any, where: str) -> None:
    if not isinstance(td, TensorDict):
        raise TypeError(f"{where}: expected a TensorDict, got {type(td).__name__}")


def _is_nested(val: Any) -> bool:
    return isinstance(val, torch.Tensor) and val.is_nested


# ---------------------------------------------------------------------------------------------------------------
# building and reading
# ---------------------------------------------------------------------------------------------------------------


def assign_non_tensor_data(tensor_dict: TensorDict, key: str, val: Any) -> None:
    """Store one batch-level value (meta info) under ``key`` as ``NonTensorData``."""
    _require_tensordict(tensor_dict, "assign_non_tensor_data")
    tensor_dict[key] = NonTensorData(val)


def assign_non_tensor_stack(tensor_dict: TensorDict, key: str, val: list) -> None:
    """Store a per-row list under ``key`` as a ``NonTensorStack``, each element kept whole (lists of lists, lists of
    dicts); its length must be the TensorDict's batch size (tensordict raises otherwise)."""
    _require_tensordict(tensor_dict, "assign_non_tensor_stack")
    tensor_dict[key] = NonTensorStack.from_list([NonTensorData(item) for item in val])


def assign_non_tensor(tensor_dict: TensorDict, **kwargs: Any) -> TensorDict:
    """Store each keyword: a ``NonTensorData``/``NonTensorStack`` as it is, a list as a per-row stack, anything
    else as one batch-level value. Returns ``tensor_dict``."""
    _require_tensordict(tensor_dict, "assign_non_tensor")
    for key, val in kwargs.items():
        if isinstance(val, (NonTensorData, NonTensorStack)):
            tensor_dict[key] = val
        elif isinstance(val, list):
            assign_non_tensor_stack(tensor_dict, key, val)
        else:
            assign_non_tensor_data(tensor_dict, key, val)
    return tensor_dict


def unwrap_non_tensor_data(data: Any) -> Any:
    """The value inside a ``NonTensorData``; anything else unchanged."""
    return data.data if isinstance(data, NonTensorData) else data


def get_non_tensor_data(data: TensorDict, key: str, default: Any) -> Any:
    """``data[key]`` unwrapped from its ``NonTensorData``, or ``default`` when absent."""
    return unwrap_non_tensor_data(data.get(key, default))


def _rows_of(key: str, val: Any) -> int:
    if isinstance(val, torch.Tensor):
        if val.is_nested and (val.layout != torch.jagged or not val.is_contiguous()):
            raise DataProtoError(
                f"get_tensordict: nested tensor {key!r} must be jagged and contiguous; build it with "
                "torch.nested.as_nested_tensor(tensors, layout=torch.jagged)"
            )
        if val.dim() == 0:
            raise DataProtoError(f"get_tensordict: tensor {key!r} is 0-d; batch-level values go in non_tensor_dict")
        return val.size(0)
    if isinstance(val, (list, NonTensorStack)):
        return len(val)
    raise TypeError(
        f"get_tensordict: {key!r} is a {type(val).__name__}; per-row values must be a torch.Tensor or a list "
        "(a numpy array: torch.from_numpy(a) or a.tolist()); batch-level values go in non_tensor_dict"
    )


def get_tensordict(tensor_dict: dict[str, Any], non_tensor_dict: dict | None = None) -> TensorDict:
    """One TensorDict from per-row values (tensors, nested tensors, lists, ``NonTensorStack``s) and batch-level
    values (``non_tensor_dict``, each stored as ``NonTensorData``).

    All per-row values must have the same length, the batch size (``[]`` when there are none). Lists may hold
    nested lists and dicts but not tensors (convert them to numpy; a stack of tensors is not one tensor).
    """
    source: dict[str, Any] = {}
    size, first = None, ""
    for key, val in tensor_dict.items():
        rows = _rows_of(key, val)
        if isinstance(val, list):
            if any(isinstance(v, torch.Tensor) for v in val):
                raise DataProtoError(
                    f"get_tensordict: list {key!r} holds torch.Tensors; a list becomes a NonTensorStack, which does "
                    "not carry tensors: stack them into one tensor, or convert each to numpy"
                )
            val = NonTensorStack.from_list([NonTensorData(item) for item in val])
        if size is None:
            size, first = rows, key
        elif rows != size:
            raise DataProtoError(f"get_tensordict: {key!r} has {rows} rows, but {first!r} has {size}")
        source[key] = val
    for key, val in (non_tensor_dict or {}).items():
        if key in source:
            raise DataProtoError(f"get_tensordict: {key!r} is in both tensor_dict and non_tensor_dict")
        source[key] = NonTensorData(unwrap_non_tensor_data(val))
    return TensorDict(source, batch_size=[] if size is None else [size])


def _plain(val: Any) -> Any:
    """A stored value as Python holds it: a tensor as is, a stack as a list, ``NonTensorData`` unwrapped."""
    if isinstance(val, NonTensorStack):
        return val.tolist()
    return unwrap_non_tensor_data(val)


def get(tensordict: TensorDict, key: str, default: Any = None) -> Any:
    """``tensordict[key]`` as a plain value (tensor, list for a per-row stack, the stored object for meta info),
    or ``default`` when absent."""
    if key not in tensordict.keys():
        return default
    return _plain(tensordict.get(key))


def pop(tensordict: TensorDict, key: str, default: Any = None) -> Any:
    """Like `get`, and the key is removed."""
    if key not in tensordict.keys():
        return default
    return _plain(tensordict.pop(key))


def _split_keys(tensordict: TensorDict, keys: Iterable[str], take: Any) -> TensorDict:
    per_row: dict[str, Any] = {}
    batch_level: dict[str, Any] = {}
    keys = list(keys)
    missing = [k for k in keys if k not in tensordict.keys()]
    if missing:
        raise KeyError(f"key(s) {missing} not in the tensordict; it has {list(tensordict.keys())}")
    for key in keys:
        val = take(key)
        (batch_level if isinstance(val, NonTensorData) else per_row)[key] = _plain(val)
    return get_tensordict(per_row, batch_level)


def get_keys(tensordict: TensorDict, keys: Iterable[str]) -> TensorDict:
    """A new TensorDict with only ``keys`` (KeyError naming any missing one)."""
    return _split_keys(tensordict, keys, tensordict.get)


def pop_keys(tensordict: TensorDict, keys: Iterable[str]) -> TensorDict:
    """Like `get_keys`, and the keys are removed from ``tensordict``."""
    return _split_keys(tensordict, keys, tensordict.pop)


# ---------------------------------------------------------------------------------------------------------------
# comparing and merging
# ---------------------------------------------------------------------------------------------------------------


def _values_equal(a: Any, b: Any) -> bool:
    """Equal stored values: nested tensors component by component, anything else as `DataProto.union` compares."""
    if _is_nested(a) or _is_nested(b):
        if not (_is_nested(a) and _is_nested(b)):
            return False
        parts_a, parts_b = a.unbind(), b.unbind()
        return len(parts_a) == len(parts_b) and all(_deep_equal(x, y) for x, y in zip(parts_a, parts_b))
    return _deep_equal(_plain(a), _plain(b))


def assert_tensordict_eq(tensordict1: TensorDict, tensordict2: TensorDict) -> None:
    """Raise ``AssertionError`` naming the first key whose value (or kind) differs, or the keys that differ."""
    keys1, keys2 = set(tensordict1.keys()), set(tensordict2.keys())
    if keys1 != keys2:
        raise AssertionError(
            f"the key sets differ: only in the first {keys1 - keys2}, only in the second {keys2 - keys1}"
        )
    for key in tensordict1.keys():
        a, b = tensordict1.get(key), tensordict2.get(key)
        if type(a) is not type(b):
            raise AssertionError(f"{key!r} is a {type(a).__name__} in the first and a {type(b).__name__} in the second")
        if not _values_equal(a, b):
            raise AssertionError(f"{key!r} differs between the two tensordicts")


def union_tensor_dict(tensor_dict1: TensorDict, tensor_dict2: TensorDict) -> TensorDict:
    """Add ``tensor_dict2``'s keys to ``tensor_dict1`` (in place) and return it; both need the same batch size and
    a key in both must hold equal values (tensors, stacks and meta info alike), else `DataProtoError`."""
    if tensor_dict1.batch_size != tensor_dict2.batch_size:
        raise DataProtoError(
            f"union_tensor_dict: batch sizes differ ({list(tensor_dict1.batch_size)} vs "
            f"{list(tensor_dict2.batch_size)})"
        )
    for key in tensor_dict2.keys():
        val = tensor_dict2.get(key)
        if key not in tensor_dict1.keys():
            tensor_dict1[key] = val
        elif not _values_equal(tensor_dict1.get(key), val):
            raise DataProtoError(
                f"{key} in tensor_dict1 and tensor_dict2 are not the same object: {key!r} holds different values in "
                "the two tensordicts; pop it from one of them first"
            )
    return tensor_dict1


# ---------------------------------------------------------------------------------------------------------------
# row operations
# ---------------------------------------------------------------------------------------------------------------


def concat_nested_tensors(tensors: list[torch.Tensor]) -> torch.Tensor:
    """One jagged nested tensor with the rows of ``tensors`` (each nested, contiguous, 2-D or more) in order."""
    parts: list[torch.Tensor] = []
    for i, t in enumerate(tensors):
        if not _is_nested(t) or not t.is_contiguous() or t.dim() < 2:
            raise DataProtoError(f"concat_nested_tensors: input {i} must be a contiguous nested tensor of 2+ dims")
        parts.extend(t.unbind(0))
    return torch.nested.as_nested_tensor(parts, layout=torch.jagged)


def index_select_tensor_dict(batch: TensorDict | None, indices: torch.Tensor | list[int]) -> TensorDict | None:
    """The rows at ``indices`` (1-D) as a new TensorDict: tensors indexed, nested tensors rebuilt from their rows,
    stacks indexed, meta info kept. ``None`` in, ``None`` out."""
    if batch is None:
        return None
    index = torch.as_tensor(indices)
    if index.dim() != 1:
        raise DataProtoError(f"index_select_tensor_dict: indices must be 1-D, got shape {tuple(index.shape)}")
    out: dict[str, Any] = {}
    for key in batch.keys():
        val = batch.get(key)
        if _is_nested(val):
            rows = val.unbind()
            out[key] = torch.nested.as_nested_tensor([rows[i] for i in index.tolist()], layout=torch.jagged)
        elif isinstance(val, NonTensorData):
            out[key] = NonTensorData(val.data)
        else:
            out[key] = val[index]
    return TensorDict(out, batch_size=[index.shape[0]])


def concat_tensordict(data: list[TensorDict]) -> TensorDict:
    """Rows of all ``data`` in order (nested tensors too). Meta info comes from the first; TensorDicts without a
    batch dimension (meta info only) give the first one."""
    if not data:
        raise DataProtoError("concat_tensordict: need at least one tensordict")
    if len(data[0].batch_size) == 0:
        if any(len(d.batch_size) for d in data):
            raise DataProtoError("concat_tensordict: cannot join tensordicts with and without a batch dimension")
        return data[0]
    nested = {k for k in data[0].keys() if _is_nested(data[0].get(k))}
    for i, d in enumerate(data):
        if {k for k in d.keys() if _is_nested(d.get(k))} != nested:
            raise DataProtoError(f"concat_tensordict: tensordict {i} has other nested-tensor keys than the first")
    # meta info is set from the first afterwards: torch.cat would stack differing NonTensorData into per-row values
    meta = {k for k in data[0].keys() if isinstance(data[0].get(k), NonTensorData)}
    regular = [
        TensorDict({k: d.get(k) for k in d.keys() if k not in nested | meta}, d.batch_size, d.device) for d in data
    ]
    out = torch.cat(regular, dim=0)
    for key in nested:
        out[key] = concat_nested_tensors([d.get(key) for d in data])
    for key in meta:
        out[key] = NonTensorData(data[0].get(key).data)
    return out


def chunk_tensordict(td: TensorDict, chunks: int) -> list[TensorDict]:
    """``chunks`` equal consecutive pieces; nested tensors of 3+ dims (e.g. multimodal 3-D position ids), which
    ``torch.chunk`` cannot cut, are rebuilt from their rows."""
    _require_tensordict(td, "chunk_tensordict")
    if chunks <= 0 or len(td) % chunks:
        raise DataProtoError(f"chunk_tensordict: length {len(td)} does not split into {chunks} equal chunks")
    size = len(td) // chunks
    deep = {k for k in td.keys() if _is_nested(td.get(k)) and td.get(k).dim() >= 3}
    pieces = TensorDict({k: td.get(k) for k in td.keys() if k not in deep}, td.batch_size, td.device).chunk(chunks)
    for key in deep:
        rows = td.get(key).unbind(0)
        for i, piece in enumerate(pieces):
            piece[key] = torch.nested.as_nested_tensor(list(rows[i * size : (i + 1) * size]), layout=torch.jagged)
    return list(pieces)


def pad_to_divisor(data: TensorDict, size_divisor: int) -> tuple[TensorDict, int]:
    """Pad with copies of rows from the start (cycling) to a multiple of ``size_divisor``; ``(padded, pad_size)``.
    Undo with `unpad`. An empty or already divisible TensorDict is returned as it is."""
    _require_tensordict(data, "pad_to_divisor")
    n = len(data)
    if n == 0 or n % size_divisor == 0:
        return data, 0
    pad_size = size_divisor - n % size_divisor
    return index_select_tensor_dict(data, torch.arange(n + pad_size) % n), pad_size


def unpad(data: TensorDict, pad_size: int) -> TensorDict:
    """Drop the last ``pad_size`` rows (those `pad_to_divisor` added)."""
    if not pad_size:
        return data
    if any(_is_nested(data.get(k)) for k in data.keys()):  # some torch versions cannot slice jagged tensors
        return index_select_tensor_dict(data, torch.arange(len(data) - pad_size))
    return data[: len(data) - pad_size]


def make_iterator(
    tensordict: TensorDict,
    mini_batch_size: int,
    epochs: int,
    seed: int | None = None,
    dataloader_kwargs: dict | None = None,
) -> Iterator[TensorDict]:
    """Mini-batches of ``mini_batch_size`` rows for ``epochs`` passes, the row order drawn by a
    ``torch.utils.data.DataLoader`` (``dataloader_kwargs``, e.g. ``{"shuffle": True}``; ``seed`` fixes it)."""
    from torch.utils.data import DataLoader

    n = tensordict.batch_size[0]
    if mini_batch_size <= 0 or n % mini_batch_size:
        raise DataProtoError(f"make_iterator: {n} rows do not split into mini-batches of {mini_batch_size}")
    generator = None
    if seed is not None:
        generator = torch.Generator()
        generator.manual_seed(seed)
    loader = DataLoader(
        torch.arange(n),
        batch_size=mini_batch_size,
        collate_fn=lambda rows: torch.stack(rows),
        generator=generator,
        **(dataloader_kwargs or {}),
    )

    def batches() -> Iterator[TensorDict]:
        for _ in range(epochs):
            for rows in loader:
                yield index_select_tensor_dict(tensordict, rows)

    return iter(batches())


def contiguous(data: TensorDict) -> TensorDict:
    """A new TensorDict whose tensors are contiguous (stacks and meta info kept), e.g. before ``consolidate()``,
    which refuses strided views; TensorDict's own ``contiguous()`` would also turn stacks into other types."""
    per_row: dict[str, Any] = {}
    batch_level: dict[str, Any] = {}
    for key in data.keys():
        val = data.get(key)
        if isinstance(val, NonTensorData):
            batch_level[key] = val
        elif isinstance(val, NonTensorStack):
            per_row[key] = val
        elif isinstance(val, torch.Tensor):
            per_row[key] = val.contiguous()
        else:
            raise TypeError(f"contiguous: {key!r} holds a {type(val).__name__}, not a tensor, stack or NonTensorData")
    return get_tensordict(per_row, batch_level)


def maybe_fix_3d_position_ids(data: TensorDict) -> None:
    """After pickling, a 3-D jagged ``position_ids`` (multimodal rope) can lose which dim is ragged; set it back."""
    pos = data.get("position_ids", None)
    if _is_nested(pos) and pos.dim() == 3:
        pos._ragged_idx = 2
