"""The hybrid engine: the rollout samples with the actor's own module, so an update is seen by the next rollout."""

import pytest
import torch

from verl.protocol import DataProto
from verl.utils.config import load_config
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_prompts
from verl.workers.fsdp_workers import ActorRolloutRefWorker, rollout_engine
from verl.workers.rollout import HFRollout


def test_rollout_shares_the_actor_weights_in_place():
    cfg = load_config("ppo_trainer", ["actor_rollout_ref.ref.enable=true"])
    worker = ActorRolloutRefWorker(cfg.actor_rollout_ref, role="actor_rollout_ref", total_training_steps=1)
    worker.init_model()
    assert worker.rollout.module is worker.actor_module
    assert worker.ref_module is not worker.actor_module  # the reference is a separate frozen copy
    assert not any(p.requires_grad for p in worker.ref_module.parameters())
    ds = RLHFDataset("builtin://arithmetic/test?test_size=8", worker.tokenizer, max_prompt_length=64)
    prompts = collate_prompts([ds[i] for i in range(4)], worker.tokenizer.pad_token_id)
    prompts.meta_info["validate"] = True  # greedy
    before = worker.generate_sequences(DataProto.from_dict(dict(prompts.batch)))
    with torch.no_grad():  # an "update" that zeroes EOS's output row: its logit is 0, below the best token's
        worker.actor_module.lm_head.weight[worker.tokenizer.eos_token_id] = 0.0
    after = worker.generate_sequences(DataProto.from_dict(dict(prompts.batch)))
    max_len = cfg.data.max_response_length
    assert (before.batch["response_mask"].sum(-1) < max_len).all()  # the warm start stops at EOS
    assert (after.batch["response_mask"].sum(-1) == max_len).all()  # now it cannot: the new weights were used
    ref = worker.compute_ref_log_prob(before)
    assert torch.isfinite(ref.batch["ref_log_prob"]).all()


def _prompts(worker, n=4):
    ds = RLHFDataset("builtin://arithmetic/test?test_size=8", worker.tokenizer, max_prompt_length=64)
    return collate_prompts([ds[i] for i in range(n)], worker.tokenizer.pad_token_id)


def test_each_pass_uses_its_own_role_settings_and_leaves_the_callers_meta_alone():
    cfg = load_config(
        "ppo_trainer",
        [
            "actor_rollout_ref.ref.enable=true",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=128",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
        ],
    )
    worker = ActorRolloutRefWorker(cfg.actor_rollout_ref, role="actor_rollout_ref", total_training_steps=1)
    worker.init_model()
    batch = worker.generate_sequences(DataProto.from_dict(dict(_prompts(worker).batch)))
    batch.meta_info = {}
    seen = {}
    for name, policy in (("actor", worker.actor), ("ref", worker.ref_policy)):
        original = policy.compute_log_prob

        def spy(data, *a, _name=name, _original=original, **k):
            seen[_name] = dict(data.meta_info)
            return _original(data, *a, **k)

        policy.compute_log_prob = spy
    worker.compute_log_prob(batch)  # the controller's order: old log-probs, then the reference
    worker.compute_ref_log_prob(batch)
    assert batch.meta_info == {}  # nothing written into the controller's batch
    assert seen["actor"]["micro_batch_size"] == 128 and seen["ref"]["micro_batch_size"] == 2


def test_temperature_zero_rollouts_are_scored_at_temperature_one():
    scored = {}
    for temperature in (0.0, 1.0):
        cfg = load_config("ppo_trainer", [f"actor_rollout_ref.rollout.temperature={temperature}"])
        worker = ActorRolloutRefWorker(cfg.actor_rollout_ref, role="actor_rollout", total_training_steps=1)
        worker.init_model()
        prompts = DataProto.from_dict(dict(_prompts(worker).batch))
        prompts.meta_info["validate"] = True  # greedy either way: the same responses
        batch = worker.generate_sequences(prompts)
        scored[temperature] = worker.compute_log_prob(batch).batch["old_log_probs"]
    assert torch.isfinite(scored[0.0]).all()  # not logits / 0
    torch.testing.assert_close(scored[0.0], scored[1.0])


def test_stop_tokens_come_from_generation_config_too(tmp_path):
    import json
    import shutil

    from verl.utils.model import resolve_model_path
    from verl.workers.fsdp_workers import stop_token_ids

    src = resolve_model_path("builtin://tiny-qwen2-arith-sft")
    model_dir = tmp_path / "chat-model"
    shutil.copytree(src, model_dir)
    gen = json.loads((model_dir / "generation_config.json").read_text())
    gen["eos_token_id"] = [5, 2]  # a chat model's several stop ids (e.g. <|im_end|>, <|endoftext|>)
    (model_dir / "generation_config.json").write_text(json.dumps(gen))
    cfg = load_config("ppo_trainer", [f"actor_rollout_ref.model.path={model_dir}"])
    worker = ActorRolloutRefWorker(cfg.actor_rollout_ref, role="actor_rollout", total_training_steps=1)
    worker.init_model()
    assert worker.rollout.eos_token_ids == [5, 2]
    (model_dir / "generation_config.json").unlink()
    assert stop_token_ids(str(model_dir), worker.tokenizer) == [worker.tokenizer.eos_token_id]


