"""The fused decode step (``rollout.fused_decode``, default on) computes the generic HF forward's logits within float
tolerance for every supported Llama-family layout (qwen2 with q/k/v biases, llama, mistral, qwen3 with q/k norms,
grouped-query and multi-head attention, left-padded prompts, rows retired mid-way), gives the same samples as the
generic forward, sees a policy update, and steps aside for unsupported models. Same seed, same samples on CPU."""

from __future__ import annotations

import pytest
import torch
import transformers
from rollout_helpers import make_prompts

from verl.protocol import DataProto
from verl.utils.model import ASSETS_DIR, forward_signature, load_causal_lm, load_tokenizer
from verl.workers.rollout import HFRollout
from verl.workers.rollout.kv_cache import preallocate
from verl.workers.rollout.lean_decode import LeanDecoder

SHIPPED = f"{ASSETS_DIR}/tiny-qwen2-arith-sft"
QUESTIONS = ["What is 37 + 48?", "What is 5 + 7?", "Please, what is 12 + 99?", "What is 8 + 83?"]
COMMON = dict(
    vocab_size=97,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=256,
)


def tiny(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "qwen2":  # q/k/v biases, grouped-query attention
        cfg = transformers.Qwen2Config(**COMMON, num_key_value_heads=2)
    elif kind == "llama":  # multi-head attention, rope scaling
        cfg = transformers.LlamaConfig(
            **COMMON, num_key_value_heads=4, rope_scaling={"rope_type": "linear", "factor": 2.0}
        )
    elif kind == "mistral":
        cfg = transformers.MistralConfig(**COMMON, num_key_value_heads=1, sliding_window=None)
    elif kind == "qwen3":  # per-head q/k RMSNorm, explicit head_dim
        cfg = transformers.Qwen3Config(**COMMON, num_key_value_heads=2, head_dim=32)
    else:
        raise ValueError(kind)
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():  # non-trivial norms and biases, so a missed term shows
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("kind", ["qwen2", "llama", "mistral", "qwen3"])
def test_step_matches_the_generic_forward(kind):
    model = tiny(kind)
    lean = LeanDecoder.build(model)
    assert lean is not None
    lean.refresh()
    g = torch.Generator().manual_seed(1)
    b, p, steps = 6, 7, 5
    ids = torch.randint(3, 97, (b, p), generator=g)
    mask = torch.ones(b, p, dtype=torch.long)
    mask[1, :3] = 0
    mask[4, :1] = 0
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    tokens = torch.randint(3, 97, (b, steps), generator=g)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
        ref_cache, our_cache = (
            out.past_key_values,
            model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True).past_key_values,
        )
        assert preallocate(our_cache, p + steps)
        rows = torch.arange(b)
        cur, nxt = mask, pos[:, -1] + 1
        for s in range(steps):
            if s == 3:  # retire rows 0 and 3 from both caches
                rows = torch.tensor([1, 2, 4, 5])
                keep = torch.tensor([1, 2, 4, 5])
                ref_cache.batch_select_indices(keep)
                our_cache.batch_select_indices(keep)
                cur, nxt = cur[keep], nxt[keep]
            cur = torch.cat([cur, cur.new_ones(cur.shape[0], 1)], dim=1)
            tok = tokens[rows, s]
            want = model(
                input_ids=tok[:, None],
                attention_mask=cur,
                position_ids=nxt[:, None],
                **{forward_signature(model)[0]: ref_cache},
            ).logits[:, -1]
            got = lean.step(tok, nxt, our_cache, cur.bool())
            torch.testing.assert_close(got, want.float(), atol=2e-5, rtol=1e-5)
            nxt = nxt + 1
        got = lean.step(tokens[rows, 0], nxt, our_cache, None)  # no key mask: every position attended
        want = model(
            input_ids=tokens[rows, 0][:, None],
            attention_mask=torch.ones_like(torch.cat([cur, cur[:, :1]], 1)),
            position_ids=nxt[:, None],
            **{forward_signature(model)[0]: ref_cache},
        ).logits[:, -1]
        torch.testing.assert_close(got, want.float(), atol=2e-5, rtol=1e-5)


