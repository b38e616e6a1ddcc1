"""verl.utils.lora: PEFT adapters on the shipped tiny Qwen2, merged weights, adapter-only checkpoints, errors.

Same seed, same adapters: CPU results here are bit for bit, also with 2 threads."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("peft", reason="LoRA needs peft: pip install peft")

from verl.utils.fsdp_utils import load_dcp, save_dcp  # noqa: E402
from verl.utils.lora import (  # noqa: E402
    apply_lora,
    count_parameters,
    full_adapter_state,
    iter_merged_full_tensors,
    lora_enabled,
    save_adapter,
    trainable_parameters,
)
from verl.utils.model import load_causal_lm, load_tokenizer  # noqa: E402

MODEL = "builtin://tiny-qwen2-arith-sft"


def lora_cfg(**kw) -> SimpleNamespace:
    base = {"lora_rank": 8, "lora_alpha": 16, "target_modules": "all-linear", "exclude_modules": None}
    return SimpleNamespace(**{**base, "lora_adapter_path": None, **kw})


def adapted(seed: int = 0, **kw):
    return apply_lora(load_causal_lm(MODEL), lora_cfg(**kw), seed=seed)


def perturb(model, seed: int = 1) -> None:
    """Give every B a non-zero value (fresh adapters start at B = 0, i.e. equal to the base)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)


def logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


IDS = torch.tensor([[3, 5, 7, 9, 11, 2, 4], [6, 8, 10, 12, 14, 16, 18]])


def test_lora_enabled_by_rank_or_adapter_path():
    assert not lora_enabled(SimpleNamespace(lora_rank=0))
    assert lora_enabled(SimpleNamespace(lora_rank=16))
    assert lora_enabled(SimpleNamespace(lora_rank=0, lora_adapter_path="/a"))


def test_fresh_adapters_start_at_the_base_and_only_they_train():
    base = load_causal_lm(MODEL)
    model = adapted()
    assert torch.equal(logits(model, IDS), logits(base, IDS))  # B = 0
    counts = count_parameters(model)
    # all-linear on 2 layers x 7 projections of the hidden-128 model: r * (in + out) per projection
    hidden, inter = base.config.hidden_size, base.config.intermediate_size
    kv = base.config.num_key_value_heads * (hidden // base.config.num_attention_heads)
    per_layer = 8 * ((hidden + hidden) * 2 + (hidden + kv) * 2 + (hidden + inter) * 2 + (inter + hidden))
    assert counts["trainable"] == per_layer * base.config.num_hidden_layers
    assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    assert len(trainable_parameters(model)) == 4 * base.config.num_hidden_layers * 7 // 2


def test_same_seed_same_adapters_other_seed_other_ones():
    a, b, c = adapted(seed=3), adapted(seed=3), adapted(seed=4)
    sa, sb, sc = full_adapter_state(a), full_adapter_state(b), full_adapter_state(c)
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa if "lora_A" in k)


def test_merged_tensors_equal_peft_merge_and_unload_under_the_base_names():
    model = adapted()
    perturb(model)
    merged = dict(iter_merged_full_tensors(model))
    reference = adapted()
    perturb(reference)
    expected = reference.merge_and_unload().state_dict()
    assert set(merged) == set(expected) == set(load_causal_lm(MODEL).state_dict())
    for name, tensor in expected.items():
        torch.testing.assert_close(merged[name], tensor, rtol=0, atol=1e-6)
    # a plain model loaded with them computes the adapted model's logits: x @ (W + sBA) against x @ W + s(xB)A,
    # equal up to float summation order (logits of magnitude ~7 here)
    plain = load_causal_lm(MODEL)
    plain.load_state_dict(merged)
    assert (logits(plain, IDS) - logits(model, IDS)).abs().max() < 1e-4


def test_disable_adapter_is_the_base_policy():
    model = adapted()
    perturb(model)
    assert (logits(model, IDS) - logits(load_causal_lm(MODEL), IDS)).abs().max() > 1e-3
    with model.disable_adapter():
        assert torch.equal(logits(model, IDS), logits(load_causal_lm(MODEL), IDS))


