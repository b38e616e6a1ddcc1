"""Masked statistics over response tokens and the entropy of logits: the tensor helpers the algorithm formulas are
written with. ``verl.utils.torch_functional`` re-exports them under the same names (one definition, here).

Shapes: ``values`` and ``mask`` broadcast together; ``mask`` is 1 on the entries that count, 0 elsewhere.
"""

from __future__ import annotations

import torch

__all__ = ["entropy_from_logits", "masked_mean", "masked_sum", "masked_var", "masked_whiten"]


def masked_mean(
    values: torch.Tensor, mask: torch.Tensor, axis: int | tuple[int, ...] | None = None, dim: int | None = None
) -> torch.Tensor:
    """sum(values * mask) / sum(mask) over ``axis`` (verl's name; ``dim`` is the same) or everything; 0 where the
    mask is empty.

    Entries outside the mask never reach the result, even when they hold NaN or inf (padding often does: log-probs
    of pad tokens, losses of clipped-out positions): ``masked_mean([1, 2, nan, 4], [1, 0, 0, 1]) == 2.5``. Written
    as ``values * mask`` alone it would be NaN, because 0 * NaN = NaN.
    """
    axis = dim if axis is None else axis
    mask = mask.to(values.dtype)
    count = mask.sum() if axis is None else mask.sum(axis)
    return masked_sum(values, mask, axis) / count.clamp(min=1.0)


def masked_sum(
    values: torch.Tensor, mask: torch.Tensor, axis: int | tuple[int, ...] | None = None, dim: int | None = None
) -> torch.Tensor:
    """sum(values * mask) over ``axis`` (verl's name; ``dim`` is the same) or everything. Masked-out entries never
    leak, even when they hold inf/NaN: they are replaced by 0 before the product (a fractional mask still weighs)."""
    axis = dim if axis is None else axis
    kept = torch.where(mask.bool(), values, torch.zeros_like(values)) * mask
    return kept.sum() if axis is None else kept.sum(axis)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of the entries where ``mask`` is 1 (a scalar).

    var = sum(mask * (values - mean)^2) / sum(mask), times the Bessel factor n / (n - 1) when ``unbiased``
    (n = sum(mask)). As in verl, an unbiased variance of fewer than two entries raises ValueError.
    """
    mean = masked_mean(values, mask)
    variance = masked_mean((values - mean) ** 2, mask)
    if unbiased:
        n = mask.sum()
        if n == 0:
            raise ValueError("masked_var: the mask selects no element; at least one must be 1")
        if n == 1:
            raise ValueError("masked_var: the mask selects a single element; the unbiased variance divides by zero")
        variance = variance * n / (n - 1)
    return variance


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """(values - mean) / sqrt(var + 1e-8) with the masked mean and unbiased masked variance (as verl).

    Every position is transformed (padding too); callers multiply by the mask when padding must be zero.
    With ``shift_mean=False`` the mean is added back, so only the scale changes.
    """
    mean = masked_mean(values, mask)
    var = masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened = whitened + mean
    return whitened


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the categorical distribution softmax(logits) over the last dimension.

    H = logsumexp(z) - sum_v softmax(z)_v * z_v, which equals -sum_v p_v log p_v without forming log p (stable for
    large logits). Shape (..., vocab) -> (...).
    """
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)
