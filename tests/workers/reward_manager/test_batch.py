"""`BatchRewardManager`: one call for the batch, per-row failures and a failing call under the shared rule."""

import math

import pytest
from reward_batches import make_batch, tokenizer

from verl.workers.reward_manager import BatchRewardManager


@pytest.fixture(scope="module")
def tok():
    return tokenizer()


def test_one_call_scores_every_row(tok):
    calls = []

    def score(data_sources, solution_strs, ground_truths, extra_infos, bonus=0.0):
        calls.append(len(solution_strs))
        return [{"score": float(s == t) + bonus, "exact": s == t} for s, t in zip(solution_strs, ground_truths)]

    batch = make_batch(tok, ["12", "7"], ["12", "8"])
    out = BatchRewardManager(tok, 0, score, bonus=0.5)(batch, return_dict=True)
    assert calls == [2]
    assert out["reward_tensor"].sum(-1).tolist() == [1.5, 0.5]
    assert out["reward_extra_info"]["exact"] == [True, False] and batch.batch["acc"].tolist() == [1.5, 0.5]


def test_failures_get_error_score_and_a_wrong_function_stops_the_first_batch(tok):
    batch = make_batch(tok, ["12", "7"], ["12", "8"])
    flaky = BatchRewardManager(tok, 0, lambda **kw: [1.0, None], error_score=-1.0)
    out = flaky(batch, return_dict=True)
    assert out["reward_tensor"].sum(-1).tolist() == [1.0, -1.0] and out["reward_extra_info"]["reward_errors"] == [1, 1]

    def down(**kw):
        raise ConnectionError("judge server down")

    with pytest.raises(ValueError, match="failed on all 2 samples of the first batch.*ConnectionError"):
        BatchRewardManager(tok, 0, down)(batch)
    flaky.compute_score = down  # after a good batch, a failing call only costs this batch
    assert flaky(batch).sum().item() == -2.0
    short = BatchRewardManager(tok, 0, lambda **kw: [1.0, 1.0])
    short(batch)
    short.compute_score = lambda **kw: [1.0]
    assert short(batch).sum().item() == 0.0 and "1 results for 2 responses" in short.guard.last_error
    assert not math.isnan(short(make_batch(tok, ["1"], ["1"])).sum().item())
    with pytest.raises(ValueError, match="needs a batch scoring function"):
        BatchRewardManager(tok, 0, None)
