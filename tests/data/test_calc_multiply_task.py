"""The built-in tool task's rows: verl's RL columns plus agent_name, tools_kwargs and the multi-turn demonstration."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from verl.data import resolve_data_files
from verl.data.tasks import generate_task_rows, make_task_dataset, problem_key
from verl.data.tasks.calc_multiply import CALCULATOR_TOOL_SCHEMA
from verl.utils.reward_score import default_compute_score


def _factors(row) -> tuple[int, int]:
    a, star, b = row["extra_info"]["question"].removeprefix("What is ").removesuffix("?").split(" ")
    assert star == "*"
    return int(a), int(b)


def test_tool_row_exact():
    row = generate_task_rows("calc_multiply", "train", 1, seed=0)[0]
    a, b = _factors(row)
    product = str(a * b)
    question = f"What is {a} * {b}?"
    call = {"name": "calculator", "arguments": json.dumps({"expression": f"{a}*{b}"})}
    assert row == {
        "data_source": "calc_multiply",
        "prompt": [{"role": "user", "content": question}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": product},
        "extra_info": {
            "split": "train",
            "index": 0,
            "question": question,
            "answer": f"#### {product}",
            "need_tools_kwargs": True,
            "tools_kwargs": {"calculator": {"create_kwargs": {"ground_truth": product}}},
        },
        "agent_name": "tool_agent",
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]},
            {"role": "tool", "content": product},
            {"role": "assistant", "content": f"#### {product}"},
        ],
        "tools": [CALCULATOR_TOOL_SCHEMA],
    }


def test_default_factor_sizes_and_both_lengths_common():
    rows = generate_task_rows("calc_multiply", "train", 400, seed=1)
    a_digits = [len(str(_factors(r)[0])) for r in rows]
    b_digits = [len(str(_factors(r)[1])) for r in rows]
    assert set(a_digits) == {3, 4} and set(b_digits) == {2, 3}
    # the digit count is drawn first, so 3-digit first factors are about as common as 4-digit ones
    assert 0.4 < a_digits.count(3) / len(rows) < 0.6 and 0.4 < b_digits.count(2) / len(rows) < 0.6
    assert len({problem_key("calc_multiply", r) for r in rows}) == 400


def test_single_turn_variant_same_problems_no_tools():
    tool = generate_task_rows("calc_multiply", "test", 20, seed=0)
    plain = generate_task_rows("calc_multiply", "test", 20, seed=0, agent_name="single_turn_agent")
    assert [problem_key("calc_multiply", r) for r in tool] == [problem_key("calc_multiply", r) for r in plain]
    for row in plain:
        assert row["agent_name"] == "single_turn_agent" and row["tools"] == []
        assert row["messages"] == [row["prompt"][0], {"role": "assistant", "content": row["extra_info"]["answer"]}]
        assert "tools_kwargs" not in row["extra_info"] and row["extra_info"]["need_tools_kwargs"] is False


def test_direct_demonstration_offers_the_tool_and_answers_without_it():
    call = generate_task_rows("calc_multiply", "train", 20, seed=0)
    direct = generate_task_rows("calc_multiply", "train", 20, seed=0, demonstration="direct")
    for c, d in zip(call, direct, strict=True):
        assert d["messages"] == [d["prompt"][0], {"role": "assistant", "content": d["extra_info"]["answer"]}]
        assert d["tools"] == [CALCULATOR_TOOL_SCHEMA] and d["agent_name"] == "tool_agent"
        # the RL columns are the call rows': only the SFT demonstration differs
        assert {k: v for k, v in d.items() if k != "messages"} == {k: v for k, v in c.items() if k != "messages"}
    with pytest.raises(ValueError, match="demonstration must be one of"):
        generate_task_rows("calc_multiply", "train", 1, demonstration="guess")
    with pytest.raises(ValueError, match="demonstration=direct is for agent_name=tool_agent"):
        generate_task_rows("calc_multiply", "train", 1, demonstration="direct", agent_name="single_turn_agent")


def test_small_space_listed_split_disjoint_and_errors():
    kwargs = dict(a_min_digits=1, a_max_digits=1, b_min_digits=1, b_max_digits=1)
    train = generate_task_rows("calc_multiply", "train", 80, seed=0, **kwargs)
    test = generate_task_rows("calc_multiply", "test", 5, seed=0, **kwargs)
    assert not {problem_key("calc_multiply", r) for r in train} & {problem_key("calc_multiply", r) for r in test}
    with pytest.raises(ValueError, match="has only 100 distinct problems"):
        generate_task_rows("calc_multiply", "train", 100, seed=0, **kwargs)
    with pytest.raises(ValueError, match="agent_name must be one of"):
        generate_task_rows("calc_multiply", "train", 1, agent_name="react")
    with pytest.raises(ValueError, match=r"b_max_digits \(2\) must be >= b_min_digits \(3\)"):
        generate_task_rows("calc_multiply", "train", 1, b_min_digits=3, b_max_digits=2)


def test_parquet_roundtrip_and_builtin_spec(tmp_path):
    paths = make_task_dataset("calc_multiply", tmp_path, train_size=30, test_size=10, seed=0)
    rows = pq.read_table(paths["train"]).to_pylist()
    assert (
        rows[0]["extra_info"]["tools_kwargs"]["calculator"]["create_kwargs"]["ground_truth"]
        == rows[0]["reward_model"]["ground_truth"]
    )
    assert rows[0]["messages"][1]["tool_calls"][0]["function"]["name"] == "calculator"
    for row in rows:  # the reference answer and the demonstration's last turn score 1
        truth = row["reward_model"]["ground_truth"]
        assert default_compute_score(row["data_source"], row["extra_info"]["answer"], truth) == 1.0
        assert default_compute_score(row["data_source"], row["messages"][-1]["content"], truth) == 1.0
    spec = "builtin://calc_multiply/test?size=10&agent_name=single_turn_agent"
    assert pq.read_table(resolve_data_files(spec)).column("agent_name").to_pylist() == ["single_turn_agent"] * 10
