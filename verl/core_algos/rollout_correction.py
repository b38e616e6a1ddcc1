"""Rollout correction: importance weights and rejection of tokens or sequences whose sampler and trainer
probabilities disagree (verl's ``algorithm.rollout_correction``, its option names and metric names).

Liu, Li et al. 2025, "When Speed Kills Stability: Demystifying RL Collapse from the Training-Inference Mismatch"
(https://richardli.xyz/rl-collapse); Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL
Training" (truncated importance sampling, TIS). The responses come from pi_rollout; the PPO loss assumes pi_old. Two
independent mechanisms bring them together, both from log rho_t = log pi_old(y_t) - log pi_rollout(y_t):

**Importance weights** (``rollout_is``; truncate mode): the loss of token t is multiplied by w_t (detached),

    token      w_t = min(rho_t, C)                                   per token: low variance, biased (Token-TIS)
    sequence   w_t = min(prod_s rho_s, C) for every t of the row     unbiased, variance grows with length (Seq-TIS)
    geometric  w_t = min((prod_s rho_s)^(1/|y|), C)                  length-normalised sequence ratio

with C = ``rollout_is_threshold`` and every ratio bounded to [e^-20, e^20] before the cap. ``rollout_is_batch_normalize``
then divides by the batch mean weight (over tokens for ``token``, over rows otherwise) so the weights average 1.
("geometric" is verl 0.6's third level; current verl keeps token / sequence and filters geometrically with
``rollout_rs=seq_mean_k1``.)

**Rejection** (``rollout_rs``; mask mode): tokens or whole rows whose divergence leaves the trust region are taken out
of ``response_mask`` (so out of the loss), instead of being down-weighted. An option is ``<level>_<estimator>``:

    estimator  k1 = -log rho_t   k2 = (log rho_t)^2 / 2   k3 = rho_t - 1 - log rho_t        (rollout_ratios)
    level      token_*: each token alone;  seq_sum_* / seq_mean_* / seq_max_*: the row's sum / mean / max of the
               token values decides for the whole row

k1 options keep log(lower) <= k1 <= log(upper) (``"lower_upper"``; a single number u means 1/u_u); k2/k3 options keep
value <= upper. ``seq_mean_k1`` is the geometric-mean filter (Geo-RS); ``seq_max_k2`` / ``seq_max_k3`` are the veto:
one token past the bound rejects its whole sequence, however clean the rest (verl's successor of the token veto
threshold). Several options, comma-separated, must all pass; ``rollout_rs_threshold`` gives one bound per option or
one for all. Because k1 = -log rho, the k1 bounds apply to pi_rollout / pi_old (verl's convention; with symmetric
bounds such as ``0.5_2.0`` the direction does not matter).

NaN log-probs on a response token make its weight NaN (the update then skips the step, as for any non-finite
gradient) and fail every rejection test (the token, or its row, is rejected). Padding never matters.
"""

from __future__ import annotations

import math

import torch

from .functional import masked_mean
from .rollout_correction_metrics import compute_is_metrics, compute_offpolicy_metrics, compute_rs_metrics
from .rollout_ratios import (
    bounded_exp,
    geometric_log_ratio,
    k1_divergence,
    k2_divergence,
    k3_divergence,
    rollout_log_ratio,
    sequence_log_ratio,
    sequence_max,
    sequence_mean,
    sequence_sum,
    token_is_ratios,
)

__all__ = [
    "ROLLOUT_IS_LEVELS",
    "SUPPORTED_ROLLOUT_RS_OPTIONS",
    "TOKEN_LEVEL_ROLLOUT_RS_OPTIONS",
    "batch_normalize_is_weights",
    "compute_rollout_correction",
    "compute_rollout_correction_weights",
    "compute_rollout_rejection_mask",
    "parse_rollout_rs",
    "parse_rollout_rs_thresholds",
    "rejection_statistic",
    "truncate_is_weights",
]

