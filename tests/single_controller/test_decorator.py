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
    per_rank, pad, order = dispatch_args(Dispatch.DP_COMPUTE_PROTO, 2, (rows(6),), {"k": 3}, "r.m")
    assert pad == 0 and order is None
    assert [a[0].batch["x"].squeeze(1).tolist() for a, _ in per_rank] == [[0, 1, 2], [3, 4, 5]]
    assert [kw for _, kw in per_rank] == [{"k": 3}, {"k": 3}]  # non-DataProto arguments go to every rank
    outs = [a[0] for a, _ in per_rank]
    back = collect_results(Dispatch.DP_COMPUTE_PROTO, outs)
    assert back.batch["x"].squeeze(1).tolist() == list(range(6))
    assert back.non_tensor_batch["s"].tolist() == [str(i) for i in range(6)]


def test_uneven_batch_is_padded_for_inference_and_trimmed_back():
    per_rank, pad, order = dispatch_args(Dispatch.DP_COMPUTE_PROTO, 2, (rows(5),), {}, "r.infer", pad=True)
    assert pad == 1 and [len(a[0]) for a, _ in per_rank] == [3, 3]
    back = collect_results(Dispatch.DP_COMPUTE_PROTO, [a[0] for a, _ in per_rank], pad, order)
    assert back.batch["x"].squeeze(1).tolist() == [0, 1, 2, 3, 4]


def test_uneven_batch_for_an_update_is_an_error_naming_the_fix():
    with pytest.raises(ValueError, match=r"r\.update: a batch of 5 rows does not split evenly over 2.*n_gpus_per_node"):
        dispatch_args(Dispatch.DP_COMPUTE_PROTO, 2, (rows(5),), {}, "r.update")


def test_metrics_of_all_ranks_are_merged_and_rank_zero_mode_returns_one():
    outs = [DataProto(meta_info={"metrics": {"a": [1.0, 2.0]}}), DataProto(meta_info={"metrics": {"a": [3.0]}})]
    assert collect_results(Dispatch.DP_COMPUTE_PROTO, outs).meta_info["metrics"] == {"a": [1.0, 2.0, 3.0]}
    assert collect_results(Dispatch.RANK_ZERO, ["r0", "r1"]) == "r0"
    assert collect_results(Dispatch.ONE_TO_ALL, ["r0", "r1"]) == ["r0", "r1"]


def test_mini_batches_are_split_across_ranks_and_results_come_back_in_order():
    """With mini_batch_rows=4 over 2 ranks, rank r gets its half of every mini-batch: rank 0 rows 0,1,4,5 and
    rank 1 rows 2,3,6,7, so each rank's local mini-batch k is its part of global mini-batch k."""
    data = rows(8)
    data.meta_info["mini_batch_rows"] = 4
    per_rank, pad, order = dispatch_args(Dispatch.DP_COMPUTE_PROTO, 2, (data,), {}, "r.update")
    assert [a[0].batch["x"].squeeze(1).tolist() for a, _ in per_rank] == [[0, 1, 4, 5], [2, 3, 6, 7]]
    back = collect_results(Dispatch.DP_COMPUTE_PROTO, [a[0] for a, _ in per_rank], pad, order)
    assert back.batch["x"].squeeze(1).tolist() == list(range(8))
    assert back.non_tensor_batch["s"].tolist() == [str(i) for i in range(8)]


def test_balanced_split_evens_token_counts_per_mini_batch():
    mask = torch.zeros(8, 10, dtype=torch.long)
    for i, n in enumerate([10, 9, 1, 2, 10, 9, 1, 2]):  # contiguous halves: 19 vs 3 tokens per mini-batch
        mask[i, :n] = 1
    data = DataProto.from_dict({"attention_mask": mask}, meta_info={"mini_batch_rows": 4, "balance_batch": True})
    per_rank, _, order = dispatch_args(Dispatch.DP_COMPUTE_PROTO, 2, (data,), {}, "r.update")
    loads = [int(a[0].batch["attention_mask"].sum()) for a, _ in per_rank]
    assert loads == [22, 22]  # {10, 1} and {9, 2} in each mini-batch: 11 tokens per rank per mini-batch
    assert sorted(order) == list(range(8))
    # each rank's slice is [its part of mini-batch 0, its part of mini-batch 1]
    for rank in range(2):
        assert set(order[4 * rank : 4 * rank + 2]) <= {0, 1, 2, 3}
        assert set(order[4 * rank + 2 : 4 * rank + 4]) <= {4, 5, 6, 7}


def test_all_to_all_splits_per_rank_lists_else_broadcasts():
    per_rank, _, _ = dispatch_args(Dispatch.ALL_TO_ALL, 2, ([1, 2],), {"k": ["a", "b"]}, "r.m")
    assert per_rank == [((1,), {"k": "a"}), ((2,), {"k": "b"})]
    per_rank, _, _ = dispatch_args(Dispatch.ALL_TO_ALL, 2, ([1, 2], 5), {}, "r.m")  # not all lists: everyone
    assert per_rank == [(([1, 2], 5), {})] * 2
    with pytest.raises(ValueError, match="r.m: DP_COMPUTE needs every argument as a list of 2 items"):
        dispatch_args(Dispatch.DP_COMPUTE, 2, (5,), {}, "r.m")
    assert collect_results(Dispatch.ALL_TO_ALL, [rows(1), rows(1)])[1].batch["x"].tolist() == [[0]]  # a list


def test_register_records_verls_call_options_and_checks_custom_modes():
    from verl.single_controller.base.decorator import CallOptions, Execute, call_options

    class Worker:
        @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO, blocking=False)
        def infer(self, data):
            pass

        @register()
        def ping(self):
            pass

    assert registered_methods(Worker)["ping"] == (Dispatch.ALL_TO_ALL, False)  # verl's default mode
    assert call_options(Worker, "infer") == CallOptions(Execute.ALL, blocking=False, materialize_futures=True)
    with pytest.raises(ValueError, match="missing \\{'collect_fn'\\}"):
        register(dispatch_mode={"dispatch_fn": print})
    with pytest.raises(ValueError, match="dispatch mode 'broadcast'"):
        register(dispatch_mode="broadcast")


def test_a_dataproto_asking_for_auto_padding_is_padded():
    data = rows(5)
    if not hasattr(data, "is_padding_enabled"):
        pytest.skip("this DataProto has no auto padding (verl.protocol.DataProtoConfig)")
    from verl.protocol import DataProtoConfig

    data.meta_info[DataProtoConfig.auto_padding_key] = True
    per_rank, pad, order = dispatch_args(Dispatch.DP_COMPUTE_PROTO, 2, (data,), {}, "r.update")
    assert pad == 1 and [len(a[0]) for a, _ in per_rank] == [3, 3]
