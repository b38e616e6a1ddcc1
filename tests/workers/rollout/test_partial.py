"""Partial rollout on the HF sampler (`verl.workers.rollout.partial`): generation cut at response positions and
resumed from the kept tokens gives the tokens of one uncut call; under other weights the kept part stays as it was
and only the rest changes."""

from __future__ import annotations

import copy

import pytest
import torch
from rollout_helpers import make_prompts

from verl.utils.model import ASSETS_DIR, load_causal_lm, load_tokenizer
from verl.workers.rollout import HFRollout
from verl.workers.rollout.partial import PartialRound, partial_prefix, unfinished_rows

SHIPPED = f"{ASSETS_DIR}/tiny-qwen2-arith-sft"
QUESTIONS = ["What is 37 + 48?", "What is 5 + 7?", "Please, what is 12 + 99?", "What is 60 + 21?"] * 3


@pytest.fixture(scope="module")
def shipped():
    return load_causal_lm(SHIPPED), load_tokenizer(SHIPPED)


def engine(model, tokenizer, retire=True):
    config = {"response_length": 24, "do_sample": True}
    return HFRollout(model, config, tokenizer.pad_token_id, tokenizer.eos_token_id, 7, retire_finished=retire)


def prompts_of(tokenizer):
    prompts = make_prompts(tokenizer, QUESTIONS)
    prompts.batch["sample_index"] = torch.arange(len(QUESTIONS))
    return prompts


def in_segments(rollout, prompts, cuts, versions=None):
    rnd = PartialRound(prompts, 24)
    for i, stop in enumerate([*cuts, None]):
        if rnd.done:
            break
        model = versions[i] if versions else None
        if model is not None:
            rollout.module = model
        rnd.absorb(rollout.generate_sequences(rnd.next_segment(stop)), i)
    return rnd.result()


@pytest.mark.parametrize("retire", [True, False])
@pytest.mark.parametrize("cuts", [[3], [1, 2, 5], [4, 9]])
def test_cut_and_resumed_with_the_same_weights_gives_the_uncut_tokens(shipped, retire, cuts):
    model, tokenizer = shipped
    whole = engine(model, tokenizer, retire).generate_sequences(prompts_of(tokenizer)).batch
    rollout = engine(model, tokenizer, retire)
    out, (first, last) = in_segments(rollout, prompts_of(tokenizer), cuts)
    for key in ("responses", "response_mask", "input_ids", "attention_mask", "position_ids", "prompts"):
        assert torch.equal(out.batch[key], whole[key]), key
    # the prefill of the kept tokens and the step-by-step decode sum in another order: float rounding only
    torch.testing.assert_close(out.batch["rollout_log_probs"], whole["rollout_log_probs"], rtol=0, atol=1e-4)
    assert rollout.calls == 1  # the resumes reuse the first segment's sampling call
    assert first.tolist() == [0] * len(QUESTIONS)
    lengths = whole["response_mask"].sum(-1)
    # a row's last segment is the one it finished in
    assert all(last[i] <= len(cuts) for i in range(len(QUESTIONS))) and (lengths > cuts[0]).any()


def test_resumed_under_new_weights_keeps_the_prefix_and_samples_the_rest_with_them(shipped):
    model, tokenizer = shipped
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * torch.randn_like(p))
    rollout = engine(model, tokenizer)
    out, (first, last) = in_segments(rollout, prompts_of(tokenizer), [3], versions=[model, other])
    old = engine(model, tokenizer).generate_sequences(prompts_of(tokenizer)).batch
    new = engine(other, tokenizer).generate_sequences(prompts_of(tokenizer)).batch
    assert torch.equal(out.batch["responses"][:, :3], old["responses"][:, :3])
    assert not torch.equal(out.batch["responses"][:, 3:], old["responses"][:, 3:])
    assert (last == 1).any() and set(last.tolist()) <= {0, 1}
    # each kept token's log-prob is its sampler's: the old weights' for the first 3
    torch.testing.assert_close(
        out.batch["rollout_log_probs"][:, :3], old["rollout_log_probs"][:, :3], atol=1e-4, rtol=0
    )
    assert not torch.equal(new["responses"], old["responses"])


def test_unfinished_rows_and_bad_prefixes_are_named():
    responses = torch.tensor([[5, 2, 0], [5, 6, 7], [5, 6, 0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 0]])
    assert unfinished_rows(responses, mask, 2, [2]).tolist() == [False, True, True]
    assert unfinished_rows(responses, mask, 3, [2]).tolist() == [False, False, False]  # no room left
    assert unfinished_rows(responses, mask, 0, [2]).tolist() == [True, True, True]
    batch = {"input_ids": responses, "responses": responses}
    with pytest.raises(KeyError, match="response_mask, rollout_log_probs"):
        partial_prefix(batch, {"stop": 3}, 8)
    batch.update(response_mask=mask, rollout_log_probs=mask.float())
    with pytest.raises(ValueError, match="3 tokens kept but generation is to stop at position 2"):
        partial_prefix(batch, {"stop": 2}, 8)
    assert partial_prefix(batch, None, 8) == (None, None)
