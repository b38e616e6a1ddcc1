"""Loss aggregation: how a per-token loss becomes the scalar that is back-propagated, and how micro-batches and
data-parallel ranks are weighted so that the gradient equals the whole mini-batch's.

Two ways to get the mini-batch's gradient from micro-batches spread over data-parallel ranks, both exact:

* local aggregation times a weight (our workers): ``agg_loss(micro)`` with its own normaliser, times
  ``micro_batch_loss_weight`` (the micro-batch's share of the mini-batch's normaliser, times dp);
* global normalisers (verl's engine workers): ``agg_loss(micro, dp_size=, batch_num_tokens=, global_batch_size=)``
  divides by the mini-batch's token / sequence count over all ranks directly.

Shapes: ``loss_mat`` / ``loss_mask`` (bs, response_length), aligned with ``response_mask``.
"""

from __future__ import annotations

import torch

from .functional import masked_mean, masked_sum

__all__ = ["LOSS_AGG_MODES", "agg_loss", "loss_normalizer_counts", "micro_batch_loss_weight"]

LOSS_AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def _check_mode(loss_agg_mode: str) -> None:
    if loss_agg_mode not in LOSS_AGG_MODES:
        raise ValueError(f"Invalid loss_agg_mode {loss_agg_mode!r}; choose one of {LOSS_AGG_MODES}")


def _needs_global(name: str, value, dp_size: int, loss_agg_mode: str) -> None:
    if value is None and dp_size > 1:
        raise ValueError(
            f"agg_loss({loss_agg_mode!r}) with dp_size={dp_size} needs {name}: the count over all data-parallel "
            f"ranks (each rank only sees its own part). Pass it, or aggregate locally with dp_size=1 and weight by "
            "micro_batch_loss_weight"
        )


def agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str,
    dp_size: int = 1,
    batch_num_tokens: int | float | torch.Tensor | None = None,
    global_batch_size: int | float | torch.Tensor | None = None,
    loss_scale_factor: int | float | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss to a scalar. With m the mask, L = response_length, S = the sequences holding a
    token (rows without one are left out of every sequence mean) and |S| their number:

        "token-mean":               sum_{i,t} m l / sum_{i,t} m              (every token weighs the same; DAPO)
        "token-sum":                sum_{i,t} m l                            (no normaliser)
        "seq-mean-token-sum":       (1/|S|) sum_{i in S} sum_t m l
        "seq-mean-token-mean":      (1/|S|) sum_{i in S} (sum_t m l / sum_t m)   (every sequence weighs the same;
                                                                              the GRPO paper)
        "seq-mean-token-sum-norm":  (1/|S|) sum_{i in S} sum_t m l / L       (Dr. GRPO, Liu et al. 2025,
                                                                              "Understanding R1-Zero-Like Training":
                                                                              a constant per-token weight 1/(G L))

    Global normalisation (verl's arguments, for a micro-batch that is part of a larger batch on ``dp_size`` ranks
    whose gradients are averaged): ``batch_num_tokens`` replaces sum_{i,t} m and ``global_batch_size`` replaces |S|
    by the whole batch's counts, and the result is multiplied by ``dp_size`` to undo the average, so summing the
    micro-batches' gradients gives the whole batch's. ``token-sum`` is multiplied by ``dp_size`` too. Both counts
    are required when ``dp_size > 1``. ``loss_scale_factor`` replaces L in "seq-mean-token-sum-norm" (a constant
    keeps the weight fixed when the padded length varies between batches).

    Entries outside the mask never reach the result, even NaN or inf ones (``masked_sum``).

    Shapes: loss_mat, loss_mask (bs, response_length) -> scalar.
    """
    _check_mode(loss_agg_mode)
    if loss_agg_mode == "token-mean":
        _needs_global("batch_num_tokens", batch_num_tokens, dp_size, loss_agg_mode)
        if batch_num_tokens is None:
            return masked_mean(loss_mat, loss_mask)
        return masked_sum(loss_mat, loss_mask) / batch_num_tokens * dp_size
    if loss_agg_mode == "token-sum":
        return masked_sum(loss_mat, loss_mask) * dp_size

    seq_sum = masked_sum(loss_mat, loss_mask, dim=-1)
    n_tokens = loss_mask.to(loss_mat.dtype).sum(dim=-1)
    has_tokens = n_tokens > 0
    per_seq = seq_sum / n_tokens.clamp(min=1) if loss_agg_mode == "seq-mean-token-mean" else seq_sum
    _needs_global("global_batch_size", global_batch_size, dp_size, loss_agg_mode)
    if global_batch_size is None:
        loss = masked_mean(per_seq, has_tokens)
    else:
        loss = masked_sum(per_seq, has_tokens) / global_batch_size * dp_size
    if loss_agg_mode == "seq-mean-token-sum-norm":
        loss = loss / (loss_mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)
    return loss


def loss_normalizer_counts(loss_mask: torch.Tensor) -> torch.Tensor:
    """``[tokens, sequences holding a token, rows]`` of a mini-batch's ``loss_mask`` (bs, L), float64 (3,): the
    denominators of `agg_loss`, summed over data-parallel ranks by the worker before `micro_batch_loss_weight`."""
    tokens = loss_mask.to(torch.float64).sum(-1)
    rows = torch.tensor(float(len(loss_mask)), dtype=torch.float64, device=loss_mask.device)
    return torch.stack([tokens.sum(), (tokens > 0).sum().to(torch.float64), rows])


# which entry of loss_normalizer_counts each mode divides by (None: no data-dependent normaliser)
_NORMALIZER_SLOT = {
    "token-mean": 0,
    "token-sum": None,
    "seq-mean-token-sum": 1,
    "seq-mean-token-mean": 1,
    "seq-mean-token-sum-norm": 1,
}


def micro_batch_loss_weight(
    micro_mask: torch.Tensor, mini_counts: torch.Tensor, loss_agg_mode: str, dp_size: int = 1
) -> float:
    """Weight w of one micro-batch's (locally) aggregated loss so that sum over micro-batches and the data-parallel
    gradient average give the loss `agg_loss` would compute on the whole mini-batch at once:

        token-mean:                          w = dp * tokens(micro) / tokens(mini)
        seq-mean-token-sum / -mean / -norm:  w = dp * seqs(micro) / seqs(mini)      (sequences holding a token)
        token-sum:                           w = dp                                 (a sum needs no normaliser)

    ``mini_counts`` is `loss_normalizer_counts` of the whole mini-batch over all ranks; ``dp * (...)`` undoes the
    average FSDP takes over ranks. So micro-batch size and worker count never change the gradient.
    """
    _check_mode(loss_agg_mode)
    slot = _NORMALIZER_SLOT[loss_agg_mode]
    if slot is None:
        return float(dp_size)
    own = loss_normalizer_counts(micro_mask)
    return float(dp_size * own[slot].item() / max(mini_counts[slot].item(), 1.0))
