"""verl's import path for its TensorDict batch helpers (``from verl.utils import tensordict_utils as tu``).

They live in `verl.protocol_tensordict`, beside `verl.protocol.DataProto`, whose ``to_tensordict`` and
``DataProtoFuture.get`` use them: the protocol sits below ``verl.utils`` (docs/architecture.md).
"""

from verl.protocol_tensordict import (
    assert_tensordict_eq,
    assign_non_tensor,
    assign_non_tensor_data,
    assign_non_tensor_stack,
    chunk_tensordict,
    concat_nested_tensors,
    concat_tensordict,
    contiguous,
    get,
    get_keys,
    get_non_tensor_data,
    get_tensordict,
    index_select_tensor_dict,
    make_iterator,
    maybe_fix_3d_position_ids,
    pad_to_divisor,
    pop,
    pop_keys,
    union_tensor_dict,
    unpad,
    unwrap_non_tensor_data,
)

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
    "maybe_fix_3d_position_ids",
    "pad_to_divisor",
    "pop",
    "pop_keys",
    "union_tensor_dict",
    "unpad",
    "unwrap_non_tensor_data",
]