def test_reward_model_reads_the_conversation_in_its_own_chat_template(tmp_path):
    import numpy as np
    from transformers import AutoModelForSequenceClassification

    from verl.models.tiny import TinyModelConfig, build_model_config
    from verl.utils.model import load_tokenizer
    from verl.workers.fsdp_workers import RewardModelWorker

    tok = load_tokenizer("builtin://tiny-qwen2-arith-sft")  # has a chat template
    assert tok.chat_template
    rm_cfg = build_model_config(tok, TinyModelConfig(hidden_size=32, num_layers=1))
    rm_cfg.num_labels = 1
    AutoModelForSequenceClassification.from_config(rm_cfg).save_pretrained(tmp_path / "rm")
    tok.save_pretrained(tmp_path / "rm")
    cfg = load_config("ppo_trainer", ["reward_model.enable=true", f"reward_model.model.path={tmp_path / 'rm'}"])
    rm = RewardModelWorker(cfg.reward_model, tok)
    rm.init_model()

    messages = [{"role": "user", "content": "What is 1 + 2?"}]
    prompt_text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    prompt_ids = tok(prompt_text, add_special_tokens=False)["input_ids"]
    pad = 3
    prompts = torch.tensor([[tok.pad_token_id] * pad + prompt_ids])
    response = tok("3", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    responses = torch.tensor([response])
    data = DataProto.from_dict(
        {
            "prompts": prompts,
            "responses": responses,
            "response_mask": torch.ones_like(responses),
            "attention_mask": torch.cat(
                [torch.tensor([[0] * pad + [1] * len(prompt_ids)]), torch.ones_like(responses)], 1
            ),
        }
    )
    plain = rm.rm_input_texts(data)[0]
    assert plain == prompt_text + "3"  # the prompt as the policy saw it, markup kept, no padding
    data.non_tensor_batch["raw_prompt"] = np.array([None], dtype=object)
    data.non_tensor_batch["raw_prompt"][0] = messages
    chat = rm.rm_input_texts(data)[0]
    assert chat == tok.apply_chat_template(messages + [{"role": "assistant", "content": "3"}], tokenize=False)
    scores = rm.compute_rm_score(data).batch["rm_scores"]
    assert scores[0, -1] != 0 and (scores[0, :-1] == 0).all()


def test_override_config_reaches_the_loaded_models_and_bad_keys_are_named():
    import pytest

    cfg = load_config(
        "ppo_trainer",
        ["actor_rollout_ref.ref.enable=true", "+actor_rollout_ref.model.override_config.attention_dropout=0.25"],
    )
    worker = ActorRolloutRefWorker(cfg.actor_rollout_ref, role="actor_rollout_ref", total_training_steps=1)
    worker.init_model()
    assert worker.actor_module.config.attention_dropout == 0.25
    assert worker.ref_module.config.attention_dropout == 0.25
    bad = load_config("ppo_trainer", ["+actor_rollout_ref.model.override_config.attention_dropot=0.1"])
    worker = ActorRolloutRefWorker(bad.actor_rollout_ref, role="actor_rollout", total_training_steps=1)
    with pytest.raises(ValueError, match=r"override_config: \['attention_dropot'\]"):
        worker.init_model()


def test_unimplemented_choices_of_ported_scripts_run_with_a_warning():
    from verl.trainer.main_ppo import warn_unimplemented_choices

    cfg = load_config("ppo_trainer", ["actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.actor.strategy=fsdp"])
    messages = warn_unimplemented_choices(cfg)
    assert len(messages) == 1 and messages[0].startswith("actor_rollout_ref.rollout.name=sglang: sampling runs on")
    assert warn_unimplemented_choices(load_config("ppo_trainer", ["actor_rollout_ref.rollout.name=vllm"])) == []
    assert warn_unimplemented_choices(load_config("ppo_trainer")) == []


def test_the_rollout_engine_comes_from_the_registry_and_unwired_names_run_the_hf_sampler():
    assert rollout_engine("hf", "sync") is HFRollout and rollout_engine("hf", "async") is HFRollout
    assert rollout_engine("sglang", "async") is HFRollout  # the config check has warned that the HF sampler runs
    assert rollout_engine("vllm", "sync").__name__ == "vLLMRollout"  # resolving it does not import vLLM
    with pytest.raises(ValueError, match=r"rollout\.mode='server'"):
        rollout_engine("hf", "server")
