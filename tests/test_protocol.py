"""Tests for verl.protocol.DataProto (a TensorDict batch, verl's methods) and the padding helpers."""

import pickle

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from verl.protocol import (
    DataProto,
    DataProtoConfig,
    DataProtoError,
    DataProtoItem,
    pad_dataproto_to_divisor,
    to_object_array,
    unpad_dataproto,
)


def make(n: int = 4, meta: dict | None = None) -> DataProto:
    """Rows are tagged by value so every reordering is checkable: obs[i] == [i, i], uid[i] == f"u{i}"."""
    return DataProto.from_dict(
        tensors={
            "obs": torch.arange(n).unsqueeze(1).repeat(1, 2),
            "act": torch.arange(n, dtype=torch.float32) * 10,
        },
        non_tensors={"uid": [f"u{i}" for i in range(n)], "info": [{"i": i} for i in range(n)]},
        meta_info={"temperature": 1.0} if meta is None else meta,
    )


def rows(d: DataProto) -> list[int]:
    """The original row ids, read from both a tensor and a non-tensor (they must agree)."""
    from_tensor = d.batch["obs"][:, 0].tolist()
    from_array = [int(u[1:]) for u in d.non_tensor_batch["uid"]]
    assert from_tensor == from_array
    assert [x["i"] for x in d.non_tensor_batch["info"]] == from_tensor
    return from_tensor


# ------------------------------------------------------------------------------------------------ construction


def test_from_dict_basic():
    d = make(4)
    assert len(d) == 4
    assert set(d.batch.keys()) == {"obs", "act"}
    assert d.batch["obs"].shape == (4, 2)
    assert d.meta_info == {"temperature": 1.0}
    assert rows(d) == [0, 1, 2, 3]


def test_list_non_tensors_become_1d_object_arrays():
    d = DataProto.from_dict(
        tensors={"x": torch.zeros(3, 2)},
        non_tensors={"lists": [[1, 2], [3, 4], [5, 6]], "dicts": [{"a": 1}, {"a": 2}, {"b": 3}], "s": ["a", "b", "c"]},
    )
    for key in ("lists", "dicts", "s"):
        arr = d.non_tensor_batch[key]
        assert isinstance(arr, np.ndarray) and arr.dtype == object and arr.shape == (3,), key
    assert d.non_tensor_batch["lists"][1] == [3, 4]
    assert d.non_tensor_batch["dicts"][2] == {"b": 3}
    # ragged lists too
    assert to_object_array([[1], [2, 3]]).shape == (2,)


def test_from_single_dict_splits_types():
    d = DataProto.from_single_dict(
        {"x": torch.ones(2, 3), "arr": np.array(["p", "q"], dtype=object), "lst": [{"k": 1}, {"k": 2}]},
        meta_info={"step": 7},
    )
    assert list(d.batch.keys()) == ["x"]
    assert set(d.non_tensor_batch) == {"arr", "lst"}
    assert d.non_tensor_batch["lst"].shape == (2,)
    assert d.meta_info == {"step": 7}
    with pytest.raises(TypeError, match="'bad'"):
        DataProto.from_single_dict({"x": torch.ones(2), "bad": 3})


def test_mismatched_tensor_lengths_name_key_and_sizes():
    with pytest.raises(ValueError, match=r"'b'.*3.*'a'.*4"):
        DataProto.from_dict({"a": torch.zeros(4), "b": torch.zeros(3)})


def test_mismatched_non_tensor_length_names_key_and_sizes():
    with pytest.raises(ValueError, match=r"'uid'.*5.*'a'.*4"):
        DataProto.from_dict({"a": torch.zeros(4)}, non_tensors={"uid": np.array(list(range(5)), dtype=object)})
    with pytest.raises(ValueError, match="'q'"):
        DataProto(batch={"a": torch.zeros(2)}, non_tensor_batch={"q": np.zeros(3)})


def test_bad_types_rejected():
    with pytest.raises(TypeError, match="'a'"):
        DataProto(batch={"a": [1, 2]})
    with pytest.raises(ValueError, match="0-d"):
        DataProto(batch={"a": torch.tensor(1.0)})
    with pytest.raises(TypeError, match="'n'"):
        DataProto.from_dict(non_tensors={"n": 5})


