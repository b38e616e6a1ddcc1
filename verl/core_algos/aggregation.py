"""Loss aggregation: how a per-token loss becomes the scalar that is back-propagated, and how micro-batches and
data-parallel ranks are weighted so that the gradient equals the whole mini-batch's.

Shapes: ``loss_mat`` / ``loss_mask`` (bs, response_length), aligned with ``response_mask``.
"""

from __future__ import annotations

import torch

from .functional import masked_mean, masked_sum

__all__ = ["LOSS_AGG_MODES", "agg_loss", "loss_normalizer_counts", "micro_batch_loss_weight"]

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


def agg_loss(loss_mat: torch.Tensor, loss_mask: torch.Tensor, loss_agg_mode: str) -> torch.Tensor:
    """Reduce a per-token loss to a scalar. With m the mask, L = response_length, S = sequences holding a token:

        "token-mean":               sum_{i,t} m l / sum_{i,t} m              (every token weighs the same)
        "seq-mean-token-sum":       mean_{i in S} sum_t m l                  (Dr. GRPO-style sums per sequence)
        "seq-mean-token-mean":      mean_{i in S} (sum_t m l / sum_t m)      (every sequence weighs the same)
        "seq-mean-token-sum-norm":  sum_{i,t} m l / L                        (constant normaliser, as verl)

    Sequences without a single response token (e.g. padding rows) are left out of the seq-means.

    Shapes: loss_mat, loss_mask (bs, response_length) -> scalar.
    """
    if loss_agg_mode == "token-mean":
        return masked_mean(loss_mat, loss_mask)
    seq_sum = masked_sum(loss_mat, loss_mask, dim=-1)
    if loss_agg_mode == "seq-mean-token-sum-norm":
        return seq_sum.sum() / loss_mask.shape[-1]
    n_tokens = loss_mask.to(loss_mat.dtype).sum(dim=-1)
    has_tokens = n_tokens > 0
    if loss_agg_mode == "seq-mean-token-sum":
        return masked_mean(seq_sum, has_tokens)
    if loss_agg_mode == "seq-mean-token-mean":
        return masked_mean(seq_sum / n_tokens.clamp(min=1), has_tokens)
    raise ValueError(f"Invalid loss_agg_mode {loss_agg_mode!r}; choose one of {LOSS_AGG_MODES}")


def loss_normalizer_counts(loss_mask: torch.Tensor) -> torch.Tensor:
    """``[tokens, sequences holding a token, rows]`` of a mini-batch's ``loss_mask`` (bs, L), float64 (3,): the
    denominators of `agg_loss`, summed over data-parallel ranks by the worker before `micro_batch_loss_weight`."""
    tokens = loss_mask.to(torch.float64).sum(-1)
    rows = torch.tensor(float(len(loss_mask)), dtype=torch.float64, device=loss_mask.device)
    return torch.stack([tokens.sum(), (tokens > 0).sum().to(torch.float64), rows])


def micro_batch_loss_weight(
    micro_mask: torch.Tensor, mini_counts: torch.Tensor, loss_agg_mode: str, dp_size: int = 1
) -> float:
    """Weight w of one micro-batch's aggregated loss so that sum over micro-batches and the data-parallel gradient
    average give the loss `agg_loss` would compute on the whole mini-batch at once:

        token-mean:                  w = dp * tokens(micro) / tokens(mini)
        seq-mean-token-sum / -mean:  w = dp * seqs(micro) / seqs(mini)      (sequences holding a token)
        seq-mean-token-sum-norm:     w = dp                                 (its normaliser L is a constant)

    ``mini_counts`` is `loss_normalizer_counts` of the whole mini-batch over all ranks; ``dp * (...)`` undoes the
    average FSDP takes over ranks. So micro-batch size and worker count never change the gradient.
    """
    slot = {"token-mean": 0, "seq-mean-token-sum": 1, "seq-mean-token-mean": 1, "seq-mean-token-sum-norm": None}
    if loss_agg_mode not in slot:
        raise ValueError(f"Invalid loss_agg_mode {loss_agg_mode!r}; choose one of {LOSS_AGG_MODES}")
    i = slot[loss_agg_mode]
    if i is None:
        return float(dp_size)
    own = loss_normalizer_counts(micro_mask)
    return float(dp_size * own[i].item() / max(mini_counts[i].item(), 1.0))
