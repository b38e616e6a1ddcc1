"""Shared-prompt forward passes for training: ``actor_rollout_ref.model.use_shared_prefix``.

GRPO-style training samples ``n`` responses per prompt, so a micro-batch holds every prompt ``n`` times. A causal LM's
hidden states at the prompt positions do not depend on what follows, so the plain forward computes the same prompt
``n`` times, and its backward sums ``n`` gradients through ``n`` identical copies. Here each distinct prompt is run
once, with its KV cache kept in the autograd graph:

1. prefill: the U distinct prompt rows (left-padded, as in the batch) in one forward pass with ``use_cache=True``;
   the logits at the last prompt position predict every sample's first response token;
2. responses: each row's response tokens (all but the last, which predicts nothing) in a forward pass whose KV cache
   is its prompt's keys/values, gathered per row (``keys.index_select(0, inverse)``). The rows run in a few
   chunks of similar response length, each trimmed to its longest response, so little padding is computed.

Autograd accumulates the ``n`` rows' gradients through the gather into the one prompt computation, so the gradient is
the plain path's up to float summation order. The gathers are ``index_select``: its backward adds the rows' gradients
in index order, whereas advanced indexing (``keys[inverse]``) accumulates repeated indices with atomic adds over the
intra-op threads, in an order that varies from run to run (with 2 threads ~all of 400 repeats of a shuffled gather
differed in the last bits; ``tests/utils/test_shared_prefix.py``). Prompt positions are ~1/3 of the tokens of the default workload
(35 prompt + ~60 response tokens, n = 8): the prompt part of the reference forward and of the policy forward and
backward shrinks n-fold (``benchmarks/RESULTS.md``, section 2).

The returned logits cover real response tokens only, in a flat (num_response_tokens, V) layout with their row and
column, like the packed path (`verl.utils.remove_padding`); padded positions get log-prob 0.

Falls back (returns None) where nothing is shared (every prompt distinct) or where the model's cache is not a plain
per-layer key/value cache (sliding-window, linear-attention or quantized layers), and in training mode with gradient
checkpointing, where transformers turns the cache off.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from verl.utils.forward import forward_signature, output_cache
from verl.utils.fsdp_utils import all_reduce_max, dp_size

__all__ = ["SharedPrefixBatch", "find_shared_prompts", "plan_length_chunks", "shared_prefix_response_logits"]


@dataclass
class SharedPrefixBatch:
    rows: torch.Tensor  # (T,) row in the micro-batch of each real response token
    cols: torch.Tensor  # (T,) its column in the (bs, R) response
    labels: torch.Tensor  # (T,) the response token
    num_prompts: int  # distinct prompts computed


def find_shared_prompts(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor, prompt_width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``first`` (U,): one row index per distinct prompt (its first occurrence, in order of first occurrence), and
    ``inverse`` (bs,): each row's position in ``first``. Prompts are equal when their ids, mask and positions are."""
    p = prompt_width
    keys = torch.cat([input_ids[:, :p], attention_mask[:, :p].to(input_ids.dtype), position_ids[:, :p]], dim=1)
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    bs = input_ids.shape[0]
    first = torch.full((int(inverse.max()) + 1 if bs else 0,), bs, dtype=torch.long, device=input_ids.device)
    first.scatter_reduce_(0, inverse, torch.arange(bs, device=input_ids.device), reduce="amin")
    # renumber in order of first occurrence, so the plan does not depend on torch.unique's sort order
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.shape[0], device=order.device)
    return first[order], rank[inverse]


def plan_length_chunks(lengths: list[int], max_chunks: int, exact: bool = False) -> list[list[int]]:
    """Rows (indices into ``lengths``) split into at most ``max_chunks`` chunks of consecutive sorted lengths that
    minimise the padded work ``sum(len(chunk) * max length in chunk)`` (exact dynamic programme, O(k n^2)); with
    ``exact``, into exactly ``max_chunks`` where there are that many rows. Rows of length 0 are left out."""
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: (lengths[i], i))
    m = len(order)
    if m == 0:
        return []
    k = max(1, min(int(max_chunks), m))
    sorted_len = [lengths[i] for i in order]
    inf = float("inf")
    # cost[j][c]: best padded work for the first j sorted rows in c chunks; the chunk ending at j-1 costs
    # (j - s) * sorted_len[j - 1]
    cost = [[inf] * (k + 1) for _ in range(m + 1)]
    cut = [[0] * (k + 1) for _ in range(m + 1)]
    cost[0][0] = 0.0
    for c in range(1, k + 1):
        for j in range(1, m + 1):
            width = sorted_len[j - 1]
            for s in range(c - 1, j):
                value = cost[s][c - 1] + (j - s) * width
                if value < cost[j][c]:
                    cost[j][c], cut[j][c] = value, s
    best_c = k if exact else min(range(1, k + 1), key=lambda c: (cost[m][c], c))
    chunks, j = [], m
    for c in range(best_c, 0, -1):
        s = cut[j][c]
        chunks.append(order[s:j])
        j = s
    return chunks[::-1]


