"""`NaiveRewardManager`: outcome score on the last valid token, a failing sample gets error_score without dropping
the batch's extra columns, and a missing data_source column is one clear error."""

import math

import numpy as np
import pytest
import torch

from verl.protocol import DataProto
from verl.utils.model import load_tokenizer
from verl.workers.reward_manager import NaiveRewardManager

MODEL = "builtin://tiny-qwen2-arith-sft"


def _batch(tok, texts, lengths, non_tensor):
    R = max(lengths) + 1
    responses = torch.full((len(texts), R), tok.pad_token_id)
    mask = torch.zeros(len(texts), R, dtype=torch.long)
    for i, (text, n) in enumerate(zip(texts, lengths)):
        ids = tok(text, add_special_tokens=False)["input_ids"][:n]
        responses[i, : len(ids)] = torch.tensor(ids)
        mask[i, : len(ids)] = 1
    return DataProto.from_dict({"responses": responses, "response_mask": mask}, non_tensor)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(MODEL)


def test_a_failing_sample_keeps_the_extra_columns_with_nan(tok):
    def score(data_source, solution_str, ground_truth, extra_info=None):
        if solution_str.startswith("boom"):
            raise RuntimeError("bad sample")
        return {"score": 1.0, "acc": True}

    batch = _batch(tok, ["12", "boom", "7"], [2, 4, 1], {"data_source": np.array(["x"] * 3, dtype=object)})
    out = NaiveRewardManager(tok, compute_score=score, error_score=-1.0)(batch, return_dict=True)
    rewards, extra = out["reward_tensor"], out["reward_extra_info"]
    assert rewards[0, 1] == 1.0 and rewards[1, 3] == -1.0 and rewards[2, 0] == 1.0  # last valid token
    assert rewards.sum().item() == 1.0
    assert extra["acc"][0] is True and math.isnan(extra["acc"][1]) and extra["acc"][2] is True
    assert extra["reward_errors"] == [1, 1, 1]


def test_missing_reward_fn_key_column_is_one_clear_error(tok):
    batch = _batch(tok, ["12"], [2], {"task": np.array(["arithmetic"], dtype=object)})
    with pytest.raises(KeyError, match=r"data.reward_fn_key='data_source'.*columns: \['task'\]"):
        NaiveRewardManager(tok)(batch)
    # a custom scorer may not need the column: it still runs, with data_source "unknown"
    seen = []
    NaiveRewardManager(tok, compute_score=lambda src, *a, **k: seen.append(src) or 0.5)(batch)
    assert seen == ["unknown"]


def test_a_function_that_fails_on_every_sample_from_the_start_stops_the_run(tok):
    batch = _batch(tok, ["12", "7"], [2, 1], {"data_source": np.array(["x"] * 2, dtype=object)})

    def wrong_signature(solution_str, ground_truth):
        return 1.0

    with pytest.raises(ValueError, match="failed on all 2 samples of the first batch.*TypeError"):
        NaiveRewardManager(tok, compute_score=wrong_signature)(batch)
    # after one batch with a success, a batch where every call fails is tolerated (a long run goes on)
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("service down")
        return 1.0

    manager = NaiveRewardManager(tok, compute_score=flaky, error_score=-1.0)
    manager(batch)
    assert manager(batch).sum().item() == -2.0


def test_json_encoded_reward_model_column_is_read(tok):
    import json

    seen = []
    batch = _batch(
        tok,
        ["12"],
        [2],
        {
            "data_source": np.array(["x"], dtype=object),
            "reward_model": np.array([json.dumps({"ground_truth": "12"})], dtype=object),
        },
    )
    NaiveRewardManager(tok, compute_score=lambda src, sol, gt, extra=None: seen.append(gt) or 1.0)(batch)
    assert seen == ["12"]


