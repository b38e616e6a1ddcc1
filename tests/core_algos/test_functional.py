"""verl.core_algos.functional: masked statistics never see what the mask leaves out, NaN and inf included (padding
holds them: log-probs of pad tokens, losses of positions no one looks at)."""

import math

import torch
from algo_refs import BS, LENGTHS, T, close, mask, randn

from verl.core_algos import masked_mean, masked_sum, masked_var, masked_whiten

NAN, INF = float("nan"), float("inf")


def test_masked_mean_ignores_nan_outside_the_mask():
    # a NaN outside the mask: 2.5 in verl, NaN when written as sum(values * mask) (0 * NaN = NaN)
    values = torch.tensor([1.0, 2.0, NAN, 4.0])
    assert masked_mean(values, torch.tensor([1.0, 0.0, 0.0, 1.0])).item() == 2.5
    assert masked_mean(torch.tensor([1.0, INF, -INF, 4.0]), torch.tensor([1, 0, 0, 1])).item() == 2.5
    assert masked_mean(values, torch.tensor([True, False, False, True])).item() == 2.5


def test_masked_mean_per_row_with_nan_padding_matches_loop():
    m = mask()
    x = randn(BS, T, seed=1)
    padded = torch.where(m > 0, x, torch.full_like(x, NAN))
    expected = [sum(float(x[i, t]) for t in range(LENGTHS[i])) / LENGTHS[i] for i in range(BS)]
    close(masked_mean(padded, m, axis=-1), expected)
    close(masked_mean(padded, m, dim=-1), expected)  # our keyword, verl's is axis
    close(masked_mean(padded, m, -1), expected)
    close(masked_mean(padded, m), sum(e * n for e, n in zip(expected, LENGTHS)) / sum(LENGTHS))
    close(masked_mean(padded, torch.zeros_like(m)), 0.0)  # empty mask: 0, not NaN


def test_masked_statistics_and_gradients_stay_finite_with_nan_padding():
    m = mask()
    x = randn(BS, T, seed=2)
    padded = torch.where(m > 0, x, torch.full_like(x, NAN)).requires_grad_(True)
    close(masked_var(padded, m), masked_var(x, m))
    assert torch.isfinite(masked_whiten(padded, m)[m > 0]).all()
    masked_mean(padded, m).backward()
    expected_grad = torch.where(m > 0, 1.0 / sum(LENGTHS), 0.0)
    close(padded.grad, expected_grad)  # no NaN flows back into the padding either


def test_masked_sum_weighs_by_a_fractional_mask():
    values = torch.tensor([[1.0, 2.0, NAN], [4.0, 8.0, 16.0]], dtype=torch.float64)
    weights = torch.tensor([[0.5, 1.0, 0.0], [0.0, 0.25, 1.0]], dtype=torch.float64)
    close(masked_sum(values, weights), 0.5 + 2.0 + 2.0 + 16.0)
    close(masked_sum(values, weights, axis=-1), [2.5, 18.0])
    assert math.isclose(masked_mean(values, weights).item(), 20.5 / 2.75)
