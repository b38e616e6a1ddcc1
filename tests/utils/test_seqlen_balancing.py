import random

import pytest

from verl.utils.seqlen_balancing import get_seqlen_balanced_partitions


def test_equal_size_partitions_cover_every_row_once_and_balance_tokens():
    rng = random.Random(0)
    lens = [rng.randint(5, 100) for _ in range(64)]
    parts = get_seqlen_balanced_partitions(lens, 4, equal_size=True)
    assert sorted(i for p in parts for i in p) == list(range(64))
    assert all(len(p) == 16 for p in parts)
    loads = [sum(lens[i] for i in p) for p in parts]
    contiguous = [sum(lens[i * 16 : (i + 1) * 16]) for i in range(4)]
    assert max(loads) - min(loads) <= max(lens)  # greedy LPT bound with equal counts
    assert max(loads) - min(loads) < max(contiguous) - min(contiguous)


def test_hand_example_and_errors():
    # lengths 9, 1, 8, 2 -> {9, 1} and {8, 2}: 10 tokens each
    assert get_seqlen_balanced_partitions([9, 1, 8, 2], 2, equal_size=True) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="do not split into 2 equal-size"):
        get_seqlen_balanced_partitions([1, 2, 3], 2, equal_size=True)


def _batch(n=12, width=20, seed=0):
    import torch

    from verl.utils.model import create_random_mask

    torch.manual_seed(seed)
    ids = torch.randint(0, 50, (n, width))
    return {"input_ids": ids, "attention_mask": create_random_mask(ids, 0.9, 0.1, 0.3)}


def test_rearrange_accepts_verls_tensordict_and_a_plain_dict():
    import torch
    from tensordict import TensorDict

    from verl.utils.seqlen_balancing import get_reverse_idx, rearrange_micro_batches

    tensors = _batch()
    td = TensorDict(tensors, batch_size=[12])
    micros, groups = rearrange_micro_batches(td, max_token_len=40)
    assert all(isinstance(m, TensorDict) for m in micros)
    assert all(m["attention_mask"].sum() <= 40 or len(m) == 1 for m in micros)  # the budget holds
    flat = [i for g in groups for i in g]
    torch.testing.assert_close(torch.cat(micros)[get_reverse_idx(flat)], td)  # verl's flat form: a list back
    dict_micros, dict_groups = rearrange_micro_batches(dict(tensors), max_token_len=40, num_batches_divided_by=4)
    assert len(dict_micros) % 4 == 0 and isinstance(dict_micros[0], dict)
    assert sorted(i for g in dict_groups for i in g) == list(range(12))
    more, _ = rearrange_micro_batches(td, max_token_len=40, min_num_micro_batch=len(micros) + 2)
    assert len(more) == len(micros) + 2


def test_prepare_and_restore_dynamic_batch_round_trip():
    import numpy as np
    import torch

    from verl.protocol import DataProto
    from verl.utils.seqlen_balancing import prepare_dynamic_batch, restore_dynamic_batch

    data = DataProto.from_dict(_batch(), non_tensors={"uid": np.array([str(i) for i in range(12)], dtype=object)})
    data.meta_info["temperature"] = 0.7
    micros, groups = prepare_dynamic_batch(data, max_token_len=40)
    assert all(m.meta_info == {"temperature": 0.7} and m.meta_info is not data.meta_info for m in micros)
    assert [m.non_tensor_batch["uid"].tolist() for m in micros] == [[str(i) for i in g] for g in groups]
    per_row = torch.cat([m.batch["input_ids"][:, :1] for m in micros])
    assert torch.equal(restore_dynamic_batch(per_row, groups), data.batch["input_ids"][:, :1])


def test_group_balanced_partitions_keep_prompts_whole():
    from verl.utils.seqlen_balancing import ceildiv, get_group_balanced_partitions

    lens = [10, 10, 50, 50, 20, 20, 40, 40]
    uids = ["a", "a", "b", "b", "c", "c", "d", "d"]
    parts = get_group_balanced_partitions(lens, uids, 2)
    assert sorted(i for p in parts for i in p) == list(range(8))
    assert [sum(lens[i] for i in p) for p in parts] == [120, 120]  # prompts b + a against d + c
    assert all(len({uids[i] for i in p} & {uids[i] for i in q}) == 0 for p in parts for q in parts if p is not q)
    with pytest.raises(ValueError, match="4 prompts \\(uids\\) cannot fill 5 partitions"):
        get_group_balanced_partitions(lens, uids, 5)
    assert (ceildiv(7, 3), ceildiv(6, 3)) == (3, 2)