ROLLOUT_IS_LEVELS = ("token", "sequence", "geometric")
TOKEN_LEVEL_ROLLOUT_RS_OPTIONS: frozenset[str] = frozenset({"token_k1", "token_k2", "token_k3"})
SUPPORTED_ROLLOUT_RS_OPTIONS: frozenset[str] = TOKEN_LEVEL_ROLLOUT_RS_OPTIONS | frozenset(
    {f"seq_{agg}_{k}" for agg in ("sum", "mean") for k in ("k1", "k2", "k3")} | {"seq_max_k2", "seq_max_k3"}
)
_DIVERGENCES = {"k1": k1_divergence, "k2": k2_divergence, "k3": k3_divergence}
_SEQUENCE_AGGREGATES = {"sum": sequence_sum, "mean": sequence_mean, "max": sequence_max}


# ---------------------------------------------------------------------------------------------------- IS weights
def truncate_is_weights(weights: torch.Tensor, threshold: float) -> torch.Tensor:
    """w = sg(min(rho, C)): the truncated importance weight (TIS, Yao et al. 2025). Only the top is cut: a small
    weight is kept as it is. Detached: the weight changes the measure, not the objective. (bs, T) -> (bs, T)."""
    return weights.clamp(max=threshold).detach()


def batch_normalize_is_weights(
    weights: torch.Tensor, response_mask: torch.Tensor, rollout_is: str
) -> tuple[torch.Tensor, float]:
    """w / mean(w), so the weights average 1 over the batch: over its tokens for ``token``, over its rows' weights for
    the sequence levels (self-normalised IS, trading a little bias for variance). Returns (weights, the mean); a mean
    at or below 1e-8 leaves the weights unchanged (factor 1.0)."""
    mask = response_mask.to(weights.dtype)
    if rollout_is == "token":
        mean = masked_mean(weights, mask)
    else:
        rows = mask.sum(dim=-1) > 0
        mean = sequence_mean(weights, mask)[rows].mean() if rows.any() else torch.zeros((), dtype=weights.dtype)
    if not mean > 1e-8:
        return weights, 1.0
    return weights / mean, mean.item()


