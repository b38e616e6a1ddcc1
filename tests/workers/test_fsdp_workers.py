"""The hybrid engine: the rollout samples with the actor's own module, so an update is seen by the next rollout."""

import torch

from verl.protocol import DataProto
from verl.utils.config import load_config
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_prompts
from verl.workers.fsdp_workers import ActorRolloutRefWorker


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
