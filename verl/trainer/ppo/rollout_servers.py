"""Where an agent loop sends its requests: the rollout servers of the actor's worker group.

verl's agent loop (``AsyncLLMServerManager``) spreads requests over server handles and calls
``await handle.generate(request_id=..., prompt_ids=..., sampling_params=...)`` on one of them, getting a
``TokenOutput`` back. Here the rollout lives inside the actor worker (the hybrid engine), so its server is the
worker itself (``ActorRolloutRefWorker.generate``): with ``trainer.backend=local`` the worker group's handle reaches
it in process, and that handle is the one server. On the Ray backend the workers are separate processes whose
rollout holds full weights only during a batch call; per-request serving there is not wired yet (docs/rollout.md).
"""

from __future__ import annotations

from typing import Any

__all__ = ["async_rollout_servers"]


def async_rollout_servers(actor_rollout_wg: Any) -> list[Any]:
    """The server handles of the actor's rollout (``trainer.actor_rollout_wg``): objects with verl's
    ``async generate(prompt_ids, sampling_params, request_id, image_data=None, video_data=None)``."""
    try:
        actor_rollout_wg.generate  # noqa: B018 - in process, the group reads the worker's own attributes
    except AttributeError:
        raise NotImplementedError(
            "the rollout's per-request generate is reachable with trainer.backend=local only; on the Ray backend the "
            "actor workers' rollout has no per-request server yet (docs/rollout.md, 'The rollout interface')"
        ) from None
    return [actor_rollout_wg]
