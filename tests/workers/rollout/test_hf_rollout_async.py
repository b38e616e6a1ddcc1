"""HFRollout's per-request ``async generate``: the batch call's numbers, each request's own settings, determinism,
and a bad request failing alone. On the shipped tiny model (fp32, CPU)."""

from __future__ import annotations

import asyncio

import pytest
import torch
from rollout_helpers import make_prompts

from verl.utils.model import ASSETS_DIR, load_causal_lm, load_tokenizer
from verl.workers.rollout import HFRollout, TokenOutput

SHIPPED = f"{ASSETS_DIR}/tiny-qwen2-arith-sft"
QUESTIONS = [
    "What is 37 + 48?",
    "What is 5 + 7?",
    "Please, what is 12 + 99?",
    "What is 60 + 21?",
]
SAMPLED = {"temperature": 1.3, "top_p": 0.95, "top_k": 40}


@pytest.fixture(scope="module")
def shipped():
    return load_causal_lm(SHIPPED), load_tokenizer(SHIPPED)


@pytest.fixture(scope="module")
def prompt_ids(shipped):
    """The QUESTIONS' chat prompts as token-id lists (the batch call's rows without their left padding)."""
    batch = make_prompts(shipped[1], QUESTIONS).batch
    return [ids[mask.bool()].tolist() for ids, mask in zip(batch["input_ids"], batch["attention_mask"])]


def make_rollout(shipped, seed=0, **config):
    model, tokenizer = shipped
    config.setdefault("response_length", 24)
    return HFRollout(model, config, tokenizer.pad_token_id, tokenizer.eos_token_id, seed)


def run_together(rollout, prompts, params, ids=None, **gather):
    """``generate`` for every prompt at once (one ``asyncio.gather``); ``params`` one dict or one per prompt."""
    params = params if isinstance(params, list) else [params] * len(prompts)
    ids = ids or [f"req-{i}" for i in range(len(prompts))]

    async def main():
        calls = [rollout.generate(p, dict(sp), rid) for p, sp, rid in zip(prompts, params, ids)]
        return await asyncio.gather(*calls, **gather)

    return asyncio.run(main())


def run_one_by_one(rollout, prompts, params):
    async def main():
        return [await rollout.generate(p, dict(params), f"req-{i}") for i, p in enumerate(prompts)]

    return asyncio.run(main())


# ------------------------------------------------------------------------------------------ the batch call's numbers


@pytest.mark.parametrize("fused_decode", [True, False])
def test_greedy_requests_equal_the_batch_call_bit_for_bit(shipped, prompt_ids, fused_decode):
    rollout = make_rollout(shipped, do_sample=False, fused_decode=fused_decode)
    batch = rollout.generate_sequences(make_prompts(shipped[1], QUESTIONS)).batch
    outs = run_together(rollout, prompt_ids, {"temperature": 0.0, "max_tokens": 24})
    assert rollout._batcher.batch_sizes == [len(QUESTIONS)]  # one batch, padded as the batch call pads
    for row, out in enumerate(outs):
        mask = batch["response_mask"][row].bool()
        assert out.token_ids == batch["responses"][row][mask].tolist()
        assert out.log_probs == batch["rollout_log_probs"][row][mask].tolist()
        assert out.stop_reason == "completed"
        assert out.finish_reason == ("stop" if out.token_ids[-1] == shipped[1].eos_token_id else "length")


def test_a_greedy_request_alone_equals_its_batch_row(shipped, prompt_ids):
    """One request per batch: no padding, so the logits differ from the padded batch's in the last bits only
    (log-probs within 1e-4)."""
    rollout = make_rollout(shipped, do_sample=False)
    batch = rollout.generate_sequences(make_prompts(shipped[1], QUESTIONS)).batch
    outs = run_one_by_one(rollout, prompt_ids, {"temperature": 0.0, "max_tokens": 24})
    assert rollout._batcher.batch_sizes == [1] * len(QUESTIONS)
    for row, out in enumerate(outs):
        mask = batch["response_mask"][row].bool()
        assert out.token_ids == batch["responses"][row][mask].tolist()
        assert torch.allclose(torch.tensor(out.log_probs), batch["rollout_log_probs"][row][mask], atol=1e-4)