def compute_rollout_correction_weights(
    log_ratio: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_is: str = "token",
    rollout_is_threshold: float = 2.0,
    rollout_is_batch_normalize: bool = False,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Truncated importance weights (bs, T), 0 on padding, and their metrics (``rollout_is_*``, no prefix; taken
    before truncation). ``log_ratio`` (bs, T) = log pi_old - log pi_rollout; levels and formulas in the module
    docstring. A level other than token / sequence / geometric, or a threshold <= 0, is a ValueError."""
    if rollout_is not in ROLLOUT_IS_LEVELS:
        raise ValueError(
            f"algorithm.rollout_correction.rollout_is={rollout_is!r}: use one of {', '.join(ROLLOUT_IS_LEVELS)} "
            "(or null for no importance weights)"
        )
    if not rollout_is_threshold > 0:
        raise ValueError(
            f"algorithm.rollout_correction.rollout_is_threshold={rollout_is_threshold}: the weights' cap must be > 0"
        )
    mask = response_mask.to(log_ratio.dtype)
    if rollout_is == "token":
        log_for_metrics = log_ratio
        raw = token_is_ratios(log_ratio, mask)
    else:
        row_log = (sequence_log_ratio if rollout_is == "sequence" else geometric_log_ratio)(log_ratio, mask)
        log_for_metrics = row_log.unsqueeze(-1)
        raw = torch.where(mask.bool(), bounded_exp(log_for_metrics).expand_as(mask), torch.zeros_like(mask))
    metrics = compute_is_metrics(raw, log_for_metrics, mask, rollout_is, rollout_is_threshold)
    weights = truncate_is_weights(raw, rollout_is_threshold)
    if rollout_is_batch_normalize:
        weights, metrics["rollout_is_batch_norm_factor"] = batch_normalize_is_weights(weights, mask, rollout_is)
    return weights, metrics


# ----------------------------------------------------------------------------------------------------- rejection
def parse_rollout_rs(rollout_rs: str) -> list[str]:
    """The options of a comma-separated ``rollout_rs`` in order, duplicates dropped; an unknown option is a
    ValueError listing the valid ones."""
    if not isinstance(rollout_rs, str) or not rollout_rs.strip():
        raise ValueError(
            f"algorithm.rollout_correction.rollout_rs={rollout_rs!r}: give one or more comma-separated options, e.g. "
            "token_k1 or seq_mean_k1,seq_max_k2 (null: no rejection)"
        )
    options: list[str] = []
    for option in (part.strip() for part in rollout_rs.split(",")):
        if option and option not in options:
            if option not in SUPPORTED_ROLLOUT_RS_OPTIONS:
                raise ValueError(
                    f"algorithm.rollout_correction.rollout_rs: unknown option {option!r}; use "
                    f"{', '.join(sorted(SUPPORTED_ROLLOUT_RS_OPTIONS))}"
                )
            options.append(option)
    return options


def parse_rollout_rs_thresholds(options: list[str], threshold_spec) -> dict[str, tuple[float | None, float]]:
    """{option: (lower, upper)} from ``rollout_rs_threshold``: one entry per option or one for all, comma-separated
    (a number is one entry). k1 options take ``"lower_upper"`` ratio bounds (a single u means 1/u .. u); k2/k3
    options take one upper bound (lower is None). Every bound must be a positive number; anything else is a
    ValueError naming the option and the expected form."""
    key = "algorithm.rollout_correction.rollout_rs_threshold"
    if threshold_spec is None or isinstance(threshold_spec, bool):
        raise ValueError(f"{key}={threshold_spec!r}: rollout_rs needs bounds, e.g. 0.5_2.0 for k1 options, 0.01 for k3")
    specs = [str(threshold_spec)] if isinstance(threshold_spec, int | float) else str(threshold_spec).split(",")
    specs = [s.strip() for s in specs if s.strip()]
    if len(specs) not in (1, len(options)):
        raise ValueError(
            f"{key}={threshold_spec!r}: give one bound for all options or one per option ({len(options)}: "
            f"{','.join(options)})"
        )
    specs = specs * len(options) if len(specs) == 1 else specs
    bounds: dict[str, tuple[float | None, float]] = {}
    for option, spec in zip(options, specs):
        is_k1 = option.endswith("k1")
        if "_" in spec and not is_k1:
            raise ValueError(f"{key}: {option} takes one upper bound, not {spec!r} (lower_upper is for k1 options)")
        parts = spec.split("_", 1) if is_k1 else [spec]
        try:
            numbers = [float(p) for p in parts]
        except ValueError:
            raise ValueError(f"{key}: {spec!r} for {option} is not a number (or lower_upper for k1 options)") from None
        if not all(n > 0 and math.isfinite(n) for n in numbers):
            raise ValueError(f"{key}: the bounds of {option} must be positive finite numbers, got {spec!r}")
        if is_k1:
            lower, upper = numbers if len(numbers) == 2 else (1.0 / numbers[0], numbers[0])
            if lower > upper:
                raise ValueError(f"{key}: {option} lower bound {lower} is above its upper bound {upper}")
            bounds[option] = (lower, upper)
        else:
            bounds[option] = (None, numbers[0])
    return bounds


def rejection_statistic(
    option: str, log_ratio: torch.Tensor, response_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The divergence an option tests: (per token (bs, T), per row (bs,) or None for token options). For sequence
    options the per-token tensor holds the row's value on every position."""
    level, _, estimator = option.rpartition("_")
    token_values = _DIVERGENCES[estimator](log_ratio)
    if level == "token":
        return token_values, None
    row_values = _SEQUENCE_AGGREGATES[level.removeprefix("seq_")](token_values, response_mask)
    return row_values.unsqueeze(-1).expand_as(token_values), row_values


def compute_rollout_rejection_mask(
    log_ratio: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_rs: str = "token_k1",
    rollout_rs_threshold=None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``response_mask`` with the rejected tokens (or rows) set to 0, same dtype, and the metrics (no prefix):
    each option's ``rollout_rs_<option>_*`` statistics and ``_masked_fraction`` (tokens) / ``_seq_masked_fraction``
    (rows losing a token) for it alone, then ``rollout_rs_masked_fraction`` / ``rollout_rs_seq_masked_fraction`` for
    all options together. ``log_ratio`` (bs, T) = log pi_old - log pi_rollout."""
    options = parse_rollout_rs(rollout_rs)
    bounds = parse_rollout_rs_thresholds(options, rollout_rs_threshold)
    if log_ratio.shape[0] == 0:
        return response_mask, {}
    mask = response_mask.to(log_ratio.dtype)
    in_response = response_mask.bool()
    rows = in_response.any(dim=-1)
    keep_all = torch.ones_like(in_response)
    metrics: dict[str, float] = {}
    for option in options:
        lower, upper = bounds[option]
        token_stat, row_stat = rejection_statistic(option, log_ratio, mask)
        if lower is not None:  # k1: bounds on the log scale of the statistic
            low_log, high_log = math.log(lower), math.log(upper)
            keep = (token_stat >= low_log) & (token_stat <= high_log)
        else:
            low_log, high_log = 0.0, upper
            keep = token_stat <= upper
        metrics.update(
            compute_rs_metrics(
                option,
                token_stat,
                mask,
                rows,
                level="token" if row_stat is None else "sequence",
                per_sequence_values=row_stat,
                rollout_rs_threshold=high_log,
                rollout_rs_threshold_lower=low_log,
                apply_lower_threshold=lower is not None,
            )
        )
        metrics.update(_masked_fractions(f"rollout_rs_{option}_", keep, in_response, rows))
        keep_all &= keep
    metrics.update(_masked_fractions("rollout_rs_", keep_all, in_response, rows))
    return response_mask * keep_all.to(response_mask.dtype), metrics


def _masked_fractions(prefix: str, keep: torch.Tensor, in_response: torch.Tensor, rows: torch.Tensor) -> dict:
    """``<prefix>masked_fraction``: share of response tokens rejected; ``<prefix>seq_masked_fraction``: share of rows
    (with a token) that lose at least one."""
    if not rows.any():
        return {}
    rejected = ~keep & in_response
    lost_rows = rejected.any(dim=-1)[rows]
    return {
        f"{prefix}masked_fraction": rejected.sum().item() / in_response.sum().item(),
        f"{prefix}seq_masked_fraction": lost_rows.sum().item() / lost_rows.numel(),
    }


# ------------------------------------------------------------------------------------------------------- together
def compute_rollout_correction(
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    rollout_is: str | None = None,
    rollout_is_threshold: float = 2.0,
    rollout_is_batch_normalize: bool = False,
    rollout_rs: str | None = None,
    rollout_rs_threshold=None,
) -> tuple[torch.Tensor | None, torch.Tensor, dict[str, float]]:
    """(importance weights (bs, T) or None without ``rollout_is``, ``response_mask`` after rejection (unchanged
    without ``rollout_rs``), metrics with verl's ``rollout_corr/`` prefix: IS, rejection and off-policy ones, all
    measured on the mask before rejection). Shapes must agree; a mismatch is a ValueError naming them."""
    if not old_log_prob.shape == rollout_log_prob.shape == response_mask.shape:
        raise ValueError(
            f"rollout correction: old_log_probs {tuple(old_log_prob.shape)}, rollout_log_probs "
            f"{tuple(rollout_log_prob.shape)} and response_mask {tuple(response_mask.shape)} must have one shape "
            "(bs, response_length)"
        )
    log_ratio = rollout_log_ratio(old_log_prob, rollout_log_prob, response_mask)
    metrics: dict[str, float] = {}
    weights = None
    if rollout_is is not None:
        weights, is_metrics = compute_rollout_correction_weights(
            log_ratio, response_mask, rollout_is, rollout_is_threshold, rollout_is_batch_normalize
        )
        metrics.update(is_metrics)
    new_mask = response_mask
    if rollout_rs is not None:
        new_mask, rs_metrics = compute_rollout_rejection_mask(
            log_ratio, response_mask, rollout_rs, rollout_rs_threshold
        )
        metrics.update(rs_metrics)
    metrics.update(compute_offpolicy_metrics(old_log_prob, rollout_log_prob, response_mask))
    return weights, new_mask, {f"rollout_corr/{k}": v for k, v in metrics.items()}