def test_empty_lengths():
    assert len(DataProto()) == 0
    assert DataProto().batch is None
    only_nt = DataProto.from_dict(non_tensors={"s": ["a", "b", "c"]})
    assert only_nt.batch is None
    assert len(only_nt) == 3
    assert len(DataProto(meta_info={"a": 1})) == 0


def test_repr_is_short_summary():
    r = repr(make(4))
    assert "len=4" in r and "obs" in r and "(4, 2)" in r and "int64" in r and "uid" in r and "temperature" in r
    assert len(r) < 400


def test_print_size(capsys):
    make(2).print_size(prefix="dbg")
    out = capsys.readouterr().out
    assert out.startswith("dbg, ") and "GB" in out


# ---------------------------------------------------------------------------------------------------- indexing


def test_int_index_returns_item():
    d = make(4)
    item = d[2]
    assert isinstance(item, DataProtoItem)
    assert item.batch["obs"].tolist() == [2, 2]
    assert item.non_tensor_batch["uid"] == "u2"
    assert item.non_tensor_batch["info"] == {"i": 2}
    assert item.meta_info == {"temperature": 1.0}
    assert d[-1].non_tensor_batch["uid"] == "u3"
    assert d[np.int64(1)].non_tensor_batch["uid"] == "u1"
    with pytest.raises(IndexError):
        d[4]
    assert [it.non_tensor_batch["uid"] for it in d] == ["u0", "u1", "u2", "u3"]


def test_slice_and_step():
    d = make(6)
    assert rows(d[1:4]) == [1, 2, 3]
    assert rows(d[::2]) == [0, 2, 4]
    assert rows(d[::-2]) == [5, 3, 1]
    assert rows(d.slice(1, 6, 2)) == [1, 3, 5]
    assert len(d[10:]) == 0
    assert d[1:3].meta_info == d.meta_info


def test_index_list_array_tensor_and_mask():
    d = make(5)
    assert rows(d[[4, 0, 0]]) == [4, 0, 0]
    assert rows(d[np.array([3, 1])]) == [3, 1]
    assert rows(d[torch.tensor([2, -1])]) == [2, 4]
    assert rows(d[[True, False, True, False, True]]) == [0, 2, 4]
    assert rows(d[np.array([False] * 4 + [True])]) == [4]
    assert rows(d[torch.tensor([False, True, False, False, False])]) == [1]
    assert len(d[[]]) == 0
    with pytest.raises(IndexError, match="length 3"):
        d[[True, False, True]]
    with pytest.raises(IndexError, match="out of range"):
        d[[0, 5]]
    with pytest.raises(TypeError, match="batch"):
        d["obs"]
    with pytest.raises(TypeError, match="0-d bool"):  # e.g. (x > 0).all() passed by mistake: not row 1
        d[torch.tensor(True)]
    assert isinstance(d[torch.tensor(3)], DataProtoItem)  # a 0-d integer tensor is a row number


def test_indexing_without_tensors():
    d = DataProto.from_dict(non_tensors={"s": ["a", "b", "c"]})
    assert d[1:].non_tensor_batch["s"].tolist() == ["b", "c"]
    assert d[[2]].batch is None
    assert d[0].batch is None and d[0].non_tensor_batch["s"] == "a"


# -------------------------------------------------------------------------------------------- select/pop/rename


def test_select():
    d = make(3, meta={"a": 1, "b": 2})
    s = d.select(batch_keys=["obs"], non_tensor_batch_keys=["uid"], meta_info_keys=["a"])
    assert list(s.batch.keys()) == ["obs"]
    assert list(s.non_tensor_batch) == ["uid"]
    assert s.meta_info == {"a": 1}
    assert set(d.batch.keys()) == {"obs", "act"}  # original untouched
    assert s.batch["obs"] is d.batch["obs"]  # shared without deepcopy
    deep = d.select(batch_keys=["obs"], deepcopy=True)
    deep.batch["obs"][0, 0] = 99
    assert d.batch["obs"][0, 0] == 0
    assert set(deep.non_tensor_batch) == {"uid", "info"}  # None keeps all
    with pytest.raises(KeyError, match="nope"):
        d.select(batch_keys=["nope"])


