"""Tests for verl.protocol_ops: TensorDict conversion, mini-batch iteration, folding rows, DataProtoFuture and the
descriptions, through the names verl.protocol exports."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from tensordict.tensorclass import NonTensorData, NonTensorStack
from torch.utils.data import DataLoader

from verl.protocol import DataProto, collate_fn, fold_batch_dim, unfold_batch_dim


def make(n: int = 6) -> DataProto:
    return DataProto.from_dict(
        {"obs": torch.arange(n).unsqueeze(1).repeat(1, 2)},
        non_tensors={"uid": [f"u{i}" for i in range(n)], "turns": [[0.5] * (i % 3) for i in range(n)]},
        meta_info={"step": 3},
    )


# ------------------------------------------------------------------------------------------ TensorDict form


def test_to_tensordict_holds_everything():
    td = make(3).to_tensordict()
    assert isinstance(td, TensorDict) and td.batch_size == torch.Size([3])
    assert isinstance(td.get("uid"), NonTensorStack) and isinstance(td.get("step"), NonTensorData)
    assert td["obs"][:, 0].tolist() == [0, 1, 2]
    assert td["uid"] == ["u0", "u1", "u2"] and td["step"] == 3
    assert list(td["turns"][2]) == [0.5, 0.5]


def test_tensordict_roundtrip_keeps_nested_values():
    d = make(4)
    d.non_tensor_batch["info"] = np.array([{"acc": 1.0}, {"acc": 0.0}, {}, {"acc": 0.5}], dtype=object)
    back = DataProto.from_tensordict(d.to_tensordict())
    assert torch.equal(back.batch["obs"], d.batch["obs"])
    for key in ("uid", "turns", "info"):
        assert (
            back.non_tensor_batch[key].shape == (4,)
            and back.non_tensor_batch[key].tolist() == d.non_tensor_batch[key].tolist()
        ), key
    assert back.meta_info == {"step": 3}


def test_to_tensordict_key_clash_names_it():
    d = make(2)
    d.meta_info["obs"] = 1
    with pytest.raises(ValueError, match=r"\['obs'\].*meta_info"):
        d.to_tensordict()


def test_from_tensordict_without_tensors():
    td = TensorDict({"s": NonTensorStack.from_list([NonTensorData("a"), NonTensorData("b")])}, batch_size=[2])
    d = DataProto.from_tensordict(td, meta_info={"given": True})
    assert len(d) == 2 and d.non_tensor_batch["s"].tolist() == ["a", "b"] and d.meta_info == {"given": True}


# -------------------------------------------------------------------------------------------------- iteration


def test_make_iterator_is_seeded_and_carries_meta_info():
    d = make(6)
    first = [
        m.batch["obs"][:, 0].tolist() for m in d.make_iterator(2, epochs=2, seed=1, dataloader_kwargs={"shuffle": True})
    ]
    again = [
        m.batch["obs"][:, 0].tolist() for m in d.make_iterator(2, epochs=2, seed=1, dataloader_kwargs={"shuffle": True})
    ]
    assert first == again and len(first) == 6
    assert sorted(sum(first[:3], [])) == list(range(6))  # each epoch covers every row once
    minis = list(d.make_iterator(3, epochs=1))
    assert [m.batch["obs"][:, 0].tolist() for m in minis] == [[0, 1, 2], [3, 4, 5]]
    assert all(m.meta_info == {"step": 3} for m in minis)
    assert minis[1].non_tensor_batch["uid"].tolist() == ["u3", "u4", "u5"]
    with pytest.raises(ValueError, match="mini-batches of 4"):
        d.make_iterator(4, epochs=1)


def test_make_iterator_draws_the_rows_a_loader_over_the_dataproto_draws():
    """verl builds its loader over the DataProto itself with collate_fn; same sampler, same seed, same rows."""
    d = make(8)
    generator = torch.Generator().manual_seed(7)
    loader = DataLoader(d, batch_size=4, collate_fn=collate_fn, generator=generator, shuffle=True)
    expected = [m.batch["obs"][:, 0].tolist() for _ in range(2) for m in loader]
    got = [m.batch["obs"][:, 0].tolist() for m in d.make_iterator(4, 2, seed=7, dataloader_kwargs={"shuffle": True})]
    assert got == expected


def test_collate_fn_stacks_rows():
    d = make(3)
    d.non_tensor_batch["pair"] = np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=object)
    out = collate_fn([d[2], d[0]])
    assert out.batch["obs"][:, 0].tolist() == [2, 0]
    assert out.non_tensor_batch["uid"].tolist() == ["u2", "u0"]
    assert out.non_tensor_batch["turns"].shape == (2,) and out.non_tensor_batch["turns"][0] == [0.5, 0.5]
    assert out.non_tensor_batch["pair"].shape == (2, 2)  # rows of a 2-D column stack back


# ---------------------------------------------------------------------------------------------- fold/unfold


def test_fold_then_unfold_batch_dim():
    d = make(6).repeat(1)
    folded = fold_batch_dim(d, new_batch_size=3)
    assert len(folded) == 3 and folded.batch["obs"].shape == (3, 2, 2)
    assert folded.non_tensor_batch["uid"].tolist() == [["u0", "u1"], ["u2", "u3"], ["u4", "u5"]]
    folded.reorder(torch.tensor([2, 0, 1]))
    flat = unfold_batch_dim(folded, batch_dims=2)
    assert flat.batch["obs"][:, 0].tolist() == [4, 5, 0, 1, 2, 3]
    assert flat.non_tensor_batch["uid"].tolist() == ["u4", "u5", "u0", "u1", "u2", "u3"]
    assert flat.meta_info == {"step": 3}
    with pytest.raises(ValueError, match="new_batch_size=4"):
        fold_batch_dim(d, 4)


# ------------------------------------------------------------------------------------------ futures (real Ray)


FUTURE_SCRIPT = """
import ray, sys
from verl.protocol import DataProto, DataProtoFuture
from verl.single_controller.ray.cluster import init_ray, shutdown_ray

