"""Keyed uniforms: a per-row seed tensor draws what the one-int seed draws for each row."""

from __future__ import annotations

import torch

from verl.workers.rollout.sampling import keyed_uniform


def test_per_row_seeds_equal_the_int_seed_of_each_row():
    keys = torch.tensor([0, 1, 7, (1 << 62) | 5], dtype=torch.int64)
    seeds = torch.tensor([3, 3, 2**40 + 9, 0], dtype=torch.int64)
    rows = keyed_uniform(seeds, 4, keys, 11)
    for i in range(len(keys)):
        assert rows[i] == keyed_uniform(int(seeds[i]), 4, keys[i : i + 1], 11)[0]
    assert ((rows >= 0) & (rows < 1)).all()
