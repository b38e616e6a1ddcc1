"""``single_turn_agent``: one model turn per row (verl's default agent loop), the prompt exactly as the dataset
tokenized it.

The prompt is the row's own token ids (``raw_prompt_ids``: the batch's prompt without its padding), so a run in
``rollout.mode=async`` samples from the same prompts as ``sync``; a row without them is rendered from its messages
(``raw_prompt``) with the chat template.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.base import AgentLoopBase, AgentLoopOutput, register
from verl.experimental.agent_loop.chat_turns import ChatTurns

__all__ = ["SingleTurnAgentLoop"]


@register("single_turn_agent")
class SingleTurnAgentLoop(AgentLoopBase):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        rollout = self.config.actor_rollout_ref.rollout
        self.prompt_length, self.response_length = int(rollout.prompt_length), int(rollout.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        prompt_ids = kwargs.get("raw_prompt_ids")
        if prompt_ids is None:
            prompt_ids = ChatTurns.of(self.tokenizer).prompt_ids(list(kwargs["raw_prompt"]))
        prompt_ids = [int(t) for t in prompt_ids]
        params = {**sampling_params, "max_tokens": self.response_length}
        out = await self.server_manager.generate(uuid4().hex, prompt_ids=prompt_ids, sampling_params=params)
        ids = list(out.token_ids)[: self.response_length]
        logprobs = list(out.log_probs)[: len(ids)] if out.log_probs is not None else None
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=ids,
            response_mask=[1] * len(ids),
            response_logprobs=logprobs,
            num_turns=2,
            metrics={"assistant_turns": 1, "user_turns": 0},
            extra_fields={"finish_reason": out.finish_reason or "stop"},
        )