session = init_ray(sys.argv[1], num_cpus=1)
try:
    d = DataProto.from_dict({"x": __import__("torch").arange(4)}, {"uid": ["u0", "u1", "u2", "u3"]}, {"step": 3})
    refs = [ray.put(part) for part in d.chunk(2)]
    whole = DataProtoFuture.concat(refs).get()
    assert whole.batch["x"].tolist() == [0, 1, 2, 3] and whole.meta_info == {"step": 3}, whole
    halves = DataProtoFuture.concat(refs).chunk(2)
    assert [h.get().non_tensor_batch["uid"].tolist() for h in halves] == [["u0", "u1"], ["u2", "u3"]]
    td_refs = [ray.put(part.to_tensordict()) for part in d.chunk(2)]
    assert DataProtoFuture(collect_fn=None, futures=td_refs).get()["uid"] == ["u0", "u1", "u2", "u3"]
    print("FUTURES OK")
finally:
    shutdown_ray(session)
"""


@pytest.mark.slow  # starts Ray (about 10 s, 30 s on a busy 2-core machine)
def test_data_proto_future_concats_and_chunks(tmp_path):
    """Real object refs in a Ray session of its own (a second Ray session in one test process does not start)."""
    pytest.importorskip("ray", reason="DataProtoFuture holds Ray object refs")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", FUTURE_SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0 and "FUTURES OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


# ---------------------------------------------------------------------------------------------- descriptions


def test_get_data_info_lists_shapes_and_types():
    d = make(2)
    d.meta_info["metrics"] = {"loss": [0.1]}
    info = d.get_data_info()
    assert info.splitlines()[0] == "batch"
    assert "  obs: (2, 2) (torch.int64) cpu" in info
    assert "  uid: ndarray(2,) (object)" in info
    assert "  metrics: dict[str: list[float]]" in info


def test_save_to_disk_is_a_pickle_and_old_files_load(tmp_path):
    d = make(3)
    path = tmp_path / "batch.pkl"
    d.save_to_disk(path)
    with open(path, "rb") as f:
        assert pickle.load(f).non_tensor_batch["uid"].tolist() == ["u0", "u1", "u2"]
    old = tmp_path / "old.pt"  # written with torch.save by versions before the TensorDict batch
    torch.save(d, old)
    assert DataProto.load_from_disk(old).batch["obs"].shape == (3, 2)
    torch.save({"not": "a batch"}, old)
    with pytest.raises(TypeError, match="does not contain a DataProto"):
        DataProto.load_from_disk(old)


def test_pickle_keeps_an_empty_batch_size():
    d = DataProto(batch=TensorDict({}, batch_size=[10]))
    back = pickle.loads(pickle.dumps(d))
    assert len(back.batch.keys()) == 0 and back.batch.batch_size == torch.Size([10])


def test_unpickles_the_dict_batch_of_older_versions():
    d = DataProto.__new__(DataProto)
    d.__setstate__({"batch": {"x": torch.ones(2)}, "non_tensor_batch": {}, "meta_info": {"a": 1}})
    assert isinstance(d.batch, TensorDict) and len(d) == 2 and d.meta_info == {"a": 1}
