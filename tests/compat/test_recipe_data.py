"""A recipe's data path as verl writes it: ``create_rl_dataset`` / ``create_rl_sampler`` from ``main_ppo``, a torch
``DataLoader`` with ``collate_fn``, and ``DataProto.from_single_dict`` on each batch."""

from __future__ import annotations

import numpy as np
from torch.utils.data import DataLoader

from verl import DataProto
from verl.trainer.main_ppo import create_rl_dataset, create_rl_sampler
from verl.utils import hf_tokenizer
from verl.utils.config import load_config
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn


def test_dataset_sampler_and_loader_as_a_recipe_builds_them():
    config = load_config("ppo_trainer", ["data.train_files=builtin://arithmetic/train?train_size=24", "data.seed=3"])
    tokenizer = hf_tokenizer(config.actor_rollout_ref.model.path)
    dataset = create_rl_dataset(config.data.train_files, config.data, tokenizer, None, max_samples=20)
    assert isinstance(dataset, RLHFDataset) and len(dataset) == 20
    sampler = create_rl_sampler(config.data, dataset)
    order = list(sampler)
    assert sorted(order) == list(range(20)) and order == list(create_rl_sampler(config.data, dataset))  # seeded
    fresh = create_rl_sampler(config.data, dataset)  # a sampler's generator moves on with each pass
    loader = DataLoader(dataset, batch_size=8, sampler=fresh, collate_fn=collate_fn, drop_last=True)
    batches = [DataProto.from_single_dict(b) for b in loader]
    assert [len(b) for b in batches] == [8, 8]
    first = batches[0]
    assert list(first.non_tensor_batch["index"]) == order[:8]
    assert first.non_tensor_batch["data_source"].dtype == object
    assert all(isinstance(r, dict) and "ground_truth" in r for r in first.non_tensor_batch["reward_model"])
    unshuffled = load_config("ppo_trainer", ["data.shuffle=false"])
    assert list(create_rl_sampler(unshuffled.data, dataset)) == list(range(20))


def test_verls_positional_construction_reads_the_data_section():
    config = load_config(
        "ppo_trainer",
        [
            "data.train_files=builtin://arithmetic/train?train_size=16",
            "data.max_prompt_length=30",  # shorter than every arithmetic prompt
            "data.filter_overlong_prompts=false",
            "data.truncation=left",
        ],
    )
    tokenizer = hf_tokenizer(config.actor_rollout_ref.model.path)
    dataset = RLHFDataset(config.data.train_files, tokenizer, config.data)  # verl: (data_files, tokenizer, config)
    assert len(dataset) == 16 and dataset.num_truncated == 16
    assert np.all([len(item["input_ids"]) == 30 for item in dataset.items])
