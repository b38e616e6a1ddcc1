"""Generation rounds: the prompts of one generation call and the batch generated from them, and the synchronous
source of rounds (``trainer.v1.trainer_mode=sync``; `verl.trainer.ppo.v1.colocate_async` is the asynchronous one)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from verl.protocol import DataProto
from verl.trainer.ppo.reward import PROMPT_KEYS
from verl.utils.dataset.rl_dataset import copy_prompts

__all__ = ["SyncRounds", "new_round"]


def new_round(loader: Any, prompts: DataProto | None, n: int) -> tuple[DataProto, DataProto]:
    """The prompts of a round (the loader's next batch, or ``prompts``) with a fresh ``uid`` per prompt, and the
    batch to generate from: ``n`` rows per prompt, each with its ``sample_index``."""
    batch = loader.next_batch() if prompts is None else copy_prompts(prompts)
    uids = [str(uuid.UUID(int=random.getrandbits(128))) for _ in range(len(batch))]
    batch.non_tensor_batch["uid"] = np.array(uids, dtype=object)
    gen_batch = batch.select(batch_keys=PROMPT_KEYS).repeat(n, interleave=True)
    # each response's sampling randomness is keyed by its index: the same samples on any number of workers
    gen_batch.batch["sample_index"] = torch.arange(len(gen_batch), dtype=torch.int64)
    return batch, gen_batch


class SyncRounds:
    """``trainer_mode=sync``: each round is generated when asked for, by the current policy."""

    def __init__(self, generate: Callable[[DataProto], DataProto]):
        self.generate = generate

    def next_round(
        self, version: int, make_round: Callable[[], tuple[DataProto, DataProto]]
    ) -> tuple[DataProto, DataProto, int]:
        batch, gen_batch = make_round()
        return batch, self.generate(gen_batch), version

    def pop_metrics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def drain(self) -> None:
        pass

    def shutdown(self) -> None:
        pass
