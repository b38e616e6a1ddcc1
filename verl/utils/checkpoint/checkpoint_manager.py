"""verl's checkpoint-manager base class: what to save and load, and how many ``global_step_N`` directories to keep.

A subclass (an engine's checkpoint manager) implements `BaseCheckpointManager.save_checkpoint` /
`load_checkpoint`; the base class keeps the retention rule, so a limit of ``max_ckpt_to_keep`` never leaves the run
without a checkpoint:

- before a save, `ensure_checkpoint_capacity` removes the oldest ones down to ``max_ckpt_to_keep - 1``, and with a
  limit of 1 removes nothing (the one checkpoint stays until the new one exists);
- after a successful save, `register_checkpoint` records it and removes the oldest beyond ``max_ckpt_to_keep``.

A limit of 0 or None keeps every checkpoint. ``latest_checkpointed_iteration.txt`` in the run directory names the
newest complete step (`find_latest_ckpt_path`).
"""

from __future__ import annotations

import os
import random
import shutil
import time
from typing import Any

import numpy as np
import torch

__all__ = ["BaseCheckpointManager", "find_latest_ckpt_path", "get_checkpoint_tracker_filename", "should_save_ckpt_esi"]

TRACKER_FILE = "latest_checkpointed_iteration.txt"
# what a manager built without a checkpoint section saves and loads (verl's class); with one, the section says
DEFAULT_CONTENTS = ("model", "optimizer", "extra")


