"""verl.core_algos.gdpo: each reward component normalised within its group, weighted, summed and whitened, against
a float64 loop; and the errors that name the missing config key or column."""

import numpy as np
import pytest
from algo_refs import BS, UIDS, T, algorithm, broadcast, close, mask, randn, ref_grpo_scalars, ref_whiten

from verl.core_algos import compute_gdpo_outcome_advantage, get_adv_estimator_fn

INDEX = np.array(UIDS[:-1] + ["solo"], dtype=object)


def _columns():
    gen = np.random.default_rng(0)
    return {"uid": INDEX, "acc": gen.integers(0, 2, BS).astype(float), "fmt": gen.normal(size=BS) * 10}


@pytest.mark.parametrize("norm", [True, False])
def test_gdpo_matches_loop(norm):
    m = mask()
    cols = _columns()
    config = algorithm(gdpo_reward_keys=["acc", "fmt"], gdpo_reward_weights=[1.0, 0.5])
    adv, ret = compute_gdpo_outcome_advantage(
        randn(BS, T, seed=1) * m, m, INDEX, norm_adv_by_std_in_grpo=norm, config=config, non_tensor_batch=cols
    )
    acc = ref_grpo_scalars(list(cols["acc"]), INDEX, 1e-6, norm)
    fmt = ref_grpo_scalars(list(cols["fmt"]), INDEX, 1e-6, norm)
    expected = ref_whiten(broadcast([a + 0.5 * f for a, f in zip(acc, fmt)], m), m)
    close(adv, expected)
    close(ret, expected)


def test_gdpo_decouples_a_dominant_component():
    """A component with a 1000x spread does not drown the other: once each is normalised, passing the small check
    is worth as much advantage as passing the big one (summed first, as in GRPO, it would be worth 0.1%)."""
    m = mask([T] * BS)
    cols = {"big": np.array([0.0, 1000.0] * 4), "small": np.array([1.0, 1.0, 0.0, 0.0] * 2)}
    index = np.array(["p"] * BS, dtype=object)
    adv, _ = compute_gdpo_outcome_advantage(
        randn(BS, T) * m, m, index, config=algorithm(gdpo_reward_keys=["big", "small"]), non_tensor_batch=cols
    )
    neither, small_only, big_only = adv[2, 0], adv[0, 0], adv[3, 0]
    close(small_only - neither, big_only - neither, tol=1e-4)
    assert small_only > neither


def test_gdpo_without_components_is_whitened_grpo():
    m = mask()
    rewards = randn(BS, T, seed=2) * m
    scores = [float(rewards[i].sum()) for i in range(BS)]
    adv, _ = get_adv_estimator_fn("gdpo")(token_level_rewards=rewards, response_mask=m, index=INDEX)
    close(adv, ref_whiten(broadcast(ref_grpo_scalars(scores, INDEX), m), m))


def test_gdpo_errors_name_the_fix():
    m = mask()
    r = randn(BS, T) * m
    cols = _columns()
    with pytest.raises(ValueError, match="gdpo_reward_keys"):  # the trainer passes both: the keys are required
        compute_gdpo_outcome_advantage(r, m, INDEX, config=algorithm(), non_tensor_batch=cols)
    with pytest.raises(KeyError, match="'missing'.*acc"):
        compute_gdpo_outcome_advantage(
            r, m, INDEX, config=algorithm(gdpo_reward_keys=["missing"]), non_tensor_batch=cols
        )
    with pytest.raises(ValueError, match="one weight per key"):
        config = algorithm(gdpo_reward_keys=["acc", "fmt"], gdpo_reward_weights=[1.0])
        compute_gdpo_outcome_advantage(r, m, INDEX, config=config, non_tensor_batch=cols)