def test_log_probs_equal_a_forward_pass_over_prompt_and_response(shipped, prompt_ids):
    """Tolerance 1e-4: the recomputation runs each sequence alone and unpadded, in one pass (fp32)."""
    model = shipped[0]
    outs = run_together(make_rollout(shipped, seed=5), prompt_ids, {**SAMPLED, "max_tokens": 16})
    for prompt, out in zip(prompt_ids, outs):
        assert len(out.token_ids) == len(out.log_probs) > 0
        ids = torch.tensor([prompt + out.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
        expected = torch.log_softmax(logits / SAMPLED["temperature"], -1).gather(-1, ids[0, len(prompt) :, None])
        assert torch.allclose(torch.tensor(out.log_probs), expected.squeeze(-1), atol=1e-4)


# --------------------------------------------------------------------------------------- each request's own settings


def test_concurrent_requests_each_sample_with_their_own_settings(shipped, prompt_ids):
    tokenizer = shipped[1]
    rollout = make_rollout(shipped, seed=1)
    greedy = run_together(make_rollout(shipped), prompt_ids, {"temperature": 0.0, "max_tokens": 24})
    first_of_0 = greedy[0].token_ids[2]  # a token greedy decoding of prompt 0 emits early
    params = [
        {"temperature": 0.0, "max_tokens": 24, "stop_token_ids": [first_of_0]},  # stops at its 3rd token
        {"temperature": 0.9, "top_k": 1, "max_tokens": 24},  # top_k=1 samples the argmax
        {**SAMPLED, "max_tokens": 5, "ignore_eos": True},  # exactly 5 tokens
        {"temperature": 0.0, "max_tokens": 40, "ignore_eos": True},  # past EOS, to its own max_tokens
    ]
    outs = run_together(rollout, prompt_ids, params)
    assert rollout._batcher.batch_sizes == [4]  # different prompt lengths and settings in one decode
    assert outs[0].token_ids == greedy[0].token_ids[:3] and outs[0].finish_reason == "stop"
    assert outs[1].token_ids == greedy[1].token_ids
    assert len(outs[2].token_ids) == 5 and outs[2].finish_reason == "length"
    assert len(outs[3].token_ids) == 40 and outs[3].finish_reason == "length"
    assert outs[3].token_ids[: len(greedy[3].token_ids)] == greedy[3].token_ids
    assert tokenizer.eos_token_id in outs[3].token_ids  # sampled past EOS


def test_missing_keys_take_the_rollout_config_and_max_tokens_fits_the_model(shipped, prompt_ids):
    prompt = prompt_ids[0]
    config = {"response_length": 8, "prompt_length": len(prompt) + 5, "ignore_eos": True}
    # verl's default budget: response_length + prompt_length - len(prompt) = 13 tokens
    assert len(run_together(make_rollout(shipped, **config), [prompt], {})[0].token_ids) == 13
    capped = make_rollout(shipped, **config, max_model_len=len(prompt) + 3)  # the model has room for 3
    assert len(run_together(capped, [prompt], {"max_tokens": 10})[0].token_ids) == 3
    empty = run_together(make_rollout(shipped), [prompt], {"max_tokens": 0})[0]
    assert empty == TokenOutput([], [], stop_reason="completed", num_preempted=0, finish_reason="length")
    # rollout.do_sample=false: greedy unless a request says otherwise
    greedy = run_together(make_rollout(shipped, do_sample=False), prompt_ids, {"temperature": 1.0})
    assert greedy == run_together(make_rollout(shipped), prompt_ids, {"temperature": 0.0})


# ------------------------------------------------------------------------------------------------------ determinism


def test_same_seed_and_request_order_give_the_same_tokens_whatever_the_batching(shipped, prompt_ids):
    params = {**SAMPLED, "max_tokens": 16}
    a = run_together(make_rollout(shipped, seed=3), prompt_ids, params)
    b = run_together(make_rollout(shipped, seed=3), prompt_ids, params)
    assert a == b  # token ids and log-probs, bit for bit
    c = run_together(make_rollout(shipped, seed=4), prompt_ids, params)
    assert [o.token_ids for o in a] != [o.token_ids for o in c]
    # the same requests in the same order, one batch each: the same draws (log-probs up to float rounding)
    d = run_one_by_one(make_rollout(shipped, seed=3), prompt_ids, params)
    assert [o.token_ids for o in d] == [o.token_ids for o in a]


def test_a_request_with_its_own_seed_samples_the_same_anywhere(shipped, prompt_ids):
    prompt, params = prompt_ids[2], {**SAMPLED, "max_tokens": 16, "seed": 1234}
    alone = run_together(make_rollout(shipped, seed=0), [prompt], params)[0]
    others = [{**SAMPLED, "max_tokens": 16}] * 3
    crowd = run_together(make_rollout(shipped, seed=9), [prompt_ids[0], prompt_ids[1], prompt], [*others[:2], params])
    assert crowd[2].token_ids == alone.token_ids  # another rollout seed, request number and batch
    reseeded = run_together(make_rollout(shipped), [prompt] * 4, [{**params, "seed": s} for s in range(4)])
    assert len({tuple(o.token_ids) for o in reseeded}) > 1


def test_rng_state_replays_the_requests_after_it(shipped, prompt_ids):
    params = {**SAMPLED, "max_tokens": 12}
    rollout = make_rollout(shipped, seed=2)
    run_together(rollout, prompt_ids, params)
    state = rollout.get_rng_state()
    assert state.tolist() == [2, 0, len(prompt_ids)]  # (seed, batch calls, requests)
    first = run_together(rollout, prompt_ids, params)
    second = run_together(rollout, prompt_ids, params)
    assert [o.token_ids for o in first] != [o.token_ids for o in second]  # later requests draw anew
    rollout.set_rng_state(state)
    assert run_together(rollout, prompt_ids, params) == first
    rollout.set_rng_state(torch.tensor([2, 0]))  # a checkpoint from before per-request generation: requests from 0
    assert rollout.requests == 0


# ---------------------------------------------------------------------------------------------------- bad requests


@pytest.mark.parametrize(
    "prompt, params, match",
    [
        ([5] * 600, {}, r"'bad': the prompt has 600 tokens; the model's maximum length is 512"),
        ([5, 10**6], {}, r"'bad': prompt_ids holds id 1000000 outside the vocabulary \[0, 259\)"),
        ([], {}, r"'bad': prompt_ids is empty"),
        ([5, 6], {"n": 4}, r"'bad': sampling_params\['n'\]=4 is not supported: only 1"),
        ([5, 6], {"logits_processors": []}, r"'bad': sampling_params key 'logits_processors' is not supported"),
        ([5, 6], {"top_p": 0.0}, r"'bad': top_p must be in \(0, 1\]"),
        ([5, 6], {"max_tokens": -1}, r"'bad': max_tokens must be >= 0"),
    ],
)
def test_a_bad_request_fails_alone_with_its_id_and_the_fix(shipped, prompt_ids, prompt, params, match):
    greedy = {"temperature": 0.0, "max_tokens": 24}
    expected = run_together(make_rollout(shipped), prompt_ids[:2], greedy)
    outs = run_together(
        make_rollout(shipped),
        [prompt_ids[0], prompt, prompt_ids[1]],
        [greedy, params, greedy],
        ids=["good-0", "bad", "good-1"],
        return_exceptions=True,
    )
    assert isinstance(outs[1], ValueError)
    with pytest.raises(ValueError, match=match):
        raise outs[1]
    assert [outs[0], outs[2]] == expected


# ---------------------------------------------------------------------------------------------------------- hooks


def test_update_weights_loads_named_tensors_and_names_an_unknown_one(shipped, prompt_ids):
    model, tokenizer = load_causal_lm(SHIPPED), shipped[1]
    rollout = HFRollout(model, {"response_length": 24}, tokenizer.pad_token_id, tokenizer.eos_token_id)
    greedy = {"temperature": 0.0, "max_tokens": 24}
    before = run_together(rollout, prompt_ids, greedy)
    head = model.lm_head.weight.detach().clone()
    head[tokenizer.eos_token_id] = 0.0  # EOS's logit is 0, below the best token's: a policy that never stops
    asyncio.run(rollout.resume(["weights"]))
    asyncio.run(rollout.update_weights(iter([("lm_head.weight", head)])))
    asyncio.run(rollout.release())
    after = run_together(rollout, prompt_ids, greedy)
    assert any(o.finish_reason == "stop" for o in before)
    assert all(o.finish_reason == "length" and len(o.token_ids) == 24 for o in after)
    with pytest.raises(KeyError, match="'lm_head.wieght' is not a parameter or buffer of Qwen2ForCausalLM"):
        asyncio.run(rollout.update_weights([("lm_head.wieght", head)]))