class BaseCheckpointManager:
    """What a checkpoint holds (``checkpoint_config.save_contents`` / ``load_contents``: any of ``model``,
    ``optimizer``, ``extra``, ``hf_model``; default model, optimizer and extra) and which ones are kept
    (module docstring). ``checkpoint_config``: the role's typed ``checkpoint`` section (``CheckpointConfig``), read
    as attributes. ``previous_saved_paths`` lists this run's checkpoints, oldest first."""

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        lr_scheduler: Any = None,
        processing_class: Any = None,
        checkpoint_config: Any = None,
    ):
        self.model = model
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.processing_class = processing_class
        self.checkpoint_config = checkpoint_config
        given = checkpoint_config is not None
        self.checkpoint_save_contents = list(checkpoint_config.save_contents if given else DEFAULT_CONTENTS)
        self.checkpoint_load_contents = list(checkpoint_config.load_contents if given else DEFAULT_CONTENTS)
        self.previous_global_step: int | None = None
        self.previous_saved_paths: list[str] = []
        dist = torch.distributed
        self.rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        self.world_size = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1

    @property
    def should_save_model(self) -> bool:
        return "model" in self.checkpoint_save_contents

    @property
    def should_save_optimizer(self) -> bool:
        return "optimizer" in self.checkpoint_save_contents

    @property
    def should_save_extra(self) -> bool:
        return "extra" in self.checkpoint_save_contents

    @property
    def should_save_hf_model(self) -> bool:
        return "hf_model" in self.checkpoint_save_contents

    @property
    def should_load_model(self) -> bool:
        return "model" in self.checkpoint_load_contents

    @property
    def should_load_optimizer(self) -> bool:
        return "optimizer" in self.checkpoint_load_contents

    @property
    def should_load_extra(self) -> bool:
        return "extra" in self.checkpoint_load_contents

    def save_checkpoint(
        self, local_path: str, hdfs_path: str | None = None, global_step: int = 0, max_ckpt_to_keep: int | None = None
    ) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement save_checkpoint")

    def load_checkpoint(self, local_path: str, hdfs_path: str | None = None, del_local_after_load: bool = False):
        raise NotImplementedError(f"{type(self).__name__} must implement load_checkpoint")

    @staticmethod
    def checkpath(local_path: str | None, hdfs_path: str | None) -> tuple[bool, str]:
        """``(is_local, path)``: the local path when there is one, else the HDFS path."""
        if local_path is None and hdfs_path is None:
            raise ValueError("a checkpoint needs a local path or an HDFS path; both are None")
        return local_path is not None, local_path if local_path is not None else hdfs_path

    def remove_previous_save_local_path(self, path: str | list[str]) -> None:
        """Delete the checkpoint directories ``path`` (missing ones are skipped)."""
        for p in [path] if isinstance(path, str) else path:
            shutil.rmtree(os.path.abspath(p), ignore_errors=True)

    @staticmethod
    def _limit(max_ckpt_to_keep: Any) -> int:
        return max_ckpt_to_keep if isinstance(max_ckpt_to_keep, int) and max_ckpt_to_keep > 0 else 0

    def ensure_checkpoint_capacity(self, max_ckpt_to_keep: int | None) -> None:
        """Before a save: keep the newest ``max_ckpt_to_keep - 1`` checkpoints (none removed for a limit of 1)."""
        limit = self._limit(max_ckpt_to_keep)
        if limit > 1 and len(self.previous_saved_paths) >= limit:
            self._keep_newest(limit - 1)

    def register_checkpoint(self, new_path: str, max_ckpt_to_keep: int | None) -> None:
        """After a successful save of ``new_path``: record it and keep the newest ``max_ckpt_to_keep``."""
        self.previous_saved_paths.append(new_path)
        limit = self._limit(max_ckpt_to_keep)
        if limit and len(self.previous_saved_paths) > limit:
            self._keep_newest(limit)

    def _keep_newest(self, n: int) -> None:
        cut = len(self.previous_saved_paths) - n
        self.remove_previous_save_local_path(self.previous_saved_paths[:cut])
        self.previous_saved_paths = self.previous_saved_paths[cut:]

    @staticmethod
    def get_rng_state() -> dict[str, Any]:
        """Python, NumPy and torch RNG states (and the CUDA one when CUDA is in use)."""
        state = {"cpu": torch.get_rng_state(), "numpy": np.random.get_state(), "random": random.getstate()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state()
        return state

    @staticmethod
    def load_rng_state(rng_state: dict[str, Any]) -> None:
        torch.set_rng_state(rng_state["cpu"])
        np.random.set_state(rng_state["numpy"])
        random.setstate(rng_state["random"])
        if "cuda" in rng_state and torch.cuda.is_available():
            torch.cuda.set_rng_state(rng_state["cuda"])


def get_checkpoint_tracker_filename(root_path: str) -> str:
    """The pointer file naming a run directory's newest complete checkpoint step."""
    return os.path.join(root_path, TRACKER_FILE)


def find_latest_ckpt_path(path: str | None, directory_format: str = "global_step_{}") -> str | None:
    """The newest complete checkpoint under the run directory ``path`` (its pointer file's step), or None when
    there is no pointer file or the directory it names is gone."""
    if path is None:
        return None
    tracker = get_checkpoint_tracker_filename(path)
    if not os.path.isfile(tracker):
        return None
    with open(tracker) as f:
        step = int(f.read().strip())
    ckpt = os.path.join(path, directory_format.format(step))
    return ckpt if os.path.exists(ckpt) else None


# Environment variables in which cloud schedulers announce when a reserved capacity block (an "elastic server
# instance") is taken back: Volcano Engine ML Platform, then AWS SageMaker; both hold a Unix time in seconds.
ESI_EXPIRATION_VARS = (
    "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP",
    "SAGEMAKER_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP",
)


def should_save_ckpt_esi(max_steps_duration: float, save_ckpt_duration: float = 60, redundant_time: float = 0) -> bool:
    """Whether to checkpoint now because the machine's reservation ends before another step and a save could both
    finish (verl's function): the remaining time is at most ``max_steps_duration + save_ckpt_duration +
    redundant_time`` seconds. False without an announced expiry, with an unreadable one, and on Volcano Engine once
    it has passed or before any step was timed (``max_steps_duration`` 0); SageMaker's announced expiry counts as
    close also when it has passed, as verl has it."""
    needed = max_steps_duration + save_ckpt_duration + redundant_time
    mlp, aws = (os.environ.get(name) for name in ESI_EXPIRATION_VARS)
    if mlp:
        try:
            remaining = float(mlp) - time.time()
        except ValueError:
            return False
        return max_steps_duration > 0 and 0 < remaining <= needed
    if aws:
        try:
            remaining = int(aws) - time.time()
        except ValueError:
            return False
        return remaining < needed
    return False
