"""Dynamic batch size: split a batch into micro-batches by a token budget instead of a row count (``use_dynamic_bsz``).

Rows are counted by their real tokens (``attention_mask.sum(-1)``: prompt + response, no padding). The rows are
partitioned into the fewest micro-batches ``k`` whose token sums all stay within ``max_token_len``, balanced with
the longest-processing-time rule (longest row first, into the lightest micro-batch), so the micro-batches cost about
the same. A row longer than the budget gets a micro-batch of its own. Each micro-batch keeps its rows in their
original order; ``get_reverse_idx`` puts per-row outputs back in the batch's order.

The loss scaling that keeps gradient accumulation exact over unequal micro-batches is
:func:`verl.trainer.ppo.core_algos.agg_loss_weight`.
"""

from __future__ import annotations

import heapq
import math

import torch

from verl.protocol import DataProto

__all__ = ["get_reverse_idx", "partition_by_token_budget", "rearrange_micro_batches"]


def partition_by_token_budget(lengths: list[int], max_token_len: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped into the fewest balanced groups whose sums are <= ``max_token_len``.

    Deterministic: ties are broken by index. Groups are returned ordered by their first index, each sorted.
    """
    if max_token_len <= 0:
        raise ValueError(f"max_token_len must be > 0, got {max_token_len}")
    n = len(lengths)
    if n == 0:
        return []
    order = sorted(range(n), key=lambda i: (-lengths[i], i))
    k = max(1, math.ceil(sum(lengths) / max_token_len))
    while True:
        heap = [(0, b) for b in range(k)]  # (load, bin)
        bins: list[list[int]] = [[] for _ in range(k)]
        for i in order:
            load, b = heapq.heappop(heap)
            bins[b].append(i)
            heapq.heappush(heap, (load + lengths[i], b))
        overfull = any(sum(lengths[i] for i in b) > max_token_len and len(b) > 1 for b in bins)
        if not overfull or k >= n:
            break
        k += 1
    groups = [sorted(b) for b in bins if b]
    return sorted(groups, key=lambda g: g[0])


def rearrange_micro_batches(data: DataProto, max_token_len: int) -> tuple[list[DataProto], list[list[int]]]:
    """``data`` split into token-budget micro-batches, and each micro-batch's row indices into ``data``."""
    lengths = data.batch["attention_mask"].sum(-1).tolist()
    groups = partition_by_token_budget([int(x) for x in lengths], int(max_token_len))
    return [data[torch.tensor(g, dtype=torch.long)] for g in groups], groups


def get_reverse_idx(groups: list[list[int]]) -> torch.Tensor:
    """``out[get_reverse_idx(groups)]`` restores batch order for ``out = cat(per-micro-batch outputs)``."""
    flat = [i for g in groups for i in g]
    reverse = torch.empty(len(flat), dtype=torch.long)
    reverse[torch.tensor(flat, dtype=torch.long)] = torch.arange(len(flat))
    return reverse