def test_pop_removes_from_self():
    d = make(3, meta={"a": 1, "b": 2})
    p = d.pop(batch_keys=["act"], non_tensor_batch_keys=["info"], meta_info_keys=["b"])
    assert list(p.batch.keys()) == ["act"] and list(p.non_tensor_batch) == ["info"] and p.meta_info == {"b": 2}
    assert list(d.batch.keys()) == ["obs"] and list(d.non_tensor_batch) == ["uid"] and d.meta_info == {"a": 1}
    assert len(p) == len(d) == 3
    # popping all tensors leaves length defined by non-tensors
    d.pop(batch_keys=["obs"])
    assert len(d) == 3
    # nothing requested -> nothing popped
    q = d.pop()
    assert q.batch is None and q.non_tensor_batch == {} and list(d.non_tensor_batch) == ["uid"]
    with pytest.raises(KeyError, match="missing"):
        d.pop(non_tensor_batch_keys=["missing"])


def test_rename():
    d = make(2)
    assert d.rename("obs", "observation") is d
    assert "observation" in d.batch and "obs" not in d.batch
    d.rename(["act", "uid"], ["action", "id"])
    assert set(d.batch.keys()) == {"observation", "action"}
    assert set(d.non_tensor_batch) == {"id", "info"}
    with pytest.raises(ValueError, match="already exists"):
        d.rename("action", "observation")
    with pytest.raises(KeyError):
        d.rename("gone", "x")


# -------------------------------------------------------------------------------------------------------- union


def test_union_success_and_meta_merge():
    a = make(3, meta={"t": 1.0})
    b = DataProto.from_dict(
        {"obs": a.batch["obs"].clone(), "reward": torch.ones(3)},
        non_tensors={"uid": a.non_tensor_batch["uid"].copy(), "extra": ["x", "y", "z"]},
        meta_info={"t": 1.0, "step": 5},
    )
    out = a.union(b)
    assert out is a  # in place, like verl
    assert set(a.batch.keys()) == {"obs", "act", "reward"}
    assert set(a.non_tensor_batch) == {"uid", "info", "extra"}
    assert a.meta_info == {"t": 1.0, "step": 5}
    assert rows(a) == [0, 1, 2]


def test_union_conflicts_name_key():
    a = make(3)
    b = DataProto.from_dict({"act": torch.zeros(3)})
    with pytest.raises(ValueError, match="'act'"):
        a.union(b)
    assert "act" in a.batch and torch.equal(a.batch["act"], torch.tensor([0.0, 10.0, 20.0]))  # unchanged
    c = DataProto.from_dict(non_tensors={"uid": ["u0", "u1", "other"]})
    with pytest.raises(ValueError, match="'uid'"):
        a.union(c)
    with pytest.raises(ValueError, match="'temperature'"):
        a.union(DataProto(meta_info={"temperature": 0.5}))


def test_union_length_mismatch():
    with pytest.raises(ValueError, match="3 vs 2"):
        make(3).union(make(2))


def test_union_with_none_batch():
    a = make(2)
    a.union(DataProto.from_dict(non_tensors={"tag": ["p", "q"]}, meta_info={"k": 1}))
    assert a.non_tensor_batch["tag"].tolist() == ["p", "q"]
    assert a.meta_info["k"] == 1
    # self with batch None gains tensors
    b = DataProto.from_dict(non_tensors={"tag": ["p", "q"]})
    b.union(DataProto.from_dict({"x": torch.ones(2)}))
    assert torch.equal(b.batch["x"], torch.ones(2))
    # a meta-only DataProto merges into anything
    c = make(2)
    c.union(DataProto(meta_info={"only": True}))
    assert c.meta_info["only"] is True and len(c) == 2


def test_union_equal_values_with_nan_and_objects():
    x = torch.tensor([float("nan"), 1.0])
    a = DataProto.from_dict({"x": x}, non_tensors={"o": [{"v": [1]}, np.array([1.0, np.nan])]})
    b = DataProto.from_dict({"x": x.clone()}, non_tensors={"o": [{"v": [1]}, np.array([1.0, np.nan])]})
    a.union(b)  # NaN == NaN and nested objects compare equal
    assert len(a) == 2


# ------------------------------------------------------------------------------------------------------- concat


