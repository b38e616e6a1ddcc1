"""verl's simulated user (``verl.interactions.base.BaseInteraction``): a turn that answers the model after it stops.

When a trajectory's assistant turn ends without a tool call, the agent loop asks the sample's interaction
(``extra_info.interaction_kwargs.name``) for the next user turn: ``generate_response`` reads the conversation so
far and returns whether to stop, the text of the user turn, and that turn's reward. This is how feedback ("that is
wrong, try again") and multi-turn tasks with a scripted user are trained. Lifecycle per trajectory::

    instance_id = await interaction.start_interaction(request_id, **interaction_kwargs)
    should_terminate, text, reward, metrics = await interaction.generate_response(instance_id, messages)
    ...
    await interaction.finalize_interaction(instance_id)

Interactions come from verl's interaction YAML (``rollout.multi_turn.interaction_config_path``,
`verl.interactions.utils.interaction_registry`).
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

__all__ = ["BaseInteraction"]


class BaseInteraction:
    """The lifecycle with neutral defaults; subclasses override ``generate_response`` (and keep per-instance state
    keyed by ``instance_id`` when they need it: one object serves every trajectory).

    Args:
        config: the entry's ``config`` from the interaction YAML; its ``name`` (set by the loader) is the name
            samples refer to (``interaction_agent`` when absent).
    """

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.name: str = config.get("name", "interaction_agent")

    async def start_interaction(self, instance_id: str | None = None, **kwargs: Any) -> str:
        """Begin one trajectory's interaction with the sample's ``interaction_kwargs``; returns its id (a new uuid
        when none is given)."""
        return instance_id if instance_id is not None else str(uuid4())

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        """The next user turn: ``(should_terminate, text, turn_reward, metrics)``. The base class ends the
        conversation with no text and no reward: a subclass decides what the user says."""
        return True, "", 0.0, {}

    async def calculate_score(self, *args: Any, **kwargs: Any) -> float:
        """A score of the interaction so far (0 unless a subclass scores)."""
        return 0.0

    async def finalize_interaction(self, *args: Any, **kwargs: Any) -> None:
        """Release the trajectory's state."""
