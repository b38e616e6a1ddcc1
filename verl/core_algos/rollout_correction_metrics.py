"""Diagnostics of the train/inference mismatch and of the rollout correction, with verl's metric names.

Four groups (the caller adds verl's prefixes: ``rollout_corr/`` for the first three, ``training/`` is part of the
last one's names):

- ``compute_is_metrics``: the importance weights (``rollout_is_mean``, ``_max``, ``_std``, ``_eff_sample_size``, ...);
- ``compute_rs_metrics``: one rejection option's statistic (``rollout_rs_<option>_mean``, ``_fraction_high``, ...);
- ``compute_offpolicy_metrics``: how far apart the two policies are (``kl``, ``k3_kl``, perplexities, chi^2);
- ``compute_mismatch_metrics``: how far apart the two probabilities of each token are
  (``training/rollout_probs_diff_max|mean|std``, ``training/rollout_actor_probs_pearson_corr``; the correlation
  of training and inference probabilities as arXiv:2506.13585 reports it, verl's reference for this metric).

Conventions: sequence statistics run over the rows that have at least one response token (a row without tokens
carries no information); token statistics over the response tokens. A batch without any response token gives no
metric (an empty dict) rather than an error: training continues, nothing was measured. Shapes as in
``rollout_ratios``.
"""

from __future__ import annotations

import math

import torch

from .functional import masked_mean
from .rollout_ratios import (
    SAFETY_BOUND,
    bounded_exp,
    k3_divergence,
    rollout_log_ratio,
    sequence_log_ratio,
    sequence_mean,
)

__all__ = ["compute_is_metrics", "compute_mismatch_metrics", "compute_offpolicy_metrics", "compute_rs_metrics"]