def test_concat():
    d = make(5)
    parts = [d[:2], d[2:3], d[3:]]
    parts[1].meta_info["extra"] = True
    out = DataProto.concat(parts)
    assert len(out) == 5 and rows(out) == [0, 1, 2, 3, 4]
    assert out.meta_info == {"temperature": 1.0, "extra": True}  # every part's keys (verl's rule)
    assert out.non_tensor_batch["info"].dtype == object and out.non_tensor_batch["info"].shape == (5,)


def test_concat_key_mismatch_names_key():
    a = make(2)
    b = make(2)
    b.pop(batch_keys=["act"])
    with pytest.raises(ValueError, match="'act'"):
        DataProto.concat([a, b])
    c = make(2)
    c.rename("uid", "uid2")
    with pytest.raises(ValueError, match="'uid"):
        DataProto.concat([a, c])
    with pytest.raises(ValueError):
        DataProto.concat([])


# -------------------------------------------------------------------------------------------- chunk/split/repeat


def test_chunk():
    d = make(6)
    chunks = d.chunk(3)
    assert [rows(c) for c in chunks] == [[0, 1], [2, 3], [4, 5]]
    assert all(c.meta_info == d.meta_info for c in chunks)
    assert rows(DataProto.concat(chunks)) == rows(d)


def test_chunk_not_divisible():
    with pytest.raises(ValueError, match=r"not divisible.*split"):
        make(5).chunk(2)


def test_split_uneven():
    pieces = make(5).split(2)
    assert [rows(p) for p in pieces] == [[0, 1], [2, 3], [4]]
    assert len(make(4).split(10)) == 1
    empty = make(0).split(3)
    assert len(empty) == 1 and len(empty[0]) == 0


def test_repeat_interleave():
    d = make(3)
    r = d.repeat(repeat_times=2, interleave=True)
    assert rows(r) == [0, 0, 1, 1, 2, 2]
    assert r.batch["act"].tolist() == [0.0, 0.0, 10.0, 10.0, 20.0, 20.0]
    assert r.meta_info == d.meta_info


def test_repeat_tile():
    r = make(3).repeat(repeat_times=3, interleave=False)
    assert rows(r) == [0, 1, 2, 0, 1, 2, 0, 1, 2]
    assert r.batch["obs"].shape == (9, 2)


def test_repeat_multidim_non_tensor():
    d = DataProto.from_dict({"x": torch.arange(2)}, non_tensors={"m": np.array([[1, 2], [3, 4]])})
    assert d.repeat(2, interleave=False).non_tensor_batch["m"].tolist() == [[1, 2], [3, 4], [1, 2], [3, 4]]
    assert d.repeat(2).non_tensor_batch["m"].tolist() == [[1, 2], [1, 2], [3, 4], [3, 4]]


def test_reorder_in_place():
    d = make(4)
    assert d.reorder(torch.tensor([3, 1, 0, 2])) is None
    assert rows(d) == [3, 1, 0, 2]
    d.reorder([1, 0, 3, 2])
    assert rows(d) == [1, 3, 2, 0]
    with pytest.raises(ValueError, match="permutation"):
        d.reorder([0, 0, 1, 2])


# ------------------------------------------------------------------------------------------- device/persistence


def test_to_cpu_returns_self():
    d = make(2)
    assert d.to("cpu") is d
    assert d.to(torch.device("cpu")).batch["obs"].device.type == "cpu"


def test_pickle_roundtrip():
    d = make(4, meta={"t": 0.7, "nested": {"a": [1, 2]}})
    d2 = pickle.loads(pickle.dumps(d))
    assert isinstance(d2, DataProto)
    assert rows(d2) == rows(d)
    assert torch.equal(d2.batch["act"], d.batch["act"])
    assert d2.meta_info == d.meta_info
    assert d2.non_tensor_batch["info"].dtype == object


def test_pickle_of_slice_does_not_ship_parent_storage():
    big = DataProto.from_dict({"x": torch.zeros(10_000, 64)})
    small = big[:2]
    blob = pickle.dumps(small)
    assert len(blob) < 10_000  # the parent's buffer is ~2.5 MB
    assert pickle.loads(blob).batch["x"].shape == (2, 64)


def test_save_load_roundtrip(tmp_path):
    d = make(3, meta={"step": 3})
    path = tmp_path / "batch.pt"
    d.save_to_disk(path)
    d2 = DataProto.load_from_disk(path)
    assert rows(d2) == [0, 1, 2]
    assert torch.equal(d2.batch["obs"], d.batch["obs"])
    assert d2.meta_info == {"step": 3}


