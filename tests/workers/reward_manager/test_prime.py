"""`PrimeRewardManager`: scoring in worker processes; a hung check is cut at the deadline, a crash is one sample."""

import time

import pytest
from reward_batches import make_batch, tokenizer

from verl.workers.reward_manager import PrimeRewardManager
from verl.workers.reward_manager.prime import run_reward_scoring


def check(data_source, solution_str, ground_truth, extra_info=None):
    """A module-level scorer (it crosses to the worker processes): hangs on "loop", crashes on "crash"."""
    if solution_str.strip() == "loop":
        time.sleep(60)
    if solution_str.strip() == "crash":
        raise RuntimeError("checker crashed")
    return (float(solution_str.strip() == ground_truth), {"detail": "tuple results: the first item is the score"})


@pytest.fixture(scope="module")
def tok():
    return tokenizer()


@pytest.mark.slow
def test_hung_and_crashing_checks_cost_one_sample_each(tok):
    batch = make_batch(tok, ["12", "loop", "crash", "7"], ["12", "1", "1", "8"])
    manager = PrimeRewardManager(tok, 0, check, error_score=-1.0, num_processes=4, timeout=5.0)
    start = time.monotonic()
    out = manager(batch, return_dict=True)
    assert time.monotonic() - start < 30  # the hung check did not hold the batch for its 60 s
    assert out["reward_tensor"].sum(-1).tolist() == [1.0, -1.0, -1.0, 0.0]
    assert out["reward_extra_info"]["reward_errors"] == [2] * 4 and batch.batch["acc"].tolist()[0] == 1.0


def test_a_function_that_cannot_cross_processes_runs_in_place():
    results = run_reward_scoring(lambda task, c, r, e: c == r, ["a", "b"], ["a", "a"], ["t", "t"], timeout=1.0)
    assert results == [True, False]
