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

import copy
import heapq
import math
from typing import Any

import torch

from verl.protocol import DataProto

__all__ = [
    "ceildiv",
    "get_group_balanced_partitions",
    "get_reverse_idx",
    "get_seqlen_balanced_partitions",
    "partition_by_token_budget",
    "prepare_dynamic_batch",
    "rearrange_micro_batches",
    "restore_dynamic_batch",
    "roundup_divisible",
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


def ceildiv(a: int, b: int) -> int:
    """ceil(a / b) for integers, without floats."""
    return -(a // -b)


def roundup_divisible(a: int, b: int) -> int:
    """The smallest multiple of ``b`` that is >= ``a``."""
    return ceildiv(a, b) * b


def _row_lengths(batch: Any) -> list[int]:
    """Real tokens per row: the attention mask's sums, or the row lengths of a nested (jagged) ``input_ids``."""
    input_ids = batch["input_ids"] if "input_ids" in batch.keys() else None
    if input_ids is not None and getattr(input_ids, "is_nested", False):
        return [int(x) for x in input_ids.offsets().diff().tolist()]
    return [int(x) for x in batch["attention_mask"].sum(-1).tolist()]


def _take_rows(data: Any, rows: list[int]) -> Any:
    """Rows ``rows`` of a DataProto, TensorDict or ``{key: tensor}`` dict, as the same kind of object."""
    index = torch.tensor(rows, dtype=torch.long)
    if isinstance(data, dict):
        return {k: v[index] for k, v in data.items()}
    return data[index]


def _sync_count(count: int, dp_group: Any) -> int:
    """The largest of every data-parallel rank's ``count`` (all ranks must run as many forward passes)."""
    import torch.distributed as dist

    backend = dist.get_backend(dp_group)
    device = "cuda" if backend == "nccl" else "cpu"
    t = torch.tensor([count], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=dp_group)
    return int(t.item())


def rearrange_micro_batches(
    batch: Any,
    max_token_len: int,
    dp_group: Any = None,
    num_batches_divided_by: int | None = None,
    same_micro_num_in_dp: bool = True,
    min_num_micro_batch: int | None = None,
    use_dynamic_bsz_balance: bool = True,
    *,
    min_micro_batches: int = 1,
    keep_prompts_together: bool = False,
) -> tuple[list[Any], list[list[int]]]:
    """``batch`` split into token-budget micro-batches, and each micro-batch's row indices into ``batch``.

    ``batch`` is a DataProto, or its ``batch`` (a TensorDict or ``{key: tensor}`` dict) as verl passes it; the
    micro-batches are the same kind. The count is at least ``min_num_micro_batch`` (or ``min_micro_batches``), a
    multiple of ``num_batches_divided_by`` when given, and, when ``torch.distributed`` is up and
    ``same_micro_num_in_dp``, the largest over ``dp_group``'s ranks (FSDP ranks must run as many passes).
    ``use_dynamic_bsz_balance`` is accepted for verl's signature: micro-batches stay in batch order (verl reorders
    them to shorten pipeline-parallel bubbles, which this package does not have), so runs are reproducible.

    ``keep_prompts_together`` (for ``use_shared_prefix``, DataProto only): the rows of one prompt go to the same
    micro-batch, so the prompt is computed once; a prompt's cost is then its prompt tokens once plus all its
    responses. Where that gives fewer micro-batches than asked for, rows are split as usual."""
    import torch.distributed as dist

    tensors = batch.batch if isinstance(batch, DataProto) else batch
    lengths = _row_lengths(tensors)
    at_least = max(min_micro_batches, min_num_micro_batch or 1)
    if num_batches_divided_by:
        at_least = roundup_divisible(at_least, num_batches_divided_by)
    groups = _micro_batch_groups(tensors, lengths, int(max_token_len), at_least, keep_prompts_together)
    want = len(groups)
    if dist.is_available() and dist.is_initialized() and same_micro_num_in_dp:
        want = _sync_count(want, dp_group)
    if num_batches_divided_by:
        want = roundup_divisible(want, num_batches_divided_by)
    if want > len(groups):
        groups = _micro_batch_groups(tensors, lengths, int(max_token_len), want, keep_prompts_together)
    return [_take_rows(batch, g) for g in groups], groups


def _micro_batch_groups(
    tensors: Any, lengths: list[int], max_token_len: int, at_least: int, keep_prompts_together: bool
) -> list[list[int]]:
    if keep_prompts_together and "responses" in tensors.keys():
        from verl.utils.shared_prefix import find_shared_prompts

        b = tensors
        prompt_width = b["input_ids"].shape[1] - b["responses"].shape[1]
        first, inverse = find_shared_prompts(b["input_ids"], b["attention_mask"], b["position_ids"], prompt_width)
        prompt_tokens = b["attention_mask"][:, :prompt_width].sum(-1).tolist()
        cost = [0] * first.shape[0]
        members: list[list[int]] = [[] for _ in range(first.shape[0])]
        for i, (u, n) in enumerate(zip(inverse.tolist(), lengths)):
            cost[u] += n - (prompt_tokens[i] if members[u] else 0)
            members[u].append(i)
        units = partition_by_token_budget(cost, max_token_len, at_least)
        if len(units) >= at_least:
            groups = [sorted(i for u in unit for i in members[u]) for unit in units]
            return sorted(groups, key=lambda g: g[0])
    return partition_by_token_budget(lengths, max_token_len, at_least)


def get_reverse_idx(groups: list[list[int]] | list[int]) -> torch.Tensor | list[int]:
    """``out[get_reverse_idx(groups)]`` restores batch order for ``out = cat(per-micro-batch outputs)``.

    ``groups`` is the micro-batches' row lists (returns a tensor), or, verl's form, those lists already flattened
    into one (returns a list, as verl does)."""
    flat_form = len(groups) > 0 and not isinstance(groups[0], (list, tuple))
    flat = [int(i) for i in groups] if flat_form else [i for g in groups for i in g]
    reverse = torch.empty(len(flat), dtype=torch.long)
    reverse[torch.tensor(flat, dtype=torch.long)] = torch.arange(len(flat))
    return reverse.tolist() if flat_form else reverse


def prepare_dynamic_batch(
    data: DataProto,
    max_token_len: int,
    dp_group: Any = None,
    num_batches_divided_by: int | None = None,
    same_micro_num_in_dp: bool = True,
    min_num_micro_batch: int | None = None,
    use_dynamic_bsz_balance: bool = True,
) -> tuple[list[DataProto], list[list[int]]]:
    """``data`` as token-budget micro-batches (DataProtos with their rows' non-tensor columns and a copy of
    ``meta_info`` each) and their row indices; `restore_dynamic_batch` puts per-row outputs back in order."""
    micro_batches, groups = rearrange_micro_batches(
        data,
        max_token_len,
        dp_group=dp_group,
        num_batches_divided_by=num_batches_divided_by,
        same_micro_num_in_dp=same_micro_num_in_dp,
        min_num_micro_batch=min_num_micro_batch,
        use_dynamic_bsz_balance=use_dynamic_bsz_balance,
    )
    for mb in micro_batches:
        mb.meta_info = copy.deepcopy(data.meta_info)
    return micro_batches, groups


def restore_dynamic_batch(data: torch.Tensor, batch_idx_list: list[list[int]]) -> torch.Tensor:
    """Per-row outputs of the micro-batches of `prepare_dynamic_batch`, concatenated in micro-batch order
    (bs, ...), back in the original batch order. A jagged nested tensor is reordered row by row."""
    order = get_reverse_idx([list(g) for g in batch_idx_list])
    if len(order) != data.shape[0]:
        raise ValueError(f"restore_dynamic_batch: {data.shape[0]} output rows for {len(order)} input rows")
    if getattr(data, "is_nested", False):
        rows = data.unbind()
        return torch.nested.as_nested_tensor([rows[i] for i in order.tolist()], layout=torch.jagged)
    return data[order]


def get_group_balanced_partitions(seqlen_list: list[int], uid_list: list, k_partitions: int) -> list[list[int]]:
    """Row indices in ``k_partitions`` equal-count groups of whole prompts (rows with the same uid stay together)
    whose token sums are close: `get_seqlen_balanced_partitions` over the prompts' total lengths."""
    if len(seqlen_list) != len(uid_list):
        raise ValueError(f"{len(seqlen_list)} sequence lengths but {len(uid_list)} uids")
    members: dict[Any, list[int]] = {}
    for i, uid in enumerate(uid_list):
        members.setdefault(uid, []).append(i)
    units = list(members.values())
    if len(units) < k_partitions:
        raise ValueError(
            f"{len(units)} prompts (uids) cannot fill {k_partitions} partitions: lower the number of workers or "
            "raise the batch size"
        )
    totals = [sum(seqlen_list[i] for i in unit) for unit in units]
    parts = get_seqlen_balanced_partitions(totals, k_partitions, equal_size=len(units) % k_partitions == 0)
    return [sorted(i for u in part for i in units[u]) for part in parts]


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