def test_adapter_only_dcp_round_trip_with_optimizer_state(tmp_path):
    model = adapted(seed=1)
    opt = torch.optim.AdamW(trainable_parameters(model), lr=1e-2)
    for _ in range(2):
        model(input_ids=IDS, labels=IDS).loss.backward()
        opt.step()
        opt.zero_grad()
    save_dcp(str(tmp_path / "dcp"), model, opt, trainable_only=True)
    from torch.distributed.checkpoint import FileSystemReader

    keys = FileSystemReader(str(tmp_path / "dcp")).read_metadata().state_dict_metadata
    model_keys = {k.removeprefix("model.") for k in keys if k.startswith("model.")}
    assert model_keys == {n for n, p in model.named_parameters() if p.requires_grad}  # no base weight, no lm_head
    full_bytes = sum(p.numel() * 4 for p in load_causal_lm(MODEL).parameters())
    saved = sum(f.stat().st_size for f in (tmp_path / "dcp").iterdir())
    assert saved < full_bytes / 2  # adapter + its two Adam moments (+ DCP's per-tensor framing), not the base

    fresh = adapted(seed=2)
    fresh_opt = torch.optim.AdamW(trainable_parameters(fresh), lr=1e-2)
    load_dcp(str(tmp_path / "dcp"), fresh, fresh_opt, trainable_only=True)
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    # the next step is the same step
    for m, o in ((model, opt), (fresh, fresh_opt)):
        m(input_ids=IDS, labels=IDS).loss.backward()
        o.step()
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name


def test_saved_adapter_loads_with_peft_and_as_a_model_path(tmp_path):
    from peft import PeftModel

    model = adapted()
    perturb(model)
    out = save_adapter(model, full_adapter_state(model), load_tokenizer(MODEL), str(tmp_path / "lora_adapter"))
    names = {p.name for p in (tmp_path / "lora_adapter").iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer_config.json"} <= names
    assert "model.safetensors" not in names
    reloaded = PeftModel.from_pretrained(load_causal_lm(MODEL), out)
    assert torch.equal(logits(reloaded, IDS), logits(model, IDS))
    merged = load_causal_lm(out)  # an adapter directory is a model path: base + adapter, merged
    assert (logits(merged, IDS) - logits(model, IDS)).abs().max() < 1e-4  # summation order (see above)
    # and it starts a new LoRA run where the last one ended
    resumed = apply_lora(load_causal_lm(MODEL), lora_cfg(lora_rank=0, lora_adapter_path=out))
    assert torch.equal(logits(resumed, IDS), logits(model, IDS))
    assert count_parameters(resumed)["trainable"] == count_parameters(model)["trainable"]


def test_lean_decode_step_runs_the_adapted_weights():
    from verl.workers.rollout.lean_decode import LeanDecoder

    model = adapted()
    perturb(model)
    decoder = LeanDecoder.build(model)
    assert decoder is not None  # a PeftModel keeps the fused decode step
    decoder.refresh()
    merged = dict(iter_merged_full_tensors(model))
    layer = decoder.layers[0]
    torch.testing.assert_close(layer.o_w, merged["model.layers.0.self_attn.o_proj.weight"], rtol=0, atol=1e-6)
    q, k, v = (merged[f"model.layers.0.self_attn.{p}_proj.weight"] for p in "qkv")
    torch.testing.assert_close(layer.qkv_w, torch.cat([q, k, v]), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "kw, error, match",
    [
        ({"target_modules": "no_such_proj"}, ValueError, r"model\.target_modules='no_such_proj'"),
        ({"lora_rank": 0, "lora_adapter_path": "/nowhere"}, FileNotFoundError, r"lora_adapter_path='/nowhere'"),
    ],
)
def test_bad_lora_config_is_one_clear_error_naming_the_key(kw, error, match):
    with pytest.raises(error, match=match):
        apply_lora(load_causal_lm(MODEL), lora_cfg(**kw))


def test_critic_adapters_leave_the_value_head_to_train_in_full():
    from transformers import AutoModelForTokenClassification

    from verl.utils.model import resolve_model_path

    path = resolve_model_path(MODEL)
    critic = AutoModelForTokenClassification.from_pretrained(path, num_labels=1)
    critic = apply_lora(critic, lora_cfg(), seed=0, task_type="TOKEN_CLS", key="critic.model")
    trainable = [n for n, p in critic.named_parameters() if p.requires_grad]
    heads = [n for n in trainable if "lora_" not in n]
    assert heads == [
        "base_model.model.score.modules_to_save.default.weight",
        "base_model.model.score.modules_to_save.default.bias",
    ]
    merged = dict(iter_merged_full_tensors(critic))
    assert set(merged) == set(AutoModelForTokenClassification.from_pretrained(path, num_labels=1).state_dict())