def _checkpointing(module: torch.nn.Module) -> bool:
    """Whether activation checkpointing is on (transformers then runs training forwards without a cache)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(module), name) or name in vars(module):
            return bool(getattr(module, name))
    return False


def _plain_layer_cache(cache) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """Per-layer (keys, values) of a cache made only of plain ``DynamicLayer`` layers, else None."""
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer
    except ImportError:
        return None
    if type(cache) is not DynamicCache or not getattr(cache, "layers", None):
        return None
    if not all(type(layer) is DynamicLayer and layer.is_initialized for layer in cache.layers):
        return None
    return [(layer.keys, layer.values) for layer in cache.layers]


def shared_prefix_response_logits(
    module: torch.nn.Module,
    micro: dict[str, torch.Tensor],
    response_length: int,
    temperature: float,
    max_chunks: int = 4,
) -> tuple[torch.Tensor, SharedPrefixBatch] | None:
    """Logits (T, V) predicting each real response token of ``micro`` (keys ``input_ids``, ``attention_mask``,
    ``position_ids`` of width P + R, the last ``response_length`` columns the right-padded response), computing each
    distinct prompt once; or None where the plain or packed path must run instead (see the module docstring)."""
    ids, mask, pos = micro["input_ids"], micro["attention_mask"], micro["position_ids"]
    bs, total = ids.shape
    p = total - response_length
    # FSDP gathers the parameters at every forward call, so data-parallel ranks must make the same calls: they
    # agree on whether to share (all or none) and on the number of response chunks (the largest; fewer rows than
    # that pad with a one-token pass whose output enters the graph with no rows)
    distributed = dp_size() > 1
    shareable = bs >= 2 and p >= 1 and not (module.training and _checkpointing(module))
    if shareable:
        first, inverse = find_shared_prompts(ids, mask, pos, p)
        # something repeats, and every prompt ends at the last prompt column (the left-padded layout)
        shareable = first.shape[0] < bs and not bool((mask[:, p - 1] == 0).any())
    if distributed:
        shareable = all_reduce_max(0 if shareable else 1) == 0
    if not shareable:
        return None
    resp_lens = mask[:, p:].sum(-1)
    chunk_lens = (resp_lens - 1).clamp(min=0).tolist()
    chunks = plan_length_chunks(chunk_lens, max_chunks)
    if distributed:
        count = all_reduce_max(len(chunks))
        chunks = plan_length_chunks(chunk_lens, count, exact=True)
        chunks += [[]] * (count - len(chunks))

    cache_kwarg, takes_keep = forward_signature(module)
    out = module(
        input_ids=ids[first, :p],
        attention_mask=mask[first, :p],
        position_ids=pos[first, :p],
        use_cache=True,
        **({"logits_to_keep": 1} if takes_keep else {}),
    )
    prompt_kv = _plain_layer_cache(output_cache(out))
    if prompt_kv is None:
        return None
    from transformers.cache_utils import DynamicCache

    first_logits = out.logits[:, -1, :]  # (U, V): predicts response token 0 of each of the prompt's rows
    pieces = [first_logits.index_select(0, inverse[resp_lens > 0])]  # a fixed-order backward (module docstring)
    rows = [torch.nonzero(resp_lens > 0).squeeze(1)]
    cols = [torch.zeros_like(rows[0])]
    # response token j >= 1 is predicted at response position j - 1: forward tokens [0, len - 1)
    for chunk in chunks:
        idx = torch.tensor(chunk or [0], dtype=torch.long, device=ids.device)
        width = max(int(resp_lens[idx].max()) - 1, 1)
        gather = inverse[idx]
        chunk_kv = [(k.index_select(0, gather), v.index_select(0, gather)) for k, v in prompt_kv]
        chunk_cache = DynamicCache(ddp_cache_data=chunk_kv)
        chunk_out = module(
            input_ids=ids[idx, p : p + width],
            attention_mask=mask[idx, : p + width],
            position_ids=pos[idx, p : p + width],
            use_cache=True,
            **{cache_kwarg: chunk_cache},
        )
        valid = torch.arange(width, device=ids.device).unsqueeze(0) < (resp_lens[idx] - 1).unsqueeze(1)
        if not chunk:  # a padding pass (see above): selects nothing, but stays in the autograd graph
            valid = torch.zeros_like(valid)
        pieces.append(chunk_out.logits[valid])
        r, c = torch.nonzero(valid, as_tuple=True)
        rows.append(idx[r])
        cols.append(c + 1)
    logits = torch.cat(pieces).float()
    if temperature != 1.0:
        logits = logits / temperature
    rows_t, cols_t = torch.cat(rows), torch.cat(cols)
    labels = ids[:, p:][rows_t, cols_t]
    return logits, SharedPrefixBatch(rows=rows_t, cols=cols_t, labels=labels, num_prompts=int(first.shape[0]))
