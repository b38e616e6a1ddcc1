"""verl's built-in interaction ``Gsm8kInteraction``: a user who checks the answer and asks for another try.

After each assistant turn it scores the latest assistant message against the sample's
``interaction_kwargs.ground_truth`` with the GSM8K rule (``verl.utils.reward_score.gsm8k``, strict: the answer
after ``####``). A correct answer ends the conversation with reward 1; a wrong one gets the user turn "Your response
is incorrect! You need to reflect on your answer and try again." and reward 0, so the model learns to revise.

Interaction YAML: ``examples/agent_loop/interaction_configs/gsm8k_interaction.yaml``; data row::

    extra_info: {interaction_kwargs: {name: gsm8k, query: "...", ground_truth: "72"}}
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.interactions.base import BaseInteraction
from verl.utils.reward_score import gsm8k

__all__ = ["Gsm8kInteraction"]

CORRECT = "Your response is correct!"
INCORRECT = "Your response is incorrect! You need to reflect on your answer and try again."


class Gsm8kInteraction(BaseInteraction):
    """Per-instance state in ``_instance_dict[instance_id]``: the last ``response``, the ``ground_truth`` and the
    last ``reward``."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        self._instance_dict: dict[str, dict[str, Any]] = {}

    async def start_interaction(
        self, instance_id: str | None = None, ground_truth: str | None = None, **kwargs: Any
    ) -> str:
        instance_id = instance_id if instance_id is not None else str(uuid4())
        self._instance_dict[instance_id] = {"response": "", "ground_truth": ground_truth, "reward": 0.0}
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        """Score the latest assistant message (an empty answer when there is none)."""
        last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        state = self._instance_dict[instance_id]
        state["response"] = last.get("content") if last is not None else ""
        reward = await self.calculate_score(instance_id)
        state["reward"] = reward
        if reward == 1.0:
            return True, CORRECT, reward, {}
        return False, INCORRECT, reward, {}

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        state = self._instance_dict[instance_id]
        return gsm8k.compute_score(
            state["response"], state["ground_truth"], method="strict", format_score=0.0, score=1.0
        )

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        """Drop the instance (a KeyError for one never started: a lifecycle bug in the caller)."""
        del self._instance_dict[instance_id]
