"""The two promises of token-in-token-out training, on the shipped tiny model with real generation and tool turns
between its turns (every model turn is read as a call of ``echo``):

- THE MASK: the policy loss (with its KL and entropy terms) has zero gradient with respect to the logits at the
  positions of tool-output tokens, and a nonzero one at the model's own tokens;
- NO DRIFT: the actor's log-probs recomputed on the stored trajectory equal the sampler's ``rollout_log_probs`` at
  every model token, within fp32 tolerance (``DRIFT_TOL``), on both of the actor's forward paths.
"""

from __future__ import annotations

import random

import pytest
import torch
from agent_loop_helpers import actor_group, job_config, prompt_batch

from verl.experimental.agent_loop import AgentLoopManager

# fp32 on CPU: the sampler (KV-cache prefill and decode of left-padded request batches) and the actor (one pass over
# the padded batch) round differently. Measured on these trajectories: max |rollout - actor| 7.7e-5, mean 2e-6; an
# fp64 recomputation is within 6.5e-5 of the rollout's and 3.6e-5 of the actor's: fp32 rounding of this model's
# logits, not a difference of context (one wrong token of context moves log-probs by ~1e-1).
DRIFT_TOL = 1e-4  # per token, max
DRIFT_MEAN_TOL = 1e-5  # mean over the model's tokens


OVERRIDES = (
    "actor_rollout_ref.rollout.agent.default_agent_loop=test_echo_agent",
    "actor_rollout_ref.rollout.multi_turn.format=test_every_turn_calls_echo",
    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3",
    "actor_rollout_ref.rollout.response_length=96",
    "data.max_response_length=96",
    "actor_rollout_ref.rollout.temperature=0.8",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.actor.entropy_coeff=0.01",
    "actor_rollout_ref.actor.use_kl_loss=true",
)


def trajectories(use_remove_padding: bool):
    config = job_config(*OVERRIDES, f"actor_rollout_ref.model.use_remove_padding={use_remove_padding}")
    group = actor_group(config)
    manager = AgentLoopManager(config, group, server_handles=[group], tokenizer=group.tokenizer)
    random.seed(0)
    out = manager.generate_sequences(prompt_batch(group.tokenizer, 4))
    return group, out


@pytest.fixture(scope="module")
def padded():
    return trajectories(use_remove_padding=False)


def tool_positions_between_model_turns(out) -> torch.Tensor:
    """(bs, R) True at tool-turn tokens that have model tokens after them."""
    mask = out.batch["response_mask"].bool()
    later_model = torch.flip(torch.cummax(torch.flip(mask.int(), [1]), dim=1).values, [1]).bool()
    side = out.batch["attention_mask"][:, out.batch["prompts"].shape[1] :].bool()
    return side & ~mask & later_model


def test_the_trajectories_have_tool_turns_between_model_turns(padded):
    _, out = padded
    assert tool_positions_between_model_turns(out).any(dim=1).all()
    assert out.non_tensor_batch["__num_turns__"].min() >= 4


@pytest.mark.parametrize("use_remove_padding", [False, True])
def test_no_drift_the_actor_recomputes_the_rollout_log_probs(padded, use_remove_padding):
    group, out = padded if not use_remove_padding else trajectories(use_remove_padding=True)
    recomputed = group.compute_log_prob(out).batch["old_log_probs"]
    mask = out.batch["response_mask"].bool()
    diff = (recomputed - out.batch["rollout_log_probs"])[mask].abs()
    assert mask.sum() > 40
    assert diff.max().item() <= DRIFT_TOL and diff.mean().item() <= DRIFT_MEAN_TOL, (diff.max(), diff.mean())
    reference = fp64_log_probs(group.actor_module, out)  # the same tokens scored in float64
    assert (out.batch["rollout_log_probs"] - reference)[mask].abs().max() <= DRIFT_TOL


