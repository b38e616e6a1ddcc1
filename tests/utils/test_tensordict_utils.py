"""Tests for verl.utils.tensordict_utils: verl's one-TensorDict batch form (per-row tensors, nested tensors and
NonTensorStacks, batch-level NonTensorData) and its row operations."""

import copy

import pytest
import torch
from tensordict import TensorDict
from tensordict.tensorclass import NonTensorData, NonTensorStack

from verl.utils import tensordict_utils as tu


def jagged(*lengths: int, start: int = 0) -> torch.Tensor:
    return torch.nested.as_nested_tensor([torch.arange(start, start + n) for n in lengths], layout=torch.jagged)


def make() -> TensorDict:
    return tu.get_tensordict(
        {"obs": torch.arange(4), "ids": jagged(2, 1, 3, 2), "labels": ["a", ["b"], {"c": 1}, []]},
        non_tensor_dict={"temp": 0.7},
    )


def test_get_tensordict_kinds_and_plain_values():
    td = make()
    assert td.batch_size == torch.Size([4])
    assert isinstance(td.get("labels"), NonTensorStack) and isinstance(td.get("temp"), NonTensorData)
    assert tu.get(td, "labels") == ["a", ["b"], {"c": 1}, []]
    assert tu.get(td, "temp") == 0.7 and tu.get(td, "missing", 5) == 5
    assert torch.equal(tu.get(td, "obs"), torch.arange(4))
    assert tu.get_tensordict({}, {"only": 1}).batch_size == torch.Size([])


def test_get_tensordict_errors_name_the_key():
    with pytest.raises(ValueError, match="'b' has 3 rows, but 'a' has 2"):
        tu.get_tensordict({"a": torch.zeros(2), "b": [1, 2, 3]})
    with pytest.raises(ValueError, match="'t' holds torch.Tensors"):
        tu.get_tensordict({"t": [torch.zeros(1)]})
    with pytest.raises(ValueError, match="'x' is in both"):
        tu.get_tensordict({"x": [1]}, {"x": 1})
    with pytest.raises(TypeError, match="'n'.*numpy"):
        tu.get_tensordict({"n": (1, 2)})
    strided = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    with pytest.raises(ValueError, match="jagged"):
        tu.get_tensordict({"s": strided})


def test_pop_and_get_keys():
    td = make()
    got = tu.get_keys(td, ["obs", "temp"])
    assert set(got.keys()) == {"obs", "temp"} and got["temp"] == 0.7 and "obs" in td.keys()
    popped = tu.pop_keys(td, ["labels", "temp"])
    assert popped["labels"] == ["a", ["b"], {"c": 1}, []] and set(td.keys()) == {"obs", "ids"}
    with pytest.raises(KeyError, match="labels"):
        tu.pop_keys(td, ["labels"])
    assert torch.equal(tu.pop(td, "obs"), torch.arange(4)) and tu.pop(td, "obs", "gone") == "gone"


def test_assign_non_tensor():
    td = tu.get_tensordict({"obs": torch.zeros(3)})
    tu.assign_non_tensor(td, run="r1", scores=[[], [0.5], [1.0, 2.0]], wrapped=NonTensorData(3))
    assert td["run"] == "r1" and td["wrapped"] == 3 and list(td["scores"][2]) == [1.0, 2.0]
    with pytest.raises(RuntimeError):  # a stack of the wrong length: tensordict refuses it
        tu.assign_non_tensor(td, stack=NonTensorStack.from_list([NonTensorData(1), NonTensorData(2)]))


def test_assert_tensordict_eq_names_the_key():
    td = make()
    tu.assert_tensordict_eq(td, copy.deepcopy(td))
    other = copy.deepcopy(td)
    other["ids"] = jagged(2, 1, 3, 2, start=1)
    with pytest.raises(AssertionError, match="'ids'"):
        tu.assert_tensordict_eq(td, other)
    with pytest.raises(AssertionError, match="key sets differ"):
        tu.assert_tensordict_eq(td, tu.get_keys(td, ["obs"]))


def test_union_tensor_dict_compares_every_kind():
    td = make()
    tu.union_tensor_dict(td, tu.get_tensordict({"obs": torch.arange(4), "r": torch.ones(4)}, {"temp": 0.7}))
    assert "r" in td.keys()
    with pytest.raises(AssertionError, match="'temp'"):
        tu.union_tensor_dict(td, tu.get_tensordict({"obs": torch.arange(4)}, {"temp": 0.9}))
    with pytest.raises(AssertionError, match="'labels'"):
        tu.union_tensor_dict(td, tu.get_tensordict({"labels": ["z", ["b"], {"c": 1}, []]}))


def test_index_select_pad_unpad():
    td = make()
    sel = tu.index_select_tensor_dict(td, [3, 0])
    assert sel["obs"].tolist() == [3, 0] and [t.tolist() for t in sel["ids"].unbind()] == [[0, 1], [0, 1]]
    assert sel["labels"] == [[], "a"] and sel["temp"] == 0.7
    assert tu.index_select_tensor_dict(None, [0]) is None
    padded, pad = tu.pad_to_divisor(td, 3)
    assert pad == 2 and padded["obs"].tolist() == [0, 1, 2, 3, 0, 1] and padded["temp"] == 0.7
    tu.assert_tensordict_eq(tu.unpad(padded, pad), td)


def test_concat_and_chunk_with_nested_tensors():
    td = make()
    halves = tu.chunk_tensordict(td, 2)
    assert [h["obs"].tolist() for h in halves] == [[0, 1], [2, 3]]
    second = copy.deepcopy(halves[1])
    tu.assign_non_tensor(second, temp=0.1)  # meta info of later parts is not stacked: the first one's is kept
    out = tu.concat_tensordict([halves[0], second])
    assert out["temp"] == 0.7 and [t.tolist() for t in out["ids"].unbind()] == [[0, 1], [0], [0, 1, 2], [0, 1]]
    pos3d = torch.nested.as_nested_tensor([torch.zeros(3, n) for n in (2, 3, 4, 5)], layout=torch.jagged)
    pieces = tu.chunk_tensordict(tu.get_tensordict({"pos": pos3d}), 2)
    assert [p["pos"].unbind()[1].shape for p in pieces] == [torch.Size([3, 3]), torch.Size([3, 5])]
    with pytest.raises(ValueError, match="3 equal chunks"):
        tu.chunk_tensordict(td, 3)


def test_make_iterator_and_contiguous():
    td = make()
    minis = list(tu.make_iterator(td, 2, epochs=2, seed=0, dataloader_kwargs={"shuffle": False}))
    assert [m["obs"].tolist() for m in minis] == [[0, 1], [2, 3], [0, 1], [2, 3]]
    shuffled = [m["obs"].tolist() for m in tu.make_iterator(td, 2, 1, seed=3, dataloader_kwargs={"shuffle": True})]
    assert shuffled == [
        m["obs"].tolist() for m in tu.make_iterator(td, 2, 1, seed=3, dataloader_kwargs={"shuffle": True})
    ]
    strided = tu.get_tensordict({"x": torch.randn(4, 3)[:, :2], "labels": ["a", "b", "c", "d"]}, {"m": 1})
    cont = tu.contiguous(strided)
    assert cont["x"].is_contiguous() and cont["labels"] == ["a", "b", "c", "d"] and cont["m"] == 1
    tu.assert_tensordict_eq(cont, strided)