# ------------------------------------------------------------------------------------------------------ padding


@pytest.mark.parametrize(("n", "divisor", "expected_pad"), [(5, 4, 3), (8, 4, 0), (2, 7, 5), (3, 1, 0)])
def test_pad_unpad_roundtrip(n, divisor, expected_pad):
    d = make(n)
    padded, pad = pad_dataproto_to_divisor(d, divisor)
    assert pad == expected_pad
    assert len(padded) % divisor == 0 and len(padded) == n + pad
    # padding repeats rows from the start, cycling if needed
    assert rows(padded) == list(range(n)) + [i % n for i in range(pad)]
    assert padded.meta_info == d.meta_info
    restored = unpad_dataproto(padded, pad)
    assert rows(restored) == list(range(n))
    assert len(padded.chunk(divisor)) == divisor


def test_pad_empty_is_noop():
    d = DataProto()
    padded, pad = pad_dataproto_to_divisor(d, 4)
    assert pad == 0 and padded is d


# ------------------------------------------------------------------------------------------ TensorDict batch


def test_batch_is_a_tensordict_and_dicts_convert():
    d = make(3)
    assert isinstance(d.batch, TensorDict) and d.batch.batch_size == torch.Size([3])
    direct = DataProto(batch={"x": torch.zeros(3, 2)})
    assert isinstance(direct.batch, TensorDict) and len(direct) == 3
    direct.batch = {"y": torch.ones(3)}  # assignment converts too
    assert isinstance(direct.batch, TensorDict) and list(direct.batch.keys()) == ["y"]
    x = torch.arange(3)
    assert DataProto(batch={"x": x}).batch["x"] is x  # stored, not copied


def test_assigned_batch_must_fit_the_non_tensors():
    d = make(3)
    with pytest.raises(ValueError, match=r"'uid'.*3.*4"):
        d.batch = {"x": torch.zeros(4)}
    with pytest.raises(ValueError, match=r"'b'.*2.*'a'.*3"):
        d.batch = {"a": torch.zeros(3), "b": torch.zeros(2)}


def test_empty_dict_batch_takes_the_non_tensor_length():
    d = DataProto(batch={}, non_tensor_batch={"s": ["a", "b"]})
    assert isinstance(d.batch, TensorDict) and d.batch.batch_size == torch.Size([2]) and len(d) == 2
    d.batch["x"] = torch.ones(2)  # keys can be added as to a dict
    assert DataProto(batch={}).batch is None


def test_tensordict_batch_needs_one_batch_dim():
    with pytest.raises(AssertionError, match="exactly one batch dim"):
        DataProto(batch=TensorDict({"x": torch.zeros(2, 3)}, batch_size=[2, 3]))
    with pytest.raises(ValueError, match="num_batch_dims=2"):
        DataProto.from_dict({"x": torch.zeros(2, 3)}, num_batch_dims=2)


def test_errors_are_value_and_assertion_errors():
    """verl asserts where we raise DataProtoError: code ported from verl catches AssertionError."""
    assert issubclass(DataProtoError, ValueError) and issubclass(DataProtoError, AssertionError)
    with pytest.raises(AssertionError, match="not divisible"):
        make(5).chunk(2)


def test_row_of_batch_is_zero_dim_tensordict():
    item = make(3)[1]
    assert isinstance(item.batch, TensorDict) and item.batch.batch_size == torch.Size([])
    assert item.batch["obs"].tolist() == [1, 1]


def test_index_results_have_int_batch_sizes():
    d = make(4)
    for idx in (np.array([True, False, True, False]), [0, 2], torch.tensor([0, 2]), slice(0, 2)):
        sel = d[idx]
        assert isinstance(sel.batch.batch_size, torch.Size) and all(type(s) is int for s in sel.batch.batch_size)


# ----------------------------------------------------------------------------------------- concat meta_info


def test_concat_merges_metrics_of_every_part():
    parts = [make(2, meta={"metrics": m, "flag": True}) for m in ([{"loss": 0.5}], {"loss": 0.6}, None)]
    parts.insert(0, make(2, meta={"flag": True}))  # the first part has no metrics: the others' are kept
    out = DataProto.concat(parts)
    assert out.meta_info == {"flag": True, "metrics": {"loss": [0.5, 0.6]}}


