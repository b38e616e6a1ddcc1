"""Dispatch and collect modes of @register, without Ray: what each rank receives and what the controller gets."""

import pytest
import torch

from verl.protocol import DataProto
from verl.single_controller.base.decorator import (
    Dispatch,
    collect_results,
    dispatch_args,
    register,
    registered_methods,
)


class Role:
    @register(Dispatch.ONE_TO_ALL)
    def init_model(self):
        pass

    @register(Dispatch.DP_COMPUTE_PROTO, pad=True)
    def infer(self, data):
        pass

    @register(Dispatch.DP_COMPUTE_PROTO)
    def update(self, data):
        pass

    def helper(self):
        pass


def rows(n: int) -> DataProto:
    return DataProto.from_dict({"x": torch.arange(n).unsqueeze(1)}, non_tensors={"s": [str(i) for i in range(n)]})


def test_registered_methods_lists_modes_and_padding():
    assert registered_methods(Role) == {
        "init_model": (Dispatch.ONE_TO_ALL, False),
        "infer": (Dispatch.DP_COMPUTE_PROTO, True),
        "update": (Dispatch.DP_COMPUTE_PROTO, False),
    }


def test_dp_split_gives_contiguous_chunks_and_concat_restores_order():
    per_rank, pad = dispatch_args(Dispatch.DP_COMPUTE_PROTO, 2, (rows(6),), {"k": 3}, "r.m")
    assert pad == 0
    assert [a[0].batch["x"].squeeze(1).tolist() for a, _ in per_rank] == [[0, 1, 2], [3, 4, 5]]
    assert [kw for _, kw in per_rank] == [{"k": 3}, {"k": 3}]  # non-DataProto arguments go to every rank
    outs = [a[0] for a, _ in per_rank]
    back = collect_results(Dispatch.DP_COMPUTE_PROTO, outs)
    assert back.batch["x"].squeeze(1).tolist() == list(range(6))
    assert back.non_tensor_batch["s"].tolist() == [str(i) for i in range(6)]


def test_uneven_batch_is_padded_for_inference_and_trimmed_back():
    per_rank, pad = dispatch_args(Dispatch.DP_COMPUTE_PROTO, 2, (rows(5),), {}, "r.infer", pad=True)
    assert pad == 1 and [len(a[0]) for a, _ in per_rank] == [3, 3]
    back = collect_results(Dispatch.DP_COMPUTE_PROTO, [a[0] for a, _ in per_rank], pad)
    assert back.batch["x"].squeeze(1).tolist() == [0, 1, 2, 3, 4]


def test_uneven_batch_for_an_update_is_an_error_naming_the_fix():
    with pytest.raises(ValueError, match=r"r\.update: a batch of 5 rows does not split evenly over 2.*n_gpus_per_node"):
        dispatch_args(Dispatch.DP_COMPUTE_PROTO, 2, (rows(5),), {}, "r.update")


def test_metrics_of_all_ranks_are_merged_and_rank_zero_mode_returns_one():
    outs = [DataProto(meta_info={"metrics": {"a": [1.0, 2.0]}}), DataProto(meta_info={"metrics": {"a": [3.0]}})]
    assert collect_results(Dispatch.DP_COMPUTE_PROTO, outs).meta_info["metrics"] == {"a": [1.0, 2.0, 3.0]}
    assert collect_results(Dispatch.RANK_ZERO, ["r0", "r1"]) == "r0"
    assert collect_results(Dispatch.ONE_TO_ALL, ["r0", "r1"]) == ["r0", "r1"]
