"""Tests for verl.protocol_utils: value equality (NaN, object arrays, cycles), dict unions, the meta_info rule of
concat, the dict -> TensorDict conversion and tensor serialisation."""

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from verl.protocol_utils import (
    DataProtoError,
    _deep_equal,
    deserialize_single_tensor,
    deserialize_tensordict,
    merge_meta_info,
    serialize_single_tensor,
    serialize_tensordict,
    tensordict_from_mapping,
    union_numpy_dict,
    union_tensor_dict,
)


def test_deep_equal_nan_objects_and_cycles():
    assert _deep_equal(np.array([1.0, np.nan]), np.array([1.0, np.nan]))
    assert not _deep_equal(np.array([np.nan, 1.0]), np.array([1.0, np.nan]))
    assert _deep_equal(np.array([{"a": [1, np.nan]}], dtype=object), np.array([{"a": [1, np.nan]}], dtype=object))
    a, b, c = (np.array([None], dtype=object) for _ in range(3))
    a[0], b[0] = a, b  # two self-referencing arrays of the same shape
    assert _deep_equal(a, b)
    assert not _deep_equal(a, c)  # a cycle is not equal to None
    assert not _deep_equal(np.zeros(2), torch.zeros(2))


def test_union_numpy_dict_conflict_names_the_key():
    dst = {"x": np.arange(3)}
    union_numpy_dict(dst, {"x": np.arange(3), "y": np.ones(3)})
    assert set(dst) == {"x", "y"}
    with pytest.raises(AssertionError, match="`x` in tensor_dict1 and tensor_dict2 are not the same object"):
        union_numpy_dict(dst, {"x": np.arange(3) + 1})


def test_union_tensor_dict_on_tensordicts():
    obs = torch.randn(4, 2)
    td = TensorDict({"obs": obs}, batch_size=[4])
    union_tensor_dict(td, TensorDict({"obs": obs.clone(), "r": torch.ones(4)}, batch_size=[4]))
    assert set(td.keys()) == {"obs", "r"}
    with pytest.raises(ValueError, match="'obs'"):
        union_tensor_dict(td, TensorDict({"obs": obs + 1}, batch_size=[4]))
    with pytest.raises(ValueError, match="batch sizes differ"):
        union_tensor_dict(td, TensorDict({}, batch_size=[3]))


def test_merge_meta_info():
    assert merge_meta_info([{"a": 1}, {"b": 2}, {"a": 1}]) == {"a": 1, "b": 2}
    merged = merge_meta_info([{"metrics": [{"l": 1}, {"l": 2}]}, {"metrics": {"l": 3, "m": 4}}, {"metrics": None}])
    assert merged == {"metrics": {"l": [1, 2, 3], "m": [4]}}
    with pytest.raises(DataProtoError, match="'a'.*part 1"):
        merge_meta_info([{"a": 1}, {"a": 2}])


def test_tensordict_from_mapping_errors_name_the_key():
    assert tensordict_from_mapping({}, rows=None) is None
    assert tensordict_from_mapping({}, rows=5).batch_size == torch.Size([5])
    with pytest.raises(TypeError, match=r"batch\['a'\].*list"):
        tensordict_from_mapping({"a": [1]}, rows=None)
    with pytest.raises(ValueError, match="'a'.*0-d"):
        tensordict_from_mapping({"a": torch.tensor(1)}, rows=None)
    with pytest.raises(TypeError, match="dict of tensors"):
        tensordict_from_mapping(torch.zeros(2), rows=None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.float8_e4m3fn])
def test_serialize_single_tensor_roundtrip(dtype):
    t = (torch.randn(3, 4) * 4).to(dtype)
    back = deserialize_single_tensor(serialize_single_tensor(t))
    assert back.dtype == dtype and back.shape == t.shape and torch.equal(back.view(torch.uint8), t.view(torch.uint8))


def test_serialize_tensordict_roundtrip_with_nested():
    nested = torch.nested.as_nested_tensor([torch.arange(2), torch.arange(3)], layout=torch.jagged)
    td = TensorDict({"x": torch.randn(2, 3), "n": nested}, batch_size=[2], device="cpu")
    back = deserialize_tensordict(serialize_tensordict(td))
    assert back.batch_size == td.batch_size and str(back.device) == "cpu"
    assert torch.equal(back["x"], td["x"])
    assert [t.tolist() for t in back["n"].unbind()] == [[0, 1], [0, 1, 2]]
    assert deserialize_single_tensor(serialize_single_tensor(torch.zeros(0, 3))).shape == (0, 3)
