"""Balancing rows by token count (verl's ``seqlen_balancing``).

- Data parallel: `get_seqlen_balanced_partitions` splits rows into equal-size groups of similar total length, so
  data-parallel workers finish their slices at the same time (``trainer.balance_batch``).
- Dynamic batch size (``use_dynamic_bsz``): `rearrange_micro_batches` splits a batch into micro-batches by a token
  budget instead of a row count.

Rows are counted by their real tokens (``attention_mask.sum(-1)``: prompt + response, no padding). For micro-batches
the rows are partitioned into the fewest groups ``k`` whose token sums all stay within ``max_token_len``, balanced
with the longest-processing-time rule (longest row first, into the lightest group), so the micro-batches cost about
the same. A row longer than the budget gets a micro-batch of its own. Each group keeps its rows in their original
order; ``get_reverse_idx`` puts per-row outputs back in the batch's order.

The loss scaling that keeps gradient accumulation exact over unequal micro-batches (and over workers) is
:func:`verl.trainer.ppo.core_algos.micro_batch_loss_weight`.
"""

from __future__ import annotations

import heapq
import math

import torch

from verl.protocol import DataProto

__all__ = [
    "get_reverse_idx",
    "get_seqlen_balanced_partitions",
    "partition_by_token_budget",
    "rearrange_micro_batches",
]


def partition_by_token_budget(lengths: list[int], max_token_len: int, min_groups: int = 1) -> list[list[int]]:
    """Indices of ``lengths`` grouped into the fewest balanced groups (at least ``min_groups``, at most one per row)
    whose sums are <= ``max_token_len``.

    Deterministic: ties are broken by index. Groups are returned ordered by their first index, each sorted.
    """
    if max_token_len <= 0:
        raise ValueError(f"max_token_len must be > 0, got {max_token_len}")
    n = len(lengths)
    if n == 0:
        return []
    order = sorted(range(n), key=lambda i: (-lengths[i], i))
    k = min(n, max(1, min_groups, math.ceil(sum(lengths) / max_token_len)))
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


def rearrange_micro_batches(
    data: DataProto, max_token_len: int, min_micro_batches: int = 1, keep_prompts_together: bool = False
) -> tuple[list[DataProto], list[list[int]]]:
    """``data`` split into token-budget micro-batches (at least ``min_micro_batches``: data-parallel ranks agree on
    one count), and each micro-batch's row indices into ``data``.

    ``keep_prompts_together`` (for ``use_shared_prefix``): the rows of one prompt go to the same micro-batch, so the
    prompt is computed once; a prompt's cost is then its prompt tokens once plus all its responses. Where that gives
    fewer than ``min_micro_batches`` micro-batches, rows are split as usual."""
    lengths = [int(x) for x in data.batch["attention_mask"].sum(-1).tolist()]
    if keep_prompts_together and "responses" in data.batch.keys():
        from verl.utils.shared_prefix import find_shared_prompts

        b = data.batch
        prompt_width = b["input_ids"].shape[1] - b["responses"].shape[1]
        first, inverse = find_shared_prompts(b["input_ids"], b["attention_mask"], b["position_ids"], prompt_width)
        prompt_tokens = b["attention_mask"][:, :prompt_width].sum(-1).tolist()
        cost = [0] * first.shape[0]
        members: list[list[int]] = [[] for _ in range(first.shape[0])]
        for i, (u, n) in enumerate(zip(inverse.tolist(), lengths)):
            cost[u] += n - (prompt_tokens[i] if members[u] else 0)
            members[u].append(i)
        units = partition_by_token_budget(cost, int(max_token_len), min_micro_batches)
        if len(units) >= min_micro_batches:
            groups = [sorted(i for u in unit for i in members[u]) for unit in units]
            groups.sort(key=lambda g: g[0])
            return [data[torch.tensor(g, dtype=torch.long)] for g in groups], groups
    groups = partition_by_token_budget(lengths, int(max_token_len), min_micro_batches)
    return [data[torch.tensor(g, dtype=torch.long)] for g in groups], groups


def get_reverse_idx(groups: list[list[int]]) -> torch.Tensor:
    """``out[get_reverse_idx(groups)]`` restores batch order for ``out = cat(per-micro-batch outputs)``."""
    flat = [i for g in groups for i in g]
    reverse = torch.empty(len(flat), dtype=torch.long)
    reverse[torch.tensor(flat, dtype=torch.long)] = torch.arange(len(flat))
    return reverse


def get_seqlen_balanced_partitions(seqlens: list[int], k_partitions: int, equal_size: bool) -> list[list[int]]:
    """Row indices in ``k_partitions`` groups whose length sums are close (longest-processing-time greedy: the
    longest remaining row goes to the lightest group). ``equal_size``: every group gets ``len(seqlens) / k`` rows
    (needs divisibility). Each group's indices are sorted, so rows keep their relative order."""
    n = len(seqlens)
    if k_partitions < 1:
        raise ValueError(f"k_partitions must be >= 1, got {k_partitions}")
    if equal_size and n % k_partitions:
        raise ValueError(f"{n} rows do not split into {k_partitions} equal-size partitions")
    cap = n // k_partitions if equal_size else n
    parts: list[list[int]] = [[] for _ in range(k_partitions)]
    heap = [(0, p) for p in range(k_partitions)]  # (load, partition)
    order = sorted(range(n), key=lambda i: (-seqlens[i], i))
    for i in order:
        load, p = heapq.heappop(heap)
        while len(parts[p]) >= cap:  # full partitions leave the heap
            load, p = heapq.heappop(heap)
        parts[p].append(i)
        heapq.heappush(heap, (load + seqlens[i], p))
    return [sorted(part) for part in parts]