def test_the_check_sees_a_context_that_is_not_the_sampled_one(padded):
    """Sensitivity: re-tokenizing the tool turns without the newline after the model's stop token (what appending
    verl's rendering of the tool message alone gives) moves the next turn's log-probs far beyond the tolerance."""
    group, out = padded
    bridge = group.tokenizer("\n", add_special_tokens=False)["input_ids"]
    row, mask = 0, out.batch["response_mask"][0]
    first_tool = int((mask == 0).nonzero()[0])
    assert out.batch["responses"][row, first_tool].tolist() == bridge[0]  # the bridge opens the tool turn
    shifted = out.select(deepcopy=True)
    keep = [i for i in range(shifted.batch["responses"].shape[1]) if i != first_tool] + [first_tool]
    for key in ("responses", "response_mask", "rollout_log_probs"):
        shifted.batch[key] = shifted.batch[key][:, keep]
    width = shifted.batch["prompts"].shape[1]
    shifted.batch["input_ids"] = torch.cat([shifted.batch["prompts"], shifted.batch["responses"]], dim=1)
    side = out.batch["attention_mask"][:, width:].clone()
    side[row] = torch.cat([side[row, keep[:-1]], torch.zeros(1, dtype=side.dtype)])
    shifted.batch["attention_mask"] = torch.cat([out.batch["attention_mask"][:, :width], side], dim=1)
    recomputed = group.compute_log_prob(shifted).batch["old_log_probs"][row]
    later = shifted.batch["response_mask"][row].bool()
    later[:first_tool] = False
    assert (recomputed - shifted.batch["rollout_log_probs"][row])[later].abs().max() > 100 * DRIFT_TOL


def fp64_log_probs(module, out) -> torch.Tensor:
    """(bs, R) log-probs of the response tokens, each trajectory alone and unpadded, in float64."""
    import copy

    model = copy.deepcopy(module).double().eval()
    b, width = out.batch, out.batch["prompts"].shape[1]
    result = torch.zeros(b["responses"].shape, dtype=torch.float64)
    for row in range(len(out)):
        real = b["attention_mask"][row].bool()
        prompt_len, n = int(real[:width].sum()), int(real[width:].sum())
        with torch.no_grad():
            logits = model(input_ids=b["input_ids"][row][real].unsqueeze(0)).logits[0] / 0.8
        logp = torch.log_softmax(logits[prompt_len - 1 : prompt_len - 1 + n], dim=-1)
        result[row, :n] = logp.gather(-1, b["responses"][row, :n, None]).squeeze(-1)
    return result.float()


def test_the_mask_zero_gradient_at_tool_outputs_nonzero_at_model_tokens(padded):
    group, out = padded
    batch = out.select(deepcopy=True)
    old = group.compute_log_prob(batch).batch["old_log_probs"]
    mask = batch.batch["response_mask"]
    batch.batch["old_log_probs"] = old
    batch.batch["ref_log_prob"] = old + 0.05 * torch.randn(old.shape, generator=torch.Generator().manual_seed(1))
    # advantages nonzero everywhere, tool positions too: only the mask may zero their gradient
    batch.batch["advantages"] = torch.randn(old.shape, generator=torch.Generator().manual_seed(2)) + 3.0
    batch.meta_info.update(temperature=0.8, rollout_n=1, global_steps=1)
    captured = []

    def keep_logits(module, inputs, output):
        output.retain_grad()
        captured.append(output)

    hook = group.actor_module.lm_head.register_forward_hook(keep_logits)
    try:
        group.actor.update_policy(batch)
    finally:
        hook.remove()
    logits = captured[-1]  # (bs, R + 1, V): the lm_head ran on the positions predicting the response tokens
    per_token = logits.grad[:, :-1].norm(dim=-1)  # position j predicts response token j
    tools = tool_positions_between_model_turns(out)
    assert torch.count_nonzero(per_token[tools]) == 0  # exactly zero: the loss never sees tool output
    assert (per_token[mask.bool()] > 0).all()
    side = out.batch["attention_mask"][:, out.batch["prompts"].shape[1] :].bool()
    assert torch.count_nonzero(per_token[~side]) == 0  # padding too