def _share(condition: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """The share of entries (of the masked-in ones) where ``condition`` holds, counted exactly (integers)."""
    if mask is None:
        return condition.sum().item() / condition.numel()
    kept = mask.bool()
    return (condition & kept).sum().item() / kept.sum().item()


def _std(values: torch.Tensor) -> float:
    """Unbiased standard deviation of a 1-D tensor; 0 for fewer than two values (nothing spreads)."""
    return values.std().item() if values.numel() > 1 else 0.0


def _clamped_std(values: torch.Tensor, response_mask: torch.Tensor, low: float, high: float) -> float:
    """sqrt(E[c^2] - E[c]^2) over the response tokens, c = clamp(x, low, high): a spread that one outlier cannot blow
    up (verl's ``*_std``); 0 with fewer than two tokens."""
    if response_mask.sum() <= 1:
        return 0.0
    c = values.clamp(min=low, max=high)
    variance = masked_mean(c.square(), response_mask) - masked_mean(c, response_mask).square()
    return torch.sqrt(variance.clamp(min=0.0)).item()


def _masked_extremes(values: torch.Tensor, response_mask: torch.Tensor) -> tuple[float, float]:
    """(max, min) over the response tokens."""
    kept = values[response_mask.bool()]
    return kept.max().item(), kept.min().item()


def compute_is_metrics(
    rollout_is_weights: torch.Tensor,
    log_ratio_for_metrics: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_is: str,
    rollout_is_threshold: float,
) -> dict[str, float]:
    """Statistics of the importance weights before truncation (so ``ratio_fraction_high`` counts what the cap cut).

    ``rollout_is_weights`` (bs, T): bounded ratios, 0 on padding. ``log_ratio_for_metrics``: the log ratios the
    weights came from, (bs, T) for ``token``, (bs, 1) or (bs,) per row for ``sequence`` / ``geometric`` (unbounded,
    so max/min and the threshold fractions are exact). With C = ``rollout_is_threshold``:

        rollout_is_mean / _max / _min              over tokens (per row from the log ratios for sequence levels)
        rollout_is_ratio_fraction_high / _low      share above C / below 1/C (tokens, or rows for sequence levels)
        rollout_is_std                             sqrt(E[c^2] - E[c]^2), c = clamp(w, 1/C, C), over tokens
        rollout_is_eff_sample_size                 1 / E[(c / E[c])^2]: 1 when all weights are equal, -> 0 when
                                                   one dominates (Kong's ESS, as a fraction of the tokens)
        rollout_is_seq_mean/_std/_max/_min         of the rows' mean weights; _max_deviation = max |mean - 1|;
        rollout_is_seq_fraction_high/_low          share of rows whose mean weight is above C / below 1/C
    """
    mask = response_mask.to(rollout_is_weights.dtype)
    rows = mask.sum(dim=-1) > 0
    if not rows.any():
        return {}
    high, low = float(rollout_is_threshold), 1.0 / float(rollout_is_threshold)
    metrics: dict[str, float] = {"rollout_is_mean": masked_mean(rollout_is_weights, mask).item()}
    if rollout_is == "token":
        metrics["rollout_is_max"], metrics["rollout_is_min"] = _masked_extremes(rollout_is_weights, mask)
        metrics["rollout_is_ratio_fraction_high"] = _share(rollout_is_weights > high, mask)
        metrics["rollout_is_ratio_fraction_low"] = _share(rollout_is_weights < low, mask)
    else:
        row_logs = log_ratio_for_metrics.reshape(len(mask))[rows]
        metrics["rollout_is_max"] = math.exp(min(row_logs.max().item(), SAFETY_BOUND))
        metrics["rollout_is_min"] = math.exp(min(row_logs.min().item(), SAFETY_BOUND))
        metrics["rollout_is_ratio_fraction_high"] = _share(row_logs > math.log(high))
        metrics["rollout_is_ratio_fraction_low"] = _share(row_logs < math.log(low))
    metrics["rollout_is_std"] = _clamped_std(rollout_is_weights, mask, low, high)
    clamped = rollout_is_weights.clamp(min=low, max=high)
    normalized = clamped / (masked_mean(clamped, mask) + 1e-8)
    metrics["rollout_is_eff_sample_size"] = 1.0 / masked_mean(normalized.square(), mask).item()
    seq_weights = sequence_mean(rollout_is_weights, mask)[rows]
    metrics.update(
        rollout_is_seq_mean=seq_weights.mean().item(),
        rollout_is_seq_std=_std(seq_weights),
        rollout_is_seq_max=seq_weights.max().item(),
        rollout_is_seq_min=seq_weights.min().item(),
        rollout_is_seq_max_deviation=(seq_weights - 1.0).abs().max().item(),
        rollout_is_seq_fraction_high=_share(seq_weights > high),
        rollout_is_seq_fraction_low=_share(seq_weights < low),
    )
    return metrics


def compute_rs_metrics(
    option_name: str,
    rs_statistic: torch.Tensor,
    response_mask: torch.Tensor,
    seq_valid_mask: torch.Tensor,
    *,
    level: str,
    per_sequence_values: torch.Tensor | None,
    rollout_rs_threshold: float,
    rollout_rs_threshold_lower: float,
    apply_lower_threshold: bool,
) -> dict[str, float]:
    """Statistics of one rejection option's divergence (verl's ``rollout_rs_<option>_*``), before rejection.

    ``rs_statistic`` (bs, T): the per-token statistic (for sequence options, the row's value on each of its tokens);
    ``per_sequence_values`` (bs,): the rows' values for sequence options, None for token options (then a row's value
    is the mean of its tokens'); ``seq_valid_mask`` (bs,): rows with a token. The bounds are the option's, on the
    statistic's own scale (log-ratio bounds for k1 options, whose lower bound alone is applied).

        _mean                         token mean of the statistic
        _max / _min                   over rows for sequence options, over tokens for token options
        _fraction_high / _low         share above the upper / below the lower bound (rows or tokens, as max)
        _std                          clamped to [lower (k1) or 0, upper], sqrt(E[c^2] - E[c]^2) over tokens
        _seq_mean/_std/_max/_min      of the rows' values; _seq_max_deviation = max |value| (ideal 0)
        _seq_fraction_high (/ _low)   share of rows above the upper (below the lower, k1 only) bound
    """
    mask = response_mask.to(rs_statistic.dtype)
    rows = seq_valid_mask.bool()
    if not rows.any():
        return {}
    prefix = f"rollout_rs_{option_name}"
    upper, lower = float(rollout_rs_threshold), float(rollout_rs_threshold_lower)
    row_values = per_sequence_values if per_sequence_values is not None else sequence_mean(rs_statistic, mask)
    row_values = row_values.reshape(len(mask))[rows]
    metrics = {f"{prefix}_mean": masked_mean(rs_statistic, mask).item()}
    if level == "sequence":
        metrics[f"{prefix}_max"], metrics[f"{prefix}_min"] = row_values.max().item(), row_values.min().item()
        high, below = _share(row_values > upper), _share(row_values < lower)
    else:
        metrics[f"{prefix}_max"], metrics[f"{prefix}_min"] = _masked_extremes(rs_statistic, mask)
        high, below = _share(rs_statistic > upper, mask), _share(rs_statistic < lower, mask)
    metrics[f"{prefix}_fraction_high"] = high
    metrics[f"{prefix}_fraction_low"] = below if apply_lower_threshold else 0.0
    metrics[f"{prefix}_std"] = _clamped_std(rs_statistic, mask, lower if apply_lower_threshold else 0.0, upper)
    metrics.update(
        {
            f"{prefix}_seq_mean": row_values.mean().item(),
            f"{prefix}_seq_std": _std(row_values),
            f"{prefix}_seq_max": row_values.max().item(),
            f"{prefix}_seq_min": row_values.min().item(),
            f"{prefix}_seq_max_deviation": row_values.abs().max().item(),
            f"{prefix}_seq_fraction_high": _share(row_values > upper),
        }
    )
    if apply_lower_threshold:
        metrics[f"{prefix}_seq_fraction_low"] = _share(row_values < lower)
    return metrics


def compute_offpolicy_metrics(
    old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor | None, response_mask: torch.Tensor
) -> dict[str, float]:
    """How far pi_old (the trainer) is from pi_rollout (the sampler) on the sampled responses; verl's names, without
    the ``rollout_corr/`` prefix. Per row, lp_old = mean_t log pi_old(y_t) and lp_roll likewise; over rows:

        training_ppl = mean exp(-lp_old)           training_log_ppl = mean(-lp_old)
        rollout_ppl  = mean exp(-lp_roll)          rollout_log_ppl  = mean(-lp_roll)
        log_ppl_diff = mean(lp_roll - lp_old)      (+ _abs_diff: mean |.|, _max, _min), = log(ppl_old / ppl_roll)
        ppl_ratio    = mean exp(lp_roll - lp_old)  (bounded; the inverse of the geometric-mean IS ratio)
        kl           = token mean of log pi_rollout - log pi_old   (k1 estimate of KL(pi_rollout || pi_old))
        k3_kl        = token mean of rho - 1 - log rho              (k3 estimate of the same KL, rho bounded)
        chi2_token   = token mean of rho^2 - 1                      (chi^2(pi_old || pi_rollout): IS weight variance)
        chi2_seq     = row mean of (prod_t rho_t)^2 - 1             (sequence-level, prod bounded at e^+-20)

    Without ``rollout_log_prob`` only the two ``training_*`` perplexities."""
    mask = response_mask.to(old_log_prob.dtype)
    rows = mask.sum(dim=-1) > 0
    if not rows.any():
        return {}
    lp_old = sequence_mean(old_log_prob, mask)[rows]
    metrics = {"training_ppl": torch.exp(-lp_old).mean().item(), "training_log_ppl": (-lp_old).mean().item()}
    if rollout_log_prob is None:
        return metrics
    log_ratio = rollout_log_ratio(old_log_prob, rollout_log_prob, mask)
    lp_roll = sequence_mean(rollout_log_prob, mask)[rows]
    log_ppl_diff = lp_roll - lp_old
    metrics.update(
        kl=masked_mean(-log_ratio, mask).item(),
        k3_kl=masked_mean(k3_divergence(log_ratio), mask).item(),
        rollout_ppl=torch.exp(-lp_roll).mean().item(),
        rollout_log_ppl=(-lp_roll).mean().item(),
        log_ppl_diff=log_ppl_diff.mean().item(),
        log_ppl_abs_diff=log_ppl_diff.abs().mean().item(),
        log_ppl_diff_max=log_ppl_diff.max().item(),
        log_ppl_diff_min=log_ppl_diff.min().item(),
        ppl_ratio=bounded_exp(log_ppl_diff).mean().item(),
        chi2_token=(masked_mean(bounded_exp(log_ratio).square(), mask) - 1.0).item(),
        chi2_seq=(torch.exp(2.0 * _bounded(sequence_log_ratio(log_ratio, mask)[rows])).mean() - 1.0).item(),
    )
    return metrics


def _bounded(log_value: torch.Tensor) -> torch.Tensor:
    return torch.clamp(log_value, min=-SAFETY_BOUND, max=SAFETY_BOUND)


def compute_mismatch_metrics(
    old_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, response_mask: torch.Tensor
) -> dict[str, float]:
    """The probability gap of every sampled token, p_old = exp(log pi_old(y_t)) against p_roll = exp(log
    pi_rollout(y_t)), over the response tokens (verl's ``training/`` debug metrics, full names):

        training/rollout_probs_diff_max / _mean / _std   max, mean and unbiased std of |p_old - p_roll|
        training/rollout_actor_probs_pearson_corr        Pearson correlation of p_old and p_roll over the tokens
        training/rollout_probs_diff_valid                1 (0, and nothing else, when there is no response token)

    The std of a single token is 0; the correlation is NaN when either side is constant (it is undefined)."""
    kept = response_mask.bool()
    if not kept.any():
        return {"training/rollout_probs_diff_valid": 0}
    p_old, p_roll = torch.exp(old_log_prob[kept]), torch.exp(rollout_log_prob[kept])
    diff = (p_old - p_roll).abs()
    return {
        "training/rollout_probs_diff_valid": 1,
        "training/rollout_probs_diff_max": diff.max().item(),
        "training/rollout_probs_diff_mean": diff.mean().item(),
        "training/rollout_probs_diff_std": _std(diff),
        "training/rollout_actor_probs_pearson_corr": _pearson(p_old, p_roll),
    }


def _pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    """cov(x, y) / (std(x) std(y)) in float64; NaN when either is constant or there are fewer than two values."""
    x, y = x.double() - x.double().mean(), y.double() - y.double().mean()
    denominator = torch.sqrt(x.square().sum() * y.square().sum())
    return (x * y).sum().item() / denominator.item() if denominator > 0 else float("nan")