def test_custom_reward_file_with_dataclasses_and_a_neighbour_module(tmp_path):
    from verl.workers.reward_manager import load_custom_reward_function

    (tmp_path / "helper_mod.py").write_text("BONUS = 0.5\n")
    (tmp_path / "my_reward.py").write_text(
        "from __future__ import annotations\n"
        "from dataclasses import dataclass\n"
        "from helper_mod import BONUS\n"
        "@dataclass\n"
        "class Cfg:\n"
        "    bonus: float = BONUS\n"
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return Cfg().bonus\n"
    )
    fn = load_custom_reward_function(str(tmp_path / "my_reward.py"))
    assert fn("x", "y", "z") == 0.5
    with pytest.raises(FileNotFoundError, match="is a directory"):
        load_custom_reward_function(str(tmp_path))
    (tmp_path / "broken.py").write_text("def compute_score(:\n")
    with pytest.raises(ImportError, match="broken.py.*SyntaxError"):
        load_custom_reward_function(str(tmp_path / "broken.py"))
    with pytest.raises(ValueError, match="has no function 'score'"):
        load_custom_reward_function(str(tmp_path / "my_reward.py"), "score")


def test_num_workers_scores_in_threads_with_the_same_results_in_order(tok):
    """Scorers that wait (here: sleep, as a sandboxed program or a server does) overlap; scores keep their rows."""
    import threading
    import time

    seen = set()

    def score(data_source, solution_str, ground_truth, extra_info=None):
        seen.add(threading.get_ident())
        time.sleep(0.05)
        if solution_str == "9":
            raise RuntimeError("bad sample")
        return float(solution_str == ground_truth)

    texts = ["1", "2", "3", "4", "9", "6"]
    nt = {"data_source": np.array(["x"] * 6, dtype=object), "reward_model": np.array(
        [{"ground_truth": g} for g in ["1", "0", "3", "0", "9", "6"]], dtype=object)}  # fmt: skip
    batch = _batch(tok, texts, [1] * 6, nt)
    serial = NaiveRewardManager(tok, compute_score=score, error_score=-1.0)(batch)
    seen.clear()
    parallel = NaiveRewardManager(tok, compute_score=score, error_score=-1.0, num_workers=3)(batch)
    assert torch.equal(serial, parallel) and len(seen) == 3
    assert parallel[:, 0].tolist() == [1.0, 0.0, 1.0, 0.0, -1.0, 1.0]
    with pytest.raises(ValueError, match="num_workers must be >= 1"):
        NaiveRewardManager(tok, compute_score=score, num_workers=0)


def test_a_prompts_code_samples_are_judged_together_with_the_scores_of_one_by_one(tok, monkeypatch):
    """The default scorer sends the responses that share a code data source and ground truth (a prompt's rollout.n
    samples) to the group scorer: one sandbox run per prompt, the same scores as one call per response."""
    from verl.sandbox import bwrap_status
    from verl.utils.reward_score import default_compute_score, prime_code

    if bwrap_status() is not None:
        pytest.skip(f"no bubblewrap here: {bwrap_status()}")
    runs = []
    real = prime_code.run_test_cases_many

    def counting(codes, *args, **kwargs):  # the real judge, counted
        runs.append(len(codes))
        return real(codes, *args, **kwargs)

    monkeypatch.setattr(prime_code, "run_test_cases_many", counting)
    plus_one = '{"fn_name": "f", "inputs": [[1], [2]], "outputs": [2, 3]}'
    double = '{"fn_name": "f", "inputs": [[1], [2]], "outputs": [2, 4]}'
    texts = ["def f(x):\n    return x + 1", "def f(x):\n    return 2 * x", "def f(:"] * 2
    truths = [plus_one, double, plus_one, double, plus_one, double]
    nt = {"data_source": np.array(["code_functions"] * 6, dtype=object),
          "reward_model": np.array([{"ground_truth": g} for g in truths], dtype=object)}  # fmt: skip
    batch = _batch(tok, texts, [60] * 6, nt)
    grouped = NaiveRewardManager(tok, num_workers=2)(batch, return_dict=True)
    assert sorted(runs) == [3, 3]  # two prompts, three samples each
    one_by_one = NaiveRewardManager(tok, compute_score=lambda *a, **k: default_compute_score(*a, **k))(batch)
    assert runs[2:] == [1] * 6  # one call per response
    assert torch.equal(grouped["reward_tensor"], one_by_one)
    assert grouped["reward_tensor"].sum(-1).tolist() == [1.0, 1.0, 0.0, 0.5, 0.5, 0.0]
    assert grouped["reward_extra_info"]["compile_error"] == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]
