"""Trajectories padded into the trainer's batch (the layout of HFRollout's batch call) and the step metrics read back
from the batch's columns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verl.experimental.agent_loop import AgentLoopOutput
from verl.experimental.agent_loop.batch_output import check_output, output_columns, outputs_to_tensors
from verl.experimental.agent_loop.metrics import agent_loop_metrics

PAD = 0


def trajectory(prompt, turns, **kw):
    """``turns``: [(ids, mask value)]."""
    ids = [t for part, _ in turns for t in part]
    mask = [m for part, m in turns for _ in part]
    logprobs = [-0.5 if m else 0.0 for m in mask]
    return AgentLoopOutput(prompt_ids=prompt, response_ids=ids, response_mask=mask, response_logprobs=logprobs, **kw)


def test_the_layout_of_the_batch_call():
    outs = [
        trajectory([5, 6, 7], [([11, 12], 1), ([21, 22, 23], 0), ([13], 1)], num_turns=4),
        trajectory([8], [([14], 1)], num_turns=2),
    ]
    b = outputs_to_tensors(outs, PAD, prompt_length=4, response_length=8)
    assert b["prompts"].tolist() == [[0, 5, 6, 7], [0, 0, 0, 8]]
    assert b["responses"].tolist() == [[11, 12, 21, 22, 23, 13, 0, 0], [14, 0, 0, 0, 0, 0, 0, 0]]
    assert b["response_mask"].tolist() == [[1, 1, 0, 0, 0, 1, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]]
    assert b["attention_mask"].tolist() == [[0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0], [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0]]
    assert b["input_ids"].tolist()[0] == [0, 5, 6, 7, 11, 12, 21, 22, 23, 13, 0, 0]
    assert b["position_ids"].tolist()[0][1:10] == list(range(9))  # real tokens count on across the turns
    assert b["rollout_log_probs"][0].tolist() == [-0.5, -0.5, 0, 0, 0, -0.5, 0, 0]
    assert b["rollout_log_probs"].dtype == torch.float32 and "rm_scores" not in b


def test_a_prompt_longer_than_prompt_length_widens_the_batch():
    b = outputs_to_tensors([trajectory([1, 2, 3], [([4], 1)])], PAD, prompt_length=2, response_length=2)
    assert b["prompts"].tolist() == [[1, 2, 3]]


def test_scores_the_loops_computed_land_on_the_last_model_token():
    outs = [
        trajectory([1], [([2, 3], 1), ([4, 5], 0)], reward_score=1.0),
        trajectory([1], [([2], 1)], reward_score=0.5),
    ]
    scores = outputs_to_tensors(outs, PAD, 1, 5)["rm_scores"]
    assert scores.tolist() == [[0, 1.0, 0, 0, 0], [0.5, 0, 0, 0, 0]]


def test_loops_without_log_probs_give_no_rollout_log_probs():
    out = AgentLoopOutput(prompt_ids=[1], response_ids=[2], response_mask=[1])
    assert "rollout_log_probs" not in outputs_to_tensors([out], PAD, 1, 2)


@pytest.mark.parametrize(
    "out,message",
    [
        (AgentLoopOutput(prompt_ids=[1], response_ids=[2, 3], response_mask=[1]), "2 response_ids but 1 response_mask"),
        (AgentLoopOutput(prompt_ids=[1], response_ids=[2], response_mask=[2]), "values other than 0 and 1"),
        (AgentLoopOutput(prompt_ids=[1], response_ids=[2] * 5, response_mask=[1] * 5), "more than .*response_length=4"),
        (AgentLoopOutput(prompt_ids=[], response_ids=[2], response_mask=[1]), "empty prompt_ids"),
        ({"prompt_ids": [1]}, "not an AgentLoopOutput"),
    ],
)
def test_malformed_trajectories_are_errors_naming_where(out, message):
    with pytest.raises((ValueError, TypeError), match=message):
        check_output(out, 4, "agent loop 'x' on row 3")


def test_columns_and_the_metrics_read_back_from_them():
    outs = [
        trajectory([1], [([2], 1)], num_turns=4, extra_fields={"finish_reason": "stop", "turn_scores": [1.0]}),
        trajectory([1], [([2], 1)], num_turns=2, extra_fields={"finish_reason": "length"}),
    ]
    tool = {"num_tool_calls": 3, "tool_errors": 1, "tool_errors/timeout": 1, "tool_runs": 3}
    tool.update(tool_latency_sum=0.6, tool_latency_max=0.4, assistant_turns=2, user_turns=1)
    metrics = [{"generate_sequences": 1.0, "tool_calls": 0.5, **tool}, {"generate_sequences": 2.0, "tool_calls": 0.0}]
    columns = output_columns(outs, metrics)
    assert columns["__num_turns__"].tolist() == [4, 2] and columns["__num_turns__"].dtype == np.int32
    assert columns["turn_scores"].tolist() == [[1.0], None]
    m = agent_loop_metrics(columns)
    assert m["num_turns/mean"] == 3 and m["num_turns/max"] == 4 and m["num_turns/min"] == 2
    assert m["agent_loop/generate_sequences/max"] == 2.0 and m["agent_loop/tool_calls/mean"] == 0.25
    assert m["agent_loop/num_tool_calls/mean"] == 1.5 and m["agent_loop/tool_errors/timeout"] == 1
    assert m["agent_loop/tool_error_rate"] == pytest.approx(1 / 3)
    assert m["agent_loop/tool_latency_s/mean"] == pytest.approx(0.2) and m["agent_loop/tool_latency_s/max"] == 0.4
    assert m["agent_loop/finish_reason/stop"] == 0.5 and m["agent_loop/finish_reason/length"] == 0.5


def test_a_batch_the_agent_loop_did_not_generate_has_no_agent_loop_metrics():
    assert agent_loop_metrics({"uid": np.array(["a"], dtype=object)}) == {}
