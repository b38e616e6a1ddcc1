"""All-empty responses (EOS as the first token) must score, train and log without NaN."""

import math

import numpy as np
import torch

from verl.protocol import DataProto
from verl.trainer.ppo import core_algos
from verl.utils.config import load_config
from verl.utils.model import load_causal_lm, load_tokenizer
from verl.workers.actor.dp_actor import DataParallelPPOActor
from verl.workers.reward_manager import NaiveRewardManager

MODEL = "builtin://tiny-qwen2-arith-sft"


def empty_batch(tok, bs=4, prompt_len=6, response_len=5) -> DataProto:
    prompts = torch.randint(10, 200, (bs, prompt_len))
    responses = torch.full((bs, response_len), tok.pad_token_id)
    responses[:, 0] = tok.eos_token_id
    response_mask = torch.zeros(bs, response_len, dtype=torch.long)  # nothing generated before EOS was cut
    attention_mask = torch.cat([torch.ones(bs, prompt_len, dtype=torch.long), response_mask], dim=1)
    return DataProto.from_dict(
        {
            "prompts": prompts,
            "responses": responses,
            "response_mask": response_mask,
            "input_ids": torch.cat([prompts, responses], 1),
            "attention_mask": attention_mask,
            "position_ids": torch.arange(prompt_len + response_len).expand(bs, -1).clone(),
        },
        {
            "data_source": np.array(["arithmetic"] * bs, dtype=object),
            "reward_model": np.array([{"ground_truth": "3"}] * bs, dtype=object),
            "uid": np.array(["a", "a", "b", "b"], dtype=object),
        },
    )


def test_empty_responses_score_and_update_without_nan():
    tok = load_tokenizer(MODEL)
    batch = empty_batch(tok)
    rewards = NaiveRewardManager(tok)(batch)
    assert rewards.shape == batch.batch["responses"].shape and torch.isfinite(rewards).all()
    adv, _ = core_algos.compute_grpo_outcome_advantage(
        rewards, batch.batch["response_mask"], batch.non_tensor_batch["uid"]
    )
    assert torch.isfinite(adv).all() and (adv == 0).all()

    cfg = load_config("ppo_trainer", ["actor_rollout_ref.actor.ppo_mini_batch_size=4"]).actor_rollout_ref.actor
    model = load_causal_lm(MODEL)
    before = {k: v.clone() for k, v in model.named_parameters()}
    actor = DataParallelPPOActor(cfg, model, torch.optim.AdamW(model.parameters(), lr=1e-3))
    log_probs, entropy = actor.compute_log_prob(batch, calculate_entropy=True)
    batch.batch["old_log_probs"], batch.batch["advantages"] = log_probs, adv
    metrics = actor.update_policy(batch)
    assert all(math.isfinite(v) for vals in metrics.values() for v in vals)
    # no response tokens: the policy-gradient loss has nothing to push on
    assert metrics["actor/pg_loss"] == [0.0]
    for k, v in model.named_parameters():
        assert torch.isfinite(v).all(), k
    assert before.keys() == dict(model.named_parameters()).keys()
