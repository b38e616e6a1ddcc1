"""Rollout engines: turn a batch of prompts into sampled responses (``generate_sequences``)."""

from verl.workers.rollout.hf_rollout import HFRollout

__all__ = ["HFRollout"]
