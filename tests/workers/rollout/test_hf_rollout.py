"""HFRollout: exactness against HF generate and a full forward pass, sampling controls, retiring, in-place use."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from rollout_helpers import make_prompts

from verl.models.tiny import TinyModelConfig, save_tiny_model
from verl.utils.config import load_config
from verl.utils.model import ASSETS_DIR, load_causal_lm, load_tokenizer
from verl.workers.rollout import HFRollout, kv_cache
from verl.workers.rollout import hf_rollout as hf_rollout_module

SHIPPED = f"{ASSETS_DIR}/tiny-qwen2-arith-sft"
OUTPUT_KEYS = {
    "prompts",
    "responses",
    "input_ids",
    "attention_mask",
    "position_ids",
    "response_mask",
    "rollout_log_probs",
}

# different prompt lengths (1- and 2-digit operands, one longer wording) so left padding is exercised
QUESTIONS = [
    "What is 37 + 48?",
    "What is 5 + 7?",
    "Please, what is 12 + 99?",
    "What is 60 + 21?",
    "What is 8 + 83?",
    "What is 44 + 44?",
]


@pytest.fixture(scope="module")
def shipped():
    model = load_causal_lm(SHIPPED)
    tokenizer = load_tokenizer(SHIPPED)
    return model, tokenizer


@pytest.fixture(scope="module")
def fresh_llama(tmp_path_factory):
    path = save_tiny_model(str(tmp_path_factory.mktemp("tiny-llama")), TinyModelConfig(arch="llama", seed=3))
    return load_causal_lm(path), load_tokenizer(path)


def make_rollout(model, tokenizer, seed=0, retire_finished=True, **config):
    config.setdefault("response_length", 24)
    return HFRollout(
        model, config, tokenizer.pad_token_id, tokenizer.eos_token_id, seed, retire_finished=retire_finished
    )


def generate_counting_batches(rollout, prompts):
    """``rollout.generate_sequences(prompts)`` plus the batch size of every forward pass of the model during it."""
    sizes: list[int] = []
    # on the input embedding: both the generic forward and the fused decode step (rollout.fused_decode) call it
    handle = rollout.module.get_input_embeddings().register_forward_pre_hook(
        lambda mod, args: sizes.append(args[0].shape[0])
    )
    try:
        out = rollout.generate_sequences(prompts)
    finally:
        handle.remove()
    return out, sizes


# ------------------------------------------------------------------------------------------------ exactness


@pytest.mark.parametrize("which", ["shipped", "fresh_llama"])
@pytest.mark.parametrize("retire", [True, False])
def test_greedy_equals_hf_generate(which, retire, request):
    model, tokenizer = request.getfixturevalue(which)
    prompts = make_prompts(tokenizer, QUESTIONS)
    response_length = 24
    out = make_rollout(model, tokenizer, retire_finished=retire, do_sample=False).generate_sequences(prompts)
    with torch.no_grad():
        ref = model.generate(
            input_ids=prompts.batch["input_ids"],
            attention_mask=prompts.batch["attention_mask"],
            max_new_tokens=response_length,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    ref = ref[:, prompts.batch["input_ids"].shape[1] :]
    ref = torch.nn.functional.pad(ref, (0, response_length - ref.shape[1]), value=tokenizer.pad_token_id)
    assert torch.equal(out.batch["responses"], ref)
    if which == "shipped":  # the case is only meaningful if some rows stop early and others run to the end
        lengths = out.batch["response_mask"].sum(-1)
        assert (lengths < response_length).any() and (lengths == response_length).any()


@pytest.mark.slow
@pytest.mark.parametrize("retire", [True, False])
def test_samples_do_not_depend_on_how_the_batch_is_split(shipped, retire):
    """Each row's draws are keyed by its sample_index: the whole batch, micro-batched generation and two halves
    generated separately (as two data-parallel workers would) give the same tokens. Same seed, same samples on CPU."""
    model, tokenizer = shipped
    prompts = make_prompts(tokenizer, QUESTIONS * 3)
    bs = len(prompts)
    prompts.batch["sample_index"] = torch.arange(bs) + 1000
    whole = make_rollout(model, tokenizer, seed=123, retire_finished=retire, do_sample=True)
    out = whole.generate_sequences(prompts).batch
    micro = make_rollout(model, tokenizer, seed=123, retire_finished=retire, do_sample=True, micro_batch_size=2)
    assert torch.equal(micro.generate_sequences(prompts).batch["responses"], out["responses"])
    halves = [prompts[: bs // 2], prompts[bs // 2 :]]
    parts = [
        make_rollout(model, tokenizer, seed=123, retire_finished=retire, do_sample=True).generate_sequences(h)
        for h in halves
    ]
    assert torch.equal(torch.cat([p.batch["responses"] for p in parts]), out["responses"])
    lengths = out["response_mask"].sum(-1)
    assert (lengths < 24).any() and (lengths > 1).any()  # rows really sampled and some finished early


def test_keyed_uniform_is_uniform_and_inverse_cdf_matches_probs():
    from verl.workers.rollout.hf_rollout import keyed_uniform, sample_inverse_cdf

    idx = torch.arange(200_000)
    u = keyed_uniform(7, 3, idx, 5)
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.005
    assert not torch.equal(u, keyed_uniform(7, 4, idx, 5)) and not torch.equal(u, keyed_uniform(7, 3, idx, 6))
    assert torch.equal(u, keyed_uniform(7, 3, idx, 5))  # a pure function of its keys
    probs = torch.tensor([0.1, 0.0, 0.6, 0.3]).expand(len(idx), -1)
    counts = torch.bincount(sample_inverse_cdf(probs, u), minlength=4).double() / len(idx)
    assert counts[1] == 0  # a zero-probability token is never drawn
    assert torch.allclose(counts, torch.tensor([0.1, 0.0, 0.6, 0.3], dtype=torch.float64), atol=0.005)


@pytest.mark.parametrize("do_sample", [False, True])
def test_output_contract(shipped, do_sample):
    model, tokenizer = shipped
    meta = {"global_step": 3, "validate": False}
    prompts = make_prompts(tokenizer, QUESTIONS, meta)
    bs, prompt_len = prompts.batch["input_ids"].shape
    response_length = 24
    out = make_rollout(model, tokenizer, do_sample=do_sample, response_length=response_length).generate_sequences(
        prompts
    )
    b = out.batch
    assert set(b.keys()) == OUTPUT_KEYS
    total = prompt_len + response_length
    for key, shape in {
        "prompts": (bs, prompt_len),
        "responses": (bs, response_length),
        "input_ids": (bs, total),
        "attention_mask": (bs, total),
        "position_ids": (bs, total),
        "response_mask": (bs, response_length),
        "rollout_log_probs": (bs, response_length),
    }.items():
        assert tuple(b[key].shape) == shape, key
    for key in ("prompts", "responses", "input_ids", "position_ids"):
        assert b[key].dtype == torch.long, key
    assert b["attention_mask"].dtype == prompts.batch["attention_mask"].dtype
    assert b["response_mask"].dtype == prompts.batch["attention_mask"].dtype
    assert b["rollout_log_probs"].dtype == torch.float32

    assert torch.equal(b["prompts"], prompts.batch["input_ids"])
    assert torch.equal(b["input_ids"], torch.cat([b["prompts"], b["responses"]], dim=1))
    assert torch.equal(b["attention_mask"][:, :prompt_len], prompts.batch["attention_mask"])
    assert torch.equal(b["attention_mask"][:, prompt_len:], b["response_mask"])
    assert torch.equal(b["position_ids"][:, :prompt_len], prompts.batch["position_ids"])
    last = prompts.batch["position_ids"][:, -1:]
    assert torch.equal(b["position_ids"][:, prompt_len:], last + torch.arange(1, response_length + 1))

    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    stopped = 0
    for row in range(bs):
        resp, mask = b["responses"][row].tolist(), b["response_mask"][row].tolist()
        n = resp.index(eos) + 1 if eos in resp else response_length  # up to and including the first EOS
        stopped += n < response_length
        assert mask == [1] * n + [0] * (response_length - n)
        assert resp[n:] == [pad] * (response_length - n)
        assert pad not in resp[:n]
    assert stopped > 0  # the semantics after EOS were exercised
    logp, mask = b["rollout_log_probs"], b["response_mask"].bool()
    assert torch.all(logp[~mask] == 0) and torch.all(logp[mask] <= 0) and torch.all(logp[mask] > -30)

    # non-tensors and meta_info pass through unchanged
    assert np.array_equal(out.non_tensor_batch["index"], np.arange(bs))
    assert list(out.non_tensor_batch["question"]) == QUESTIONS
    assert out.meta_info == meta


@pytest.mark.parametrize(
    "sampling",
    [
        {"do_sample": False},
        {"do_sample": True, "temperature": 1.0},
        {"do_sample": True, "temperature": 0.7, "top_k": 5, "top_p": 0.9},
        {"do_sample": True, "temperature": 1.3, "top_k": 0},
    ],
)
def test_rollout_log_probs_equal_full_forward(shipped, sampling):
    model, tokenizer = shipped
    prompts = make_prompts(tokenizer, QUESTIONS * 2)
    out = make_rollout(model, tokenizer, seed=5, **sampling).generate_sequences(prompts)
    b = out.batch
    prompt_len = b["prompts"].shape[1]
    temperature = sampling.get("temperature", 1.0) if sampling["do_sample"] else 1.0
    with torch.no_grad():
        logits = model(
            input_ids=b["input_ids"], attention_mask=b["attention_mask"], position_ids=b["position_ids"]
        ).logits
    # logits at position t predict token t+1: the response tokens are predicted from positions P-1 .. P+R-2
    logits = logits[:, prompt_len - 1 : -1].float() / temperature
    expected = torch.log_softmax(logits, dim=-1).gather(-1, b["responses"].unsqueeze(-1)).squeeze(-1)
    mask = b["response_mask"].bool()
    assert mask.sum() > 0
    assert torch.allclose(b["rollout_log_probs"][mask], expected[mask], atol=1e-4, rtol=0)


# --------------------------------------------------------------------------------------------------- sampling


@pytest.mark.slow
def test_same_seed_same_samples_and_rng_state_replays(shipped):
    model, tokenizer = shipped
    prompts = make_prompts(tokenizer, QUESTIONS * 2)
    kw = {"do_sample": True, "temperature": 1.0}
    a = make_rollout(model, tokenizer, seed=11, **kw).generate_sequences(prompts).batch
    b = make_rollout(model, tokenizer, seed=11, **kw).generate_sequences(prompts).batch
    c = make_rollout(model, tokenizer, seed=12, **kw).generate_sequences(prompts).batch
    for key in OUTPUT_KEYS:
        assert torch.equal(a[key], b[key]), key
    assert not torch.equal(a["responses"], c["responses"])

    rollout = make_rollout(model, tokenizer, seed=11, **kw)
    state = rollout.get_rng_state()
    first = rollout.generate_sequences(prompts).batch
    second = rollout.generate_sequences(prompts).batch
    assert torch.equal(first["responses"], a["responses"])
    assert not torch.equal(first["responses"], second["responses"])  # the generator advances between calls
    rollout.set_rng_state(state)
    assert torch.equal(rollout.generate_sequences(prompts).batch["responses"], first["responses"])
    assert torch.equal(rollout.generate_sequences(prompts).batch["responses"], second["responses"])


def test_greedy_does_not_consume_randomness(shipped):
    model, tokenizer = shipped
    rollout = make_rollout(model, tokenizer, do_sample=False)
    state = rollout.get_rng_state()
    rollout.generate_sequences(make_prompts(tokenizer, QUESTIONS))
    assert torch.equal(rollout.get_rng_state(), state)


@pytest.mark.parametrize("filtering", [{"top_k": 1}, {"top_p": 1e-6}, {"top_k": 1, "top_p": 0.5}])
def test_degenerate_filters_equal_greedy(shipped, filtering):
    model, tokenizer = shipped
    prompts = make_prompts(tokenizer, QUESTIONS * 2)
    greedy = make_rollout(model, tokenizer, do_sample=False).generate_sequences(prompts).batch
    sampled = (
        make_rollout(model, tokenizer, seed=7, do_sample=True, temperature=1.0, **filtering)
        .generate_sequences(prompts)
        .batch
    )
    assert torch.equal(sampled["responses"], greedy["responses"])
    assert torch.equal(sampled["response_mask"], greedy["response_mask"])
    # temperature 1: the (unfiltered) log-probs are the greedy ones
    assert torch.allclose(sampled["rollout_log_probs"], greedy["rollout_log_probs"], atol=1e-6)


def test_filter_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    f = hf_rollout_module.filter_logits
    assert torch.isfinite(f(logits, top_k=2)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(f(logits, top_k=0)).all() and torch.isfinite(f(logits, top_k=-1)).all()
    assert torch.isfinite(f(logits, top_p=0.5)).tolist() == [[True, False, False, False]]
    assert torch.isfinite(f(logits, top_p=0.79)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(f(logits, top_p=0.81)).tolist() == [[True, True, True, False]]
    assert torch.isfinite(f(logits, top_p=1e-9)).tolist() == [[True, False, False, False]]
    assert torch.isfinite(f(logits, top_k=3, top_p=0.99)).tolist() == [[True, True, True, False]]


def test_sampling_follows_the_distribution(shipped):
    """Many samples of one prompt's first token: frequencies match the model's probabilities."""
    model, tokenizer = shipped
    prompts = make_prompts(tokenizer, ["What is 37 + 48?"]).repeat(2000)
    out = make_rollout(model, tokenizer, seed=1, do_sample=True, temperature=2.0, response_length=1)
    first = out.generate_sequences(prompts).batch
    with torch.no_grad():
        logits = model(
            input_ids=prompts.batch["input_ids"][:1],
            attention_mask=prompts.batch["attention_mask"][:1],
            position_ids=prompts.batch["position_ids"][:1],
        ).logits[0, -1]
    probs = torch.softmax(logits / 2.0, -1)
    freq = torch.bincount(first["responses"][:, 0], minlength=probs.shape[0]).float() / 2000
    assert (freq - probs).abs().max() < 0.05
    assert (freq > 0).sum() > 1  # it really samples


# ---------------------------------------------------------------------------------------------------- retiring


def test_retiring_matches_plain_path_and_shrinks_the_batch(shipped):
    model, tokenizer = shipped
    prompts = make_prompts(tokenizer, QUESTIONS * 3)
    bs = len(prompts)
    for sampling in ({"do_sample": False}, {"do_sample": True, "temperature": 1.0, "top_p": 0.95}):
        results, sizes = {}, {}
        for retire in (True, False):
            rollout = make_rollout(
                model,
                tokenizer,
                seed=3,
                retire_finished=retire,
                response_length=32,
                share_prompt_prefill=False,
                **sampling,
            )
            out, sizes[retire] = generate_counting_batches(rollout, prompts)
            results[retire] = out.batch
        for key in OUTPUT_KEYS - {"rollout_log_probs"}:
            assert torch.equal(results[True][key], results[False][key]), (sampling, key)
        assert torch.allclose(results[True]["rollout_log_probs"], results[False]["rollout_log_probs"], atol=1e-5)
        assert set(sizes[False]) == {bs}
        assert sizes[True][0] == bs and sizes[True] == sorted(sizes[True], reverse=True)
        assert sizes[True][-1] < bs  # finished rows were dropped from the batch
        assert sum(sizes[True]) < sum(sizes[False])
        assert len(sizes[True]) <= len(sizes[False])


@pytest.mark.parametrize("retire", [True, False])
def test_shared_prompt_prefill_gives_the_same_samples_with_one_prefill_per_prompt(shipped, retire):
    model, tokenizer = shipped
    prompts = make_prompts(tokenizer, QUESTIONS).repeat(4, interleave=True)  # n = 4 samples per prompt
    results, sizes = {}, {}
    for share in (True, False):
        rollout = make_rollout(
            model, tokenizer, seed=5, retire_finished=retire, response_length=16, share_prompt_prefill=share
        )
        out, sizes[share] = generate_counting_batches(rollout, prompts)
        results[share] = out.batch
    for key in OUTPUT_KEYS - {"rollout_log_probs"}:
        assert torch.equal(results[True][key], results[False][key]), key
    assert torch.allclose(results[True]["rollout_log_probs"], results[False]["rollout_log_probs"], atol=1e-5)
    assert sizes[True][0] == len(QUESTIONS) and sizes[False][0] == len(prompts)  # the prefill ran once per prompt


def test_cache_row_selection_support(shipped):
    from transformers.cache_utils import DynamicCache, StaticCache

    model, _ = shipped
    with torch.no_grad():
        out = model(input_ids=torch.tensor([[5, 6, 7], [8, 9, 10]]), use_cache=True)
    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    assert isinstance(cache, DynamicCache) and kv_cache.can_select_rows(cache)
    key0 = cache.layers[0].keys.clone()
    kv_cache.select_rows(cache, torch.tensor([1]))
    assert torch.equal(cache.layers[0].keys, key0[1:])
    assert not kv_cache.can_select_rows(StaticCache(config=model.config, max_cache_len=16))
    legacy = ((torch.randn(3, 2, 4, 8), torch.randn(3, 2, 4, 8)),)
    assert kv_cache.can_select_rows(legacy)
    assert torch.equal(kv_cache.select_rows(legacy, torch.tensor([0, 2]))[0][1], legacy[0][1][[0, 2]])


def test_plain_fallback_when_cache_cannot_select_rows(shipped, monkeypatch):
    model, tokenizer = shipped
    prompts = make_prompts(tokenizer, QUESTIONS)
    expected = make_rollout(model, tokenizer, do_sample=False).generate_sequences(prompts).batch
    monkeypatch.setattr(hf_rollout_module, "can_select_rows", lambda cache: False)
    rollout = make_rollout(model, tokenizer, do_sample=False)
    out, sizes = generate_counting_batches(rollout, prompts)
    assert set(sizes) == {len(QUESTIONS)}
    assert torch.equal(out.batch["responses"], expected["responses"])


# ------------------------------------------------------------------------------------------------- hybrid engine


def test_module_is_used_in_place():
    model, tokenizer = load_causal_lm(SHIPPED), load_tokenizer(SHIPPED)
    ptrs = {name: p.data_ptr() for name, p in model.named_parameters()}
    n_params = sum(p.numel() for p in model.parameters())
    model.train()
    rollout = make_rollout(model, tokenizer, do_sample=False)
    assert rollout.module is model
    prompts = make_prompts(tokenizer, QUESTIONS)
    before = rollout.generate_sequences(prompts).batch["responses"]
    assert model.training  # mode restored
    assert {name: p.data_ptr() for name, p in model.named_parameters()} == ptrs
    assert sum(p.numel() for p in model.parameters()) == n_params
    assert all(p.grad is None for p in model.parameters())

    model.eval()
    rollout.generate_sequences(prompts)
    assert not model.training

    # an in-place weight update (what the actor's optimizer does) is what the next rollout samples with
    with torch.no_grad():
        model.model.norm.weight.zero_()  # all logits 0 -> argmax is token 0 (the pad token)
    after = rollout.generate_sequences(prompts).batch
    assert not torch.equal(after["responses"], before)
    assert torch.all(after["responses"] == 0)


# ------------------------------------------------------------------------------------------------- config


def test_dictconfig_val_kwargs_and_meta_overrides(shipped):
    model, tokenizer = shipped
    prompts = make_prompts(tokenizer, QUESTIONS * 2)
    greedy = make_rollout(model, tokenizer, do_sample=False).generate_sequences(prompts).batch
    # the job config's own rollout node (an omegaconf DictConfig with an interpolated response_length)
    config = load_config("ppo_trainer", ["data.max_response_length=24"]).actor_rollout_ref.rollout
    assert config.do_sample and not config.val_kwargs.do_sample and config.response_length == 24
    rollout = HFRollout(model, config, tokenizer.pad_token_id, tokenizer.eos_token_id, seed=0)
    prompts.meta_info["validate"] = True
    val = rollout.generate_sequences(prompts).batch
    assert torch.equal(val["responses"], greedy["responses"])
    prompts.meta_info["validate"] = False
    assert not torch.equal(rollout.generate_sequences(prompts).batch["responses"], greedy["responses"])

    # meta_info overrides the config: do_sample, response_length
    prompts.meta_info.update(do_sample=False, response_length=8)
    short = rollout.generate_sequences(prompts).batch
    assert short["responses"].shape[1] == 8 and short["input_ids"].shape[1] == prompts.batch["input_ids"].shape[1] + 8
    assert torch.equal(short["responses"], greedy["responses"][:, :8])
    # temperature 0 means greedy
    prompts.meta_info.update(do_sample=True, temperature=0.0, response_length=24)
    assert torch.equal(rollout.generate_sequences(prompts).batch["responses"], greedy["responses"])


def test_micro_batches_give_the_same_greedy_output(shipped):
    model, tokenizer = shipped
    prompts = make_prompts(tokenizer, QUESTIONS[:5])
    whole = make_rollout(model, tokenizer, do_sample=False).generate_sequences(prompts).batch
    rollout = make_rollout(model, tokenizer, do_sample=False, micro_batch_size=2)
    out, sizes = generate_counting_batches(rollout, prompts)
    assert max(sizes) == 2
    chunked = out.batch
    for key in OUTPUT_KEYS - {"rollout_log_probs"}:
        assert torch.equal(chunked[key], whole[key]), key
    assert torch.allclose(chunked["rollout_log_probs"], whole["rollout_log_probs"], atol=1e-5)


def test_eos_list_stops_at_any_of_them(shipped):
    model, tokenizer = shipped
    newline = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("\n"))[0]
    prompts = make_prompts(tokenizer, ["What is 37 + 48?", "What is 60 + 21?"])
    rollout = HFRollout(
        model, {"response_length": 24, "do_sample": False}, tokenizer.pad_token_id, [tokenizer.eos_token_id, newline]
    )
    b = rollout.generate_sequences(prompts).batch
    for row in range(2):
        n = int(b["response_mask"][row].sum())
        assert b["responses"][row, n - 1] == newline and newline not in b["responses"][row, : n - 1].tolist()
        assert torch.all(b["responses"][row, n:] == tokenizer.pad_token_id)


def test_bf16_model_and_errors(shipped):
    _, tokenizer = shipped
    model = load_causal_lm(SHIPPED, dtype="bf16")
    out = make_rollout(model, tokenizer, do_sample=True).generate_sequences(make_prompts(tokenizer, QUESTIONS)).batch
    assert out["rollout_log_probs"].dtype == torch.float32 and out["responses"].shape == (len(QUESTIONS), 24)
    with pytest.raises(ValueError, match="response_length"):
        HFRollout(model, {}, 0, 2).generate_sequences(make_prompts(tokenizer, QUESTIONS))
    with pytest.raises(ValueError, match="pad_token_id"):
        HFRollout(model, {}, None, 2)


def test_right_padded_prompts_are_one_clear_error(shipped):
    model, tokenizer = shipped
    left = make_prompts(tokenizer, QUESTIONS)
    b = left.batch
    lengths = b["attention_mask"].sum(-1)
    right_ids, right_mask = (
        torch.full_like(b["input_ids"], tokenizer.pad_token_id),
        torch.zeros_like(b["attention_mask"]),
    )
    for i, n in enumerate(lengths.tolist()):  # the same prompts padded on the right
        right_ids[i, :n] = b["input_ids"][i, -n:]
        right_mask[i, :n] = 1
    right = type(left).from_dict({"input_ids": right_ids, "attention_mask": right_mask})
    shorter = [i for i, n in enumerate(lengths.tolist()) if n < b["input_ids"].shape[1]]
    assert shorter
    with pytest.raises(ValueError, match=rf"rows \[{shorter[0]}.*not left-padded.*padding_side='left'"):
        make_rollout(model, tokenizer).generate_sequences(right)


# ------------------------------------------------------------------------------------------------- sanity


def test_shipped_checkpoint_answers_in_format(shipped):
    model, tokenizer = shipped
    rng = random.Random(0)
    pairs = [(rng.randint(10, 99), rng.randint(10, 99)) for _ in range(32)]
    prompts = make_prompts(tokenizer, [f"What is {a} + {b}?" for a, b in pairs])
    out = make_rollout(model, tokenizer, do_sample=False, response_length=32).generate_sequences(prompts).batch
    texts = tokenizer.batch_decode(out["responses"], skip_special_tokens=True)
    formatted = sum("####" in t for t in texts)
    ended = int((out["response_mask"].sum(-1) < 32).sum())
    assert formatted >= 0.75 * len(pairs), texts
    assert ended >= 0.75 * len(pairs)
