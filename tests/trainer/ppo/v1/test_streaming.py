"""The wall-clock feeder of ``separate_async`` with an engine that records its calls: every prompt is generated once
and trained once, in dataloader order; versions published by the trainer reach the chunks started after; a
checkpoint saves finished groups with their responses and the rest as prompts; a failing replica surfaces in the
trainer's thread; nothing runs after ``drain``."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.v1.streaming import StreamingRollout
from verl.utils.config import load_config


class Engine:
    """The replica calls, in process: a response row is its prompt's number; versions are recorded per chunk."""

    def __init__(self, fail_after: int | None = None):
        self.version = None
        self.chunks: list[tuple[list[int], int]] = []
        self.fail_after = fail_after
        self.weights_of = {}

    def policy_weights(self):
        return [{"v": len(self.weights_of)}]

    def load_ahead_weights(self, weights, version):
        self.version = version
        return [0.0]

    def generate_sequences_ahead(self, gen):
        if self.fail_after is not None and len(self.chunks) >= self.fail_after:
            raise RuntimeError("worker process of role 'rollout_replica' rank 0 of 1 died")
        prompts = gen.batch["input_ids"][:, 0].tolist()
        self.chunks.append((prompts, self.version))
        return DataProto.from_dict({"responses": gen.batch["input_ids"].clone()})

    def ahead_rng_state(self):
        return [torch.tensor([0, len(self.chunks), 0])]

    def set_ahead_rng_state(self, state):
        pass


class Loader:
    def __init__(self, batch: int):
        self.batch, self.next = batch, 0

    def __call__(self):
        ids = torch.arange(self.next, self.next + self.batch)[:, None].repeat(1, 3)
        self.next += self.batch
        prompts = DataProto.from_dict(
            {
                "input_ids": ids,
                "attention_mask": torch.ones_like(ids),
                "position_ids": torch.arange(3).repeat(len(ids), 1),
            }
        )
        prompts.non_tensor_batch["uid"] = np.array([str(i) for i in ids[:, 0].tolist()], dtype=object)
        return prompts, None


def sampler(strategy="drop", threshold=8):
    return load_config(
        "ppo_trainer",
        [
            f"trainer.v1.sampler.max_off_policy_strategy={strategy}",
            f"trainer.v1.sampler.max_off_policy_threshold={threshold}",
        ],
    ).trainer.v1.sampler


def test_each_prompt_generated_and_trained_once_in_order():
    engine, loader = Engine(), Loader(4)
    stream = StreamingRollout(engine, sampler(), lag=1, batch_prompts=4, chunk_prompts=2, n=2)
    trained = []
    for version in range(5):
        prompts, out, (first, last) = stream.next_round(version, loader)
        trained += prompts.batch["input_ids"][:, 0].tolist()
        assert out.batch["responses"][::2, 0].tolist() == prompts.batch["input_ids"][:, 0].tolist()  # aligned
        assert len(first) == len(last) == 8 and (last >= first).all() and (version - first <= 8).all()
    stream.drain()
    generated = [p for chunk, _ in engine.chunks for p in chunk[::2]]
    assert trained == list(range(20))  # oldest first, none twice
    assert len(generated) == len(set(generated))  # none generated twice
    assert all(v is not None for _, v in engine.chunks)
    before = len(engine.chunks)
    threading.Event().wait(0.2)
    assert len(engine.chunks) == before  # drained: nothing generates while the trainer does not train
    stream.shutdown()


def test_checkpoint_keeps_finished_groups_and_reissues_the_rest():
    engine, loader = Engine(), Loader(4)
    stream = StreamingRollout(engine, sampler(), lag=1, batch_prompts=4, chunk_prompts=2, n=2)
    stream.next_round(0, loader)
    state = stream.state_dict()
    stream.shutdown()
    alive = {index for index, *_ in state["groups"]}
    finished = {index for index, _, done, *_ in state["groups"] if done}
    assert alive == set(range(4, 8)) and finished <= alive  # 8 taken (lag 1: 2 batches alive), 4 trained
    resumed = StreamingRollout(Engine(), sampler(), lag=1, batch_prompts=4, chunk_prompts=2, n=2)
    resumed.load_state_dict(state)
    loader2 = Loader(4)
    loader2.next = loader.next
    prompts, _, _ = resumed.next_round(1, loader2)
    assert prompts.batch["input_ids"][:, 0].tolist() == [4, 5, 6, 7]  # the saved groups, then the loader's
    resumed.shutdown()


def test_a_failing_replica_surfaces_in_the_trainer():
    stream = StreamingRollout(Engine(fail_after=1), sampler(), lag=0, batch_prompts=4, chunk_prompts=2, n=2)
    with pytest.raises(RuntimeError, match="rollout_replica"):
        stream.next_round(0, Loader(4))
    stream.shutdown()
