"""The train/inference mismatch of one sampled token, and its per-sequence aggregates: the formulas rollout correction
(``rollout_correction``) and its diagnostics (``rollout_correction_metrics``) are written with.

The sampler (vLLM, SGLang, our HF sampler) and the trainer compute the probability of the same sampled token with
different kernels, precisions or weights, so the data comes from pi_rollout while the loss assumes pi_old (Liu, Li
et al. 2025, "When Speed Kills Stability: Demystifying RL Collapse from the Training-Inference Mismatch"; Yao et al.
2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training"). Per token the gap is

    log rho_t = log pi_old(y_t | y_<t) - log pi_rollout(y_t | y_<t)

Shapes: ``(bs, response_length)`` in, ``(bs, response_length)`` or ``(bs,)`` out; ``response_mask`` is 1 on response
tokens. Padding may hold anything (0, -inf, NaN log-probs): every function here reads only masked-in entries.
Exponentials go through ``bounded_exp`` (log-space clamp to +-SAFETY_BOUND, as verl) so no weight overflows.
"""

from __future__ import annotations

import torch

__all__ = [
    "SAFETY_BOUND",
    "bounded_exp",
    "geometric_log_ratio",
    "k1_divergence",
    "k2_divergence",
    "k3_divergence",
    "rollout_log_ratio",
    "sequence_log_ratio",
    "sequence_max",
    "sequence_mean",
    "sequence_sum",
    "token_is_ratios",
]

# exp(20) ~ 4.9e8 and exp(-20) ~ 2.1e-9: the largest and smallest ratio any weight or statistic may take (verl's bound)
SAFETY_BOUND = 20.0


def _keep(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """``values`` on response tokens, 0 on padding (torch.where, so NaN/inf padding never leaks into a sum)."""
    return torch.where(response_mask.bool(), values, torch.zeros_like(values))


def bounded_exp(log_value: torch.Tensor) -> torch.Tensor:
    """exp(clamp(x, -SAFETY_BOUND, SAFETY_BOUND)): a ratio from its log without overflow. NaN stays NaN."""
    return torch.exp(torch.clamp(log_value, min=-SAFETY_BOUND, max=SAFETY_BOUND))


def rollout_log_ratio(
    old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, response_mask: torch.Tensor
) -> torch.Tensor:
    """log rho_t = log pi_old(y_t) - log pi_rollout(y_t) on response tokens, 0 on padding. (bs, T) -> (bs, T).

    The ratio corrects the sampler's distribution towards the trainer's: E_rollout[rho f] = E_old[f]."""
    return _keep(old_log_prob - rollout_log_prob, response_mask)


def token_is_ratios(log_ratio: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """rho_t = exp(log rho_t) per token (bounded), 0 on padding. (bs, T) -> (bs, T). Token-level IS (Token-TIS)."""
    return _keep(bounded_exp(log_ratio), response_mask)


def sequence_sum(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """sum_t m_t x_t per row. (bs, T) -> (bs,)."""
    return _keep(values, response_mask).sum(dim=-1)


def sequence_mean(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """sum_t m_t x_t / sum_t m_t per row; 0 for a row without tokens. (bs, T) -> (bs,)."""
    count = response_mask.to(values.dtype).sum(dim=-1)
    return sequence_sum(values, response_mask) / count.clamp(min=1.0)


def sequence_max(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """max_t x_t over a row's tokens; 0 for a row without tokens. (bs, T) -> (bs,). NaN in a row makes it NaN."""
    mask = response_mask.bool()
    filled = torch.where(mask, values, torch.full_like(values, float("-inf")))
    return torch.where(mask.any(dim=-1), filled.amax(dim=-1), torch.zeros_like(filled[:, 0]))


def sequence_log_ratio(log_ratio: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """log rho(y) = sum_t log rho_t: the log of the whole sequence's ratio prod_t rho_t (Seq-TIS). (bs, T) -> (bs,).

    Unbiased for the sequence-level objective, but its variance grows with the length (the product of T ratios)."""
    return sequence_sum(log_ratio, response_mask)


def geometric_log_ratio(log_ratio: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """log rho_geo(y) = (1/|y|) sum_t log rho_t: the log of the geometric mean ratio (prod_t rho_t)^(1/|y|), a
    per-token drift independent of the length (Geo-RS in verl's docs). (bs, T) -> (bs,)."""
    return sequence_mean(log_ratio, response_mask)


def k1_divergence(log_ratio: torch.Tensor) -> torch.Tensor:
    """k1_t = -log rho_t = log pi_rollout - log pi_old (bounded): the plain estimate of KL(pi_rollout || pi_old)
    (Schulman, "Approximating KL divergence"); signed, so its sum or mean can cancel."""
    return -torch.clamp(log_ratio, min=-SAFETY_BOUND, max=SAFETY_BOUND)


def k2_divergence(log_ratio: torch.Tensor) -> torch.Tensor:
    """k2_t = (log rho_t)^2 / 2 (bounded): >= 0, a chi^2-like penalty on both directions of the gap."""
    return 0.5 * torch.clamp(log_ratio, min=-SAFETY_BOUND, max=SAFETY_BOUND) ** 2


def k3_divergence(log_ratio: torch.Tensor) -> torch.Tensor:
    """k3_t = rho_t - 1 - log rho_t (bounded): >= 0 and unbiased for KL(pi_rollout || pi_old) under the sampler, with
    low variance when the gap is small."""
    bounded = torch.clamp(log_ratio, min=-SAFETY_BOUND, max=SAFETY_BOUND)
    return torch.exp(bounded) - 1.0 - bounded
