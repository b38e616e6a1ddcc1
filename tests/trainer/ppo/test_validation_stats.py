"""verl's validation statistics against hand computations and against a float64 bootstrap reference."""

import numpy as np
import pytest

from verl.trainer.ppo.metric_utils import bootstrap_metric, calc_maj_val, process_validation_metrics


def test_bootstrap_matches_a_direct_resampling_and_leaves_the_global_rng_alone():
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    data = [0.0, 1.0, 1.0, 0.0, 1.0]
    [(best_mean, best_std)] = bootstrap_metric(data, 2, [np.max], n_bootstrap=200, seed=7)
    draws = np.random.RandomState(7).choice(5, size=(200, 2), replace=True)
    ref = np.array([max(data[i] for i in row) for row in draws], dtype=np.float64)
    assert (best_mean, best_std) == (ref.mean(), ref.std())
    assert np.array_equal(np.random.get_state()[1], before)
    with pytest.raises(ValueError, match="data is empty"):
        bootstrap_metric([], 1, [np.mean])


def test_majority_vote_takes_the_first_value_of_the_most_frequent_answer():
    votes = [{"pred": "4", "ok": 1.0}, {"pred": "5", "ok": 0.0}, {"pred": "5", "ok": 0.5}]
    assert calc_maj_val(votes, "pred", "ok") == 0.0
    assert calc_maj_val(votes[:2], "pred", "ok") == 1.0  # a tie: the answer seen first


def test_per_prompt_statistics_averaged_over_a_sources_prompts():
    sources = ["math"] * 4 + ["gsm8k"]
    uids = ["p1", "p1", "p2", "p2", "q1"]
    infos = {"score": [1.0, 0.0, 1.0, 1.0, 0.0], "pred": ["a", "b", "c", "c", "d"]}
    out = process_validation_metrics(sources, uids, infos, seed=0)
    math_score = out["math"]["score"]
    assert math_score["mean@2"] == 0.75 and math_score["std@2"] == 0.25  # (0.5 + 1) / 2 and (0.5 + 0) / 2
    assert set(math_score) >= {"best@2/mean", "worst@2/std", "maj@2/mean"} and "pred" not in out["math"]
    assert out["gsm8k"] == {"score": {"mean@1": 0.0}}
    assert 0.75 <= math_score["best@2/mean"] <= 1.0 and 0.25 <= math_score["worst@2/mean"] <= 0.75
    with pytest.raises(ValueError, match="infos_dict\\['score'\\] has 1 values, not 5"):
        process_validation_metrics(sources, uids, {"score": [1.0]})
