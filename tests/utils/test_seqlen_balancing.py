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
