"""Scoring multi-turn trajectories: the scorer reads the whole transcript (model and tool turns), the outcome score
sits on the last model token (not on a tool turn after it, which GAE would skip), and the rollout's per-trajectory
values reach the scoring function in ``extra_info``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from reward_batches import make_batch, tokenizer

from verl.workers.reward_manager import get_reward_manager_cls
from verl.workers.reward_manager.scoring import response_lengths, sample_answer, score_positions

MODEL_TURN_1, TOOL_TURN, MODEL_TURN_2 = "<tool_call>x</tool_call>", "\ntool\n42\nassistant\n", "#### 42"


@pytest.fixture(scope="module")
def tok():
    return tokenizer()


def multi_turn_batch(tok, tail_tool_turn: bool = False):
    """One trajectory: model turn, tool turn, model turn (and optionally another tool turn after it)."""
    parts = [(MODEL_TURN_1, 1), (TOOL_TURN, 0), (MODEL_TURN_2, 1)] + ([(TOOL_TURN, 0)] if tail_tool_turn else [])
    text = "".join(p for p, _ in parts)
    batch = make_batch(tok, [text], ["42"])
    mask = [m for p, m in parts for _ in tok(p, add_special_tokens=False)["input_ids"]]
    width = batch.batch["responses"].shape[1]
    batch.batch["response_mask"] = torch.tensor([mask + [0] * (width - len(mask))])
    batch.non_tensor_batch["__num_turns__"] = np.array([4], dtype=np.int32)
    tool_rewards = np.empty(1, dtype=object)
    tool_rewards[0] = [0.25]
    batch.non_tensor_batch["tool_rewards"] = tool_rewards
    batch.non_tensor_batch["extra_info"] = np.array([{"index": 7}], dtype=object)
    return batch, mask


def test_the_scorer_reads_the_transcript_and_the_score_sits_on_the_last_model_token(tok):
    batch, mask = multi_turn_batch(tok, tail_tool_turn=True)
    assert int(response_lengths(batch)[0]) == len(mask)  # the whole response side, tool turns included
    last_model = max(i for i, m in enumerate(mask) if m)
    assert score_positions(batch).tolist() == [last_model]
    out = get_reward_manager_cls("naive")(tok, 0)(batch, return_dict=True)
    assert out["reward_tensor"][0].nonzero().flatten().tolist() == [last_model]
    assert out["reward_tensor"][0, last_model] == 1.0  # "#### 42" found in the transcript


def test_single_turn_rows_score_as_before(tok):
    batch = make_batch(tok, ["#### 3", "#### 12"], ["3", "1"])
    batch.batch["response_mask"] = batch.batch["attention_mask"][:, 2:].clone()
    lengths = batch.batch["response_mask"].sum(-1)
    assert score_positions(batch).tolist() == (lengths - 1).tolist()
    assert torch.equal(response_lengths(batch), lengths)


def test_extra_info_of_an_agent_loop_row_carries_what_the_rollout_knows(tok):
    batch, _ = multi_turn_batch(tok)
    _, _, extra = sample_answer(batch, 0, "data_source")
    assert extra == {"index": 7, "num_turns": 4, "rollout_reward_scores": {}, "tool_rewards": [0.25]}
    assert batch.non_tensor_batch["extra_info"][0] == {"index": 7}  # a copy: the batch's column is unchanged
