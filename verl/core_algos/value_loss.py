"""Value (critic) loss, entropy loss, and DAPO's soft overlong penalty on the score.

Shapes: ``(bs, response_length)`` tensors aligned with ``response_mask``; ``logits`` (bs, response_length, vocab).
"""

from __future__ import annotations

import torch

from .aggregation import agg_loss
from .functional import entropy_from_logits, masked_mean

__all__ = ["compute_entropy_loss", "compute_overlong_penalty", "compute_value_loss"]

# --------------------------------------------------------------------------------------------------------------------
# Value and entropy losses
# --------------------------------------------------------------------------------------------------------------------


def compute_value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float,
    loss_agg_mode: str = "token-mean",
    dp_size: int = 1,
    batch_num_tokens: int | float | torch.Tensor | None = None,
    global_batch_size: int | float | torch.Tensor | None = None,
    loss_scale_factor: int | float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clipped value loss (Schulman et al. 2017, PPO; the clipping as in OpenAI baselines' ppo2):

        v_clip = clip(v, v_old - c, v_old + c)
        loss   = 0.5 * agg( max((v - R)^2, (v_clip - R)^2) )

    vf_clipfrac = fraction of tokens where the clipped error is the larger one. ``dp_size``, ``batch_num_tokens``,
    ``global_batch_size`` and ``loss_scale_factor`` are passed on to ``agg_loss`` (normalising a micro-batch by the
    whole batch's counts); they change the loss, never vf_clipfrac.

    Shapes: vpreds (new values), returns, values (old values), response_mask (bs, response_length)
    -> (vf_loss, vf_clipfrac), scalars.
    """
    vpred_clipped = torch.clamp(vpreds, values - cliprange_value, values + cliprange_value)
    loss_unclipped = (vpreds - returns) ** 2
    loss_clipped = (vpred_clipped - returns) ** 2
    vf_loss = 0.5 * agg_loss(
        torch.maximum(loss_unclipped, loss_clipped),
        response_mask,
        loss_agg_mode,
        dp_size=dp_size,
        batch_num_tokens=batch_num_tokens,
        global_batch_size=global_batch_size,
        loss_scale_factor=loss_scale_factor,
    )
    vf_clipfrac = masked_mean((loss_clipped > loss_unclipped).to(vpreds.dtype), response_mask)
    return vf_loss, vf_clipfrac


def compute_entropy_loss(
    logits: torch.Tensor, response_mask: torch.Tensor, loss_agg_mode: str = "token-mean"
) -> torch.Tensor:
    """Aggregated token entropy H_t = logsumexp(z_t) - sum_v softmax(z_t)_v z_{t,v} (``entropy_from_logits``).

    Shapes: logits (bs, response_length, vocab_size), response_mask (bs, response_length) -> scalar.
    """
    return agg_loss(entropy_from_logits(logits), response_mask, loss_agg_mode)


# --------------------------------------------------------------------------------------------------------------------
# DAPO helpers
# --------------------------------------------------------------------------------------------------------------------


def compute_overlong_penalty(
    response_length_tensor: torch.Tensor,
    max_response_length: int,
    overlong_buffer_len: int,
    penalty_factor: float,
) -> torch.Tensor:
    """Soft overlong punishment (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale").

    With L_max = max_response_length, B = overlong_buffer_len and |y| the response length:

        penalty = 0                                   |y| <= L_max - B
                = -(|y| - (L_max - B)) / B * factor   L_max - B < |y|   (reaches -factor at |y| = L_max)

    The penalty is added to the response's score. Shapes: response_length_tensor (bs,) -> (bs,) float.
    """
    if overlong_buffer_len <= 0:
        raise ValueError(f"overlong_buffer_len must be > 0, got {overlong_buffer_len}")
    dtype = response_length_tensor.dtype if response_length_tensor.is_floating_point() else torch.get_default_dtype()
    lengths = response_length_tensor.to(dtype)
    exceed = lengths - (max_response_length - overlong_buffer_len)
    return torch.clamp(-exceed / overlong_buffer_len * penalty_factor, max=0.0)
