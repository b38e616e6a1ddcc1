"""Simulated users for multi-turn rollouts (verl's ``verl.interactions``): `BaseInteraction`, the built-in
`Gsm8kInteraction`, and verl's interaction YAML loader. docs/tools.md#interactions."""

from verl.interactions.base import BaseInteraction
from verl.interactions.gsm8k_interaction import Gsm8kInteraction
from verl.interactions.utils.interaction_registry import initialize_interactions_from_config

__all__ = ["BaseInteraction", "Gsm8kInteraction", "initialize_interactions_from_config"]