def generate(model, tokenizer, prompts, fused: bool):
    config = dict(response_length=24, do_sample=True, temperature=1.0, fused_decode=fused)
    rollout = HFRollout(model, config, tokenizer.pad_token_id, tokenizer.eos_token_id, seed=7)
    assert (rollout._lean is not None) == fused
    return rollout.generate_sequences(prompts).batch


def test_rollout_gives_the_same_samples_and_sees_weight_updates():
    model, tokenizer = load_causal_lm(SHIPPED), load_tokenizer(SHIPPED)
    prompts = make_prompts(tokenizer, QUESTIONS).repeat(3, interleave=True)
    assert not bool(prompts.batch["attention_mask"].bool().all())  # left padding exercised
    for _ in range(2):  # the second round after a policy update: the fused weights are rebuilt from the live ones
        fused, plain = generate(model, tokenizer, prompts, True), generate(model, tokenizer, prompts, False)
        assert torch.equal(fused["responses"], plain["responses"])
        torch.testing.assert_close(fused["rollout_log_probs"], plain["rollout_log_probs"], atol=1e-5, rtol=1e-5)
        lengths = fused["response_mask"].sum(-1)
        assert (lengths < 24).any() and (lengths > 2).any()  # rows retired at different steps
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.02)
    again = generate(model, tokenizer, prompts, True)
    assert not torch.equal(again["rollout_log_probs"], fused["rollout_log_probs"])
    assert torch.equal(again["responses"], generate(model, tokenizer, prompts, True)["responses"])  # same seed


def test_unsupported_models_keep_the_generic_forward():
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=97, n_embd=32, n_layer=1, n_head=2))
    assert LeanDecoder.build(gpt2) is None and "gpt2" in LeanDecoder.unsupported_reason(gpt2)
    sliding = transformers.MistralConfig(**COMMON, num_key_value_heads=1, sliding_window=16)
    assert "sliding" in LeanDecoder.unsupported_reason(transformers.AutoModelForCausalLM.from_config(sliding))
    rollout = HFRollout(gpt2, dict(response_length=4, fused_decode=True), pad_token_id=0, eos_token_id=1, seed=0)
    assert rollout._lean is None
    ids = torch.randint(3, 97, (2, 5))
    batch = DataProto.from_dict(
        {"input_ids": ids, "attention_mask": torch.ones_like(ids), "position_ids": torch.arange(5).repeat(2, 1)}
    )
    assert rollout.generate_sequences(batch).batch["responses"].shape == (2, 4)


def decode_fixed_tokens(model, fused: bool, steps: int = 6) -> torch.Tensor:
    """Logits (steps, B, V) of decoding fixed tokens after a left-padded prefill, by either path."""
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(3, 97, (4, 6), generator=g)
    mask = torch.ones_like(ids)
    mask[0, :2] = 0
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    tokens = torch.randint(3, 97, (4, steps), generator=g)
    lean = LeanDecoder.build(model) if fused else None
    kwarg = forward_signature(model)[0]
    with torch.no_grad():
        cache = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True).past_key_values
        assert preallocate(cache, 6 + steps)
        cur, nxt, out = mask, pos[:, -1] + 1, []
        for s in range(steps):
            cur = torch.cat([cur, cur.new_ones(4, 1)], dim=1)
            if lean is not None:
                out.append(lean.step(tokens[:, s], nxt, cache, cur.bool()))
            else:
                step = model(
                    input_ids=tokens[:, s : s + 1], attention_mask=cur, position_ids=nxt[:, None], **{kwarg: cache}
                )
                out.append(step.logits[:, -1].float())
            nxt = nxt + 1
    return torch.stack(out)


def test_bf16_autocast_stays_as_close_to_fp32_as_the_generic_forward():
    """``rollout.dtype=bf16``: attention scores and softmax stay fp32 in the fused step (as SDPA accumulates), so its
    logits are no further from the fp32 ones than the generic bf16 forward's."""
    model = tiny("qwen2")
    fp32 = decode_fixed_tokens(model, fused=False)
    err = {}
    for fused in (True, False):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            err[fused] = (decode_fixed_tokens(model, fused) - fp32).abs()
    assert err[True].mean() <= 1.5 * err[False].mean() + 1e-3 and err[True].max() <= 1.5 * err[False].max() + 1e-3
