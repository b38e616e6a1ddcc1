"""Rollout engines: the rollout interface (`BaseRollout`: batch ``generate_sequences`` and per-request async
``generate``), its registry (`get_rollout_class`) and the built-in HF KV-cache sampler (`HFRollout`)."""

from verl.workers.rollout.base import BaseRollout, TokenOutput, get_rollout_class
from verl.workers.rollout.hf_rollout import HFRollout

__all__ = ["BaseRollout", "HFRollout", "TokenOutput", "get_rollout_class"]
