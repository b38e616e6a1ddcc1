"""`DAPORewardManager`: the outcome score plus DAPO's soft overlong penalty, against the formula by hand."""

import pytest
from reward_batches import make_batch, tokenizer

from verl.workers.reward_manager import DAPORewardManager


@pytest.fixture(scope="module")
def tok():
    return tokenizer()


def test_overlong_penalty_is_added_and_logged(tok):
    texts = ["1", "1 2 3 4 5 6 7 8"]
    batch = make_batch(tok, texts, ["1", "1"])
    lengths = batch.batch["attention_mask"][:, 2:].sum(-1).tolist()
    max_len, buffer = lengths[1] + 2, 4  # the long response is 2 tokens into the 4-token buffer
    cfg = {"enable": True, "len": buffer, "penalty_factor": 1.0, "log": True}
    manager = DAPORewardManager(tok, 0, lambda *a, **k: 1.0, max_resp_len=max_len, overlong_buffer_cfg=cfg)
    out = manager(batch, return_dict=True)
    expected_penalty = min(0.0, -(lengths[1] - (max_len - buffer)) / buffer)
    assert expected_penalty == -0.5
    assert out["reward_tensor"].sum(-1).tolist() == [1.0, 0.5]
    assert out["reward_tensor"][1, lengths[1] - 1] == 0.5  # on the last generated token
    info = out["reward_extra_info"]
    assert info["acc"] == [1.0, 1.0] and info["overlong_reward"] == [0.0, -0.5] and info["overlong"] == [False, True]


def test_without_buffer_it_scores_like_naive_and_checks_its_settings(tok):
    batch = make_batch(tok, ["12", "7"], ["12", "8"])
    exact = lambda source, text, truth, extra=None: float(text.strip() == truth)  # noqa: E731
    out = DAPORewardManager(tok, 0, exact)(batch, return_dict=True)
    assert out["reward_tensor"].sum(-1).tolist() == [1.0, 0.0] and out["reward_extra_info"]["acc"] == [1.0, 0.0]
    with pytest.raises(ValueError, match="needs max_resp_len"):
        DAPORewardManager(tok, 0, overlong_buffer_cfg={"enable": True, "len": 4})
    with pytest.raises(ValueError, match="len=64 must be in \\(0, max_resp_len=32\\]"):
        DAPORewardManager(tok, 0, max_resp_len=32, overlong_buffer_cfg={"enable": True, "len": 64})
    failing = DAPORewardManager(tok, 0, lambda *a: 1 / 0, error_score=-1.0)
    with pytest.raises(ValueError, match="ZeroDivisionError"):
        failing(batch)
