"""The update-size control's math against hand-computed values (verl.core_algos.trust_region)."""

import math

import pytest
import torch

from verl.core_algos.trust_region import adapt_lr_scale, policy_drift_kl_sum


def test_drift_is_k3_summed_over_response_tokens():
    old = torch.tensor([[math.log(0.5), math.log(0.25), 0.0]])
    new = torch.tensor([[math.log(0.25), math.log(0.5), -5.0]])
    mask = torch.tensor([[1, 1, 0]])
    total, count = policy_drift_kl_sum(old, new, mask)
    # r = 0.5 and 2: (r - 1) - log r = (-0.5 + log 2) + (1 - log 2) = 0.5; the padded token does not count
    assert total.item() == pytest.approx(0.5, abs=1e-6)  # float32 log-probs
    assert count.item() == 2


def test_no_drift_when_the_policy_has_not_moved():
    lp = torch.log(torch.rand(3, 4))
    total, count = policy_drift_kl_sum(lp, lp.clone(), torch.ones(3, 4))
    assert total.item() == 0.0 and count.item() == 12


def test_drift_estimates_the_kl_of_the_sampling_policy_to_the_new_one():
    """Tokens drawn from pi_old: the k3 mean converges to KL(pi_old || pi_new) of the two distributions."""
    g = torch.Generator().manual_seed(0)
    p_old = torch.tensor([0.6, 0.3, 0.1])
    p_new = torch.tensor([0.4, 0.4, 0.2])
    tokens = torch.multinomial(p_old, 200_000, replacement=True, generator=g)
    total, count = policy_drift_kl_sum(p_old.log()[tokens][None], p_new.log()[tokens][None], torch.ones(1, len(tokens)))
    exact = float((p_old * (p_old / p_new).log()).sum())
    assert (total / count).item() == pytest.approx(exact, rel=0.02)


@pytest.mark.parametrize(
    "kl, expected",
    [(0.05, 1.0 / 1.5), (0.021, 1.0 / 1.5), (0.02, 1.0), (0.01, 1.0), (0.005, 1.0), (0.004, 1.5)],
)
def test_lr_scale_moves_by_the_factor_outside_the_band(kl, expected):
    assert adapt_lr_scale(1.0, kl, 0.01, 1.5, 0.01, 10.0) == pytest.approx(expected)


def test_lr_scale_stays_within_its_bounds():
    assert adapt_lr_scale(1.0, 0.0, 0.01, 1.5, 0.01, 1.0) == 1.0  # the ceiling: optim.lr
    assert adapt_lr_scale(0.012, 1.0, 0.01, 1.5, 0.01, 1.0) == 0.01  # the floor


@pytest.mark.parametrize("kl, expected", [(0.05, 1.0 / 1.5), (0.01, 1.0), (0.004, 1.1)])
def test_lr_scale_rises_by_the_increase_factor_and_falls_by_the_factor(kl, expected):
    assert adapt_lr_scale(1.0, kl, 0.01, 1.5, 0.01, 10.0, increase_factor=1.1) == pytest.approx(expected)


def test_lr_increase_factor_below_one_is_refused():
    from verl.workers.config.actor import TrustRegionConfig

    with pytest.raises(ValueError, match="lr_increase_factor=0.9"):
        TrustRegionConfig(lr_increase_factor=0.9)