def test_concat_metrics_with_different_names():
    a = make(1, meta={"metrics": {"loss": 1.0}})
    b = make(1, meta={"metrics": {"loss": 2.0, "acc": 0.5}})
    assert DataProto.concat([a, b]).meta_info["metrics"] == {"loss": [1.0, 2.0], "acc": [0.5]}


def test_concat_conflicting_meta_info_names_the_key():
    with pytest.raises(AssertionError, match="Conflicting values for meta_info key 'temperature'"):
        DataProto.concat([make(2, meta={"temperature": 1.0}), make(2, meta={"temperature": 0.5})])
    equal = DataProto.concat([make(2, meta={"v": float("nan")}), make(2, meta={"v": float("nan")})])
    assert len(equal) == 4  # NaN == NaN, as in union


def test_concat_without_tensors():
    parts = [DataProto.from_dict(non_tensors={"s": ["a"]}), DataProto.from_dict(non_tensors={"s": ["b"]})]
    out = DataProto.concat(parts)
    assert out.batch is None and out.non_tensor_batch["s"].tolist() == ["a", "b"]


# -------------------------------------------------------------------------------------- verl's row methods


def test_chunk_uneven_with_auto_padding():
    d = DataProto.from_dict({"x": torch.arange(7)}, auto_padding=True)
    assert d.is_padding_enabled()
    assert [p.batch["x"].tolist() for p in d.chunk(3)] == [[0, 1, 2], [3, 4], [5, 6]]
    assert len(DataProto.concat(d.chunk(3))) == 7


def test_auto_padding_switches(monkeypatch):
    d = make(5)
    assert not d.is_padding_enabled()
    monkeypatch.setenv("VERL_AUTO_PADDING", "1")
    assert d.is_padding_enabled() and len(d.chunk(2)) == 2
    monkeypatch.delenv("VERL_AUTO_PADDING")
    DataProtoConfig.auto_padding = True
    try:
        assert d.is_padding_enabled()
    finally:
        DataProtoConfig.auto_padding = False
    with pytest.raises(TypeError):
        DataProtoConfig.auto_padding = "yes"


def test_padding_repeats_first_or_last_row_in_place():
    d = make(3)
    d.padding(2)
    assert rows(d) == [0, 1, 2, 2, 2]
    e = make(3)
    e.padding(1, padding_candidate="first")
    assert rows(e) == [0, 1, 2, 0]
    e.padding(0)
    assert len(e) == 4


def test_sample_level_repeat():
    d = make(3)
    assert rows(d.sample_level_repeat([3, 1, 2])) == [0, 0, 0, 1, 2, 2]
    assert rows(d.sample_level_repeat(torch.tensor([0, 2, 1]))) == [1, 1, 2]
    assert rows(d.sample_level_repeat(np.array([1, 1, 1]))) == [0, 1, 2]
    assert d.sample_level_repeat((1, 0, 0)).meta_info == d.meta_info
    with pytest.raises(ValueError, match="one count per row"):
        d.sample_level_repeat([1, 2])
    with pytest.raises(ValueError, match="non-negative"):
        d.sample_level_repeat([1, -1, 1])


def test_unfold_column_chunks():
    d = DataProto.from_dict(
        {"pair": torch.tensor([[1, 2], [3, 4]]), "id": torch.tensor([10, 20])},
        non_tensors={"labels": [["a1", "a2"], ["b1", "b2"]], "uid": ["a", "b"]},
        meta_info={"k": 1},
    )
    out = d.unfold_column_chunks(2, split_keys=["pair", "labels"])
    assert out.batch["pair"].tolist() == [[1], [2], [3], [4]]
    assert out.batch["id"].tolist() == [10, 10, 20, 20]
    assert out.non_tensor_batch["labels"].tolist() == [["a1"], ["a2"], ["b1"], ["b2"]]
    assert out.non_tensor_batch["uid"].tolist() == ["a", "a", "b", "b"]
    assert out.meta_info == {"k": 1}
    with pytest.raises(ValueError, match="'pair'.*n_split=3"):
        d.unfold_column_chunks(3, split_keys=["pair"])
