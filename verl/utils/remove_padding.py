"""Padding-free (packed) forward passes: ``actor_rollout_ref.model.use_remove_padding``.

A micro-batch of left-padded prompts + right-padded responses carries padding on both sides. Here every row's real
tokens (``attention_mask == 1``: the prompt and the response up to and including EOS) are cut out and packed
first-fit-decreasing into a few rows of width ``C`` = the longest sequence, several sequences per row. Each sequence's
``position_ids`` restart at 0; the attention mask is left as None, so transformers (>= 4.5x; checked with 5.24)
detects the packed format from the position ids and gives sdpa/eager a block-diagonal causal mask per row
(``masking_utils.find_packed_sequence_indices``): no token attends across sequences. Rows are kept narrow (``C``,
not one long row) because sdpa on CPU has no varlen kernel: its cost is quadratic in the row width.

Only the logits that predict response tokens are gathered, so the log-prob and entropy are computed for real
response tokens only; padded response positions get 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def check_packing_support() -> None:
    """Packed rows rely on transformers telling sequences apart by their restarting ``position_ids`` (with
    ``attention_mask=None``); without it every token would attend across sequences. Raise when it is missing."""
    try:
        from transformers.masking_utils import find_packed_sequence_indices  # noqa: F401
    except ImportError as e:
        import transformers

        raise RuntimeError(
            f"actor_rollout_ref.model.use_remove_padding=true needs transformers' packed-sequence masks "
            f"(masking_utils.find_packed_sequence_indices, in 5.x), missing in transformers {transformers.__version__}. Upgrade it or set use_remove_padding=false."
        ) from e


@dataclass
class PackedBatch:
    input_ids: torch.Tensor  # (num_rows, width)
    position_ids: torch.Tensor  # (num_rows, width)
    logit_index: torch.Tensor  # (num_response_tokens,) flat index into (num_rows * width) of each predicting position
    rows: torch.Tensor  # (num_response_tokens,) row in the original micro-batch
    cols: torch.Tensor  # (num_response_tokens,) column in the original (bs, response_length) response
    labels: torch.Tensor  # (num_response_tokens,) the response token
    num_tokens: int  # real tokens packed


def pack_sequences(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, response_length: int, pad_token_id: int = 0
) -> PackedBatch:
    """Pack the real tokens of ``input_ids`` (bs, P + R) whose last ``response_length`` columns are the response."""
    bs, total = input_ids.shape
    prompt_width = total - response_length
    mask = attention_mask.bool()
    prompt_lens = mask[:, :prompt_width].sum(-1).tolist()
    resp_lens = mask[:, prompt_width:].sum(-1).tolist()
    lengths = [p + r for p, r in zip(prompt_lens, resp_lens)]
    if any(p < 1 for p, r in zip(prompt_lens, resp_lens) if r > 0):
        raise ValueError("use_remove_padding: a row with response tokens has an empty prompt (nothing predicts them)")
    width = max(max(lengths), 1)
    # first-fit decreasing into rows of `width`
    bins: list[int] = []  # used length per packed row
    place: list[tuple[int, int]] = [(0, 0)] * bs  # (packed row, offset) per sequence
    for i in sorted(range(bs), key=lambda i: (-lengths[i], i)):
        for b, used in enumerate(bins):
            if used + lengths[i] <= width:
                place[i] = (b, used)
                bins[b] = used + lengths[i]
                break
        else:
            place[i] = (len(bins), 0)
            bins.append(lengths[i])
    num_rows = max(len(bins), 1)
    packed_ids = torch.full((num_rows, width), pad_token_id, dtype=input_ids.dtype)
    # filler after the last sequence of a row counts 0, 1, 2, ...: a segment of its own that no real token sees
    packed_pos = torch.arange(width).repeat(num_rows, 1)
    rows, cols, index = [], [], []
    for i in range(bs):
        b, off = place[i]
        n = lengths[i]
        if n == 0:
            continue
        packed_ids[b, off : off + n] = input_ids[i][mask[i]]
        packed_pos[b, off : off + n] = torch.arange(n)
        r = resp_lens[i]
        if r:
            rows.append(torch.full((r,), i, dtype=torch.long))
            cols.append(torch.arange(r))
            index.append(b * width + off + prompt_lens[i] - 1 + torch.arange(r))
    for b, used in enumerate(bins):
        if used < width:
            packed_pos[b, used:] = torch.arange(width - used)
    empty = torch.zeros(0, dtype=torch.long)
    rows_t = torch.cat(rows) if rows else empty
    cols_t = torch.cat(cols) if cols else empty
    responses = input_ids[:, prompt_width:]
    return PackedBatch(
        input_ids=packed_ids.to(input_ids.device),
        position_ids=packed_pos.to(input_ids.device),
        logit_index=(torch.cat(index) if index else empty).to(input_ids.device),
        rows=rows_t.to(input_ids.device),
        cols=cols_t.to(input_ids.device),
        labels=responses[rows_t.to(input_ids.device), cols_t.to(input_ids.device)],
        num_tokens=sum(lengths),
    )


def packed_response_logits(module, packed: PackedBatch, temperature: float) -> torch.Tensor:
    """Logits (num_response_tokens, V) predicting each real response token, from one packed forward pass."""
    out = module(input_ids=packed.input_ids, position_ids=packed.position_ids, attention_mask=None, use_cache=False)
    logits = out.logits.reshape(-1, out.logits.shape[-1]).index_select(0, packed.logit_index).float()
    return logits / temperature if temperature != 1.0 else logits


def unpack_to_response(values: torch.Tensor, packed: PackedBatch, bs: int, response_length: int) -> torch.Tensor:
    """Per-token ``values`` (num_response_tokens,) back to (bs, response_length), 0 at padded positions."""
    out = values.new_zeros((bs, response_length))
    return out.index_put((packed.rows, packed.cols), values)
