"""verl.core_algos.aggregation: agg_loss against loops for every mode, Dr. GRPO's 1/(G L) normaliser, NaN padding,
and verl's global normalisation (micro-batches and data-parallel ranks add up to the whole batch's loss)."""

import pytest
import torch
from algo_refs import BS, LENGTHS, T, close, mask, randn, ref_agg

from verl.core_algos import LOSS_AGG_MODES, agg_loss, loss_normalizer_counts, micro_batch_loss_weight

NAN = float("nan")


def _batch(seed: int = 3):
    m = mask(LENGTHS[:-1] + [0])  # the last row holds no response token
    return randn(BS, T, seed=seed), m


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_agg_loss_matches_loop_with_nan_padding(mode):
    loss, m = _batch()
    padded = torch.where(m > 0, loss, torch.full_like(loss, NAN))
    close(agg_loss(padded, m, mode), ref_agg(loss, m, mode))


def test_token_mean_is_finite_when_padding_holds_nan():
    loss = torch.tensor([[1.0, 2.0, NAN], [4.0, NAN, NAN]])
    m = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert agg_loss(loss, m, "token-mean").item() == pytest.approx(7.0 / 3)


def test_seq_mean_token_sum_norm_divides_by_sequences_and_horizon():
    # Dr. GRPO: (1 / G) sum_i sum_t l / L. Two sequences, L = 3: (6 + 4) / 2 / 3
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]], dtype=torch.float64)
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    close(agg_loss(loss, m, "seq-mean-token-sum-norm"), 10.0 / 2 / 3)
    close(agg_loss(loss, m, "seq-mean-token-sum-norm", loss_scale_factor=5), 10.0 / 2 / 5)


def test_seq_mean_token_sum_norm_loss_and_gradient_do_not_grow_with_the_batch():
    """The same responses twice over: a mean, so the loss and each token's gradient stay the same size; with the
    old normaliser (L alone) both doubled, and the gradient norm grew with the batch (against grad clipping)."""
    loss, m = _batch(seed=4)
    one = loss.clone().requires_grad_(True)
    agg_loss(one, m, "seq-mean-token-sum-norm").backward()
    two = torch.cat([loss, loss]).requires_grad_(True)
    value = agg_loss(two, torch.cat([m, m]), "seq-mean-token-sum-norm")
    value.backward()
    close(value, agg_loss(loss, m, "seq-mean-token-sum-norm"))
    close(two.grad[:BS] * 2, one.grad)  # each copy carries half the weight: the sum of gradients is unchanged
    close(one.grad, m / ((BS - 1) * T))  # 1 / (G L) on every response token (G = 7 sequences hold tokens)


def test_token_sum_scales_by_dp_size():
    loss, m = _batch(seed=5)
    close(agg_loss(loss, m, "token-sum", dp_size=4), 4 * ref_agg(loss, m, "token-sum"))


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("dp", [1, 2, 4])
def test_global_normalisation_adds_up_to_the_whole_batch(mode, dp):
    """Each rank aggregates its micro-batches with the whole batch's counts and dp_size; summing a rank's
    micro-batches and averaging ranks (what FSDP does to gradients) gives agg_loss of the whole batch."""
    loss, m = _batch(seed=6)
    counts = loss_normalizer_counts(m)
    kwargs = dict(dp_size=dp, batch_num_tokens=counts[0].item(), global_batch_size=counts[1].item())
    total = 0.0
    for rank_rows in torch.arange(BS).chunk(dp):
        total += sum(float(agg_loss(loss[mb], m[mb], mode, **kwargs)) for mb in rank_rows.split(1)) / dp
    assert total == pytest.approx(float(agg_loss(loss, m, mode)), rel=1e-12)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_micro_batch_weights_match_global_normalisation(mode):
    """Our workers' way (local aggregation times micro_batch_loss_weight) and verl's (global counts) agree."""
    loss, m = _batch(seed=7)
    counts = loss_normalizer_counts(m)
    for rows in torch.arange(BS).split(3):
        local = agg_loss(loss[rows], m[rows], mode) * micro_batch_loss_weight(m[rows], counts, mode)
        glob = agg_loss(loss[rows], m[rows], mode, batch_num_tokens=counts[0], global_batch_size=counts[1])
        close(local, glob, tol=1e-12)


def test_clear_errors():
    loss, m = _batch()
    with pytest.raises(ValueError, match="batch_num_tokens"):
        agg_loss(loss, m, "token-mean", dp_size=2)
    with pytest.raises(ValueError, match="global_batch_size"):
        agg_loss(loss, m, "seq-mean-token-mean", dp_size=2)
    with pytest.raises(ValueError, match="token-sum"):
        agg_loss(loss, m, "sum")
    with pytest.raises(ValueError, match="token-mean"):
        micro_batch_loss_weight(m, loss_normalizer_counts(m), "mean")
