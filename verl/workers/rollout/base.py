"""The rollout interface every sampling engine implements, and the registry that picks one by name and mode.

Two calls, one engine:

* ``generate_sequences(DataProto) -> DataProto``: the batch call the trainer makes each step (left-padded prompts
  in, ``responses``/``rollout_log_probs``/... out; the output contract is `HFRollout`'s module docstring);
* ``async generate(prompt_ids, sampling_params, request_id) -> TokenOutput``: one request, token ids in, token ids
  and their log-probs out -- what verl's agent loop drives through its server manager (verl's server mode,
  ``rollout.mode=async``). Concurrent calls are the engine's to batch.

The method names and arguments are verl's (``verl.workers.rollout.base.BaseRollout`` and the inference servers'
``generate``), so an engine or a caller written against verl fits. ``resume``/``update_weights``/``release`` are
verl's hooks around a generation phase for engines holding their own copy of the weights and KV cache (vLLM
sleeping between steps); the HF sampler samples with the actor's module in place and needs none of them.

`get_rollout_class` resolves ``actor_rollout_ref.rollout.name`` and ``.mode`` to the engine class through
``_ROLLOUT_REGISTRY``; an engine registers by adding its ``(name, mode)`` keys there (module path, imported only
when resolved, so an engine's heavy dependencies load only when it is chosen).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from verl.protocol import DataProto

__all__ = ["BaseRollout", "TokenOutput", "get_rollout_class", "registered_rollouts"]

ROLLOUT_MODES = ("sync", "async")


@dataclass
class TokenOutput:
    """What one ``generate`` request returns (verl's ``TokenOutput`` fields, plus ``finish_reason``).

    ``token_ids`` and ``log_probs`` have one entry per generated token; a stop token (EOS or a requested stop id)
    that ended the response is its last entry, as in vLLM.
    """

    token_ids: list[int]  # the response's token ids (no prompt)
    log_probs: list[float] | None = None  # log-prob of each of token_ids under the engine's sampling distribution
    routed_experts: Any = None  # MoE routing of the response tokens: not recorded here
    stop_reason: str | None = None  # verl's: "completed" (a stop token or max_tokens), "aborted", None: unknown
    num_preempted: int | None = None  # times the engine preempted the request (None: the engine does not say)
    finish_reason: str | None = None  # vLLM's: "stop" (a stop token) or "length" (max_tokens reached)

    def model_dump(self) -> dict[str, Any]:
        """The fields as a dict (the name of pydantic's method, which verl's ``TokenOutput`` is)."""
        return asdict(self)


class BaseRollout(ABC):
    """A sampling engine: the batch call the trainer uses and the per-request call an agent loop drives.

    ``config``, ``model_config`` and ``device_mesh`` are verl's constructor arguments, kept for engines ported from
    verl; an engine may take its own (`HFRollout` takes the module it samples with). Engines built by the actor
    worker implement `build_hybrid`.
    """

    def __init__(self, config: Any = None, model_config: Any = None, device_mesh: Any = None):
        self.config = config
        self.model_config = model_config
        self.device_mesh = device_mesh

    @classmethod
    def build_hybrid(
        cls,
        *,
        module: torch.nn.Module,
        config: Any,
        tokenizer: Any,
        eos_token_ids: list[int],
        seed: int,
        model_path: str | None = None,
    ) -> BaseRollout:
        """The engine the actor worker samples with (hybrid engine: ``module`` is the policy whose weights it must
        follow; ``config`` the ``actor_rollout_ref.rollout`` section; ``eos_token_ids`` the ids that end a response;
        ``seed`` the run's seed). An engine with its own weight copy loads ``model_path`` and takes updates
        through `update_weights`."""
        raise NotImplementedError(f"{cls.__name__} cannot be built by the actor worker: implement build_hybrid")

    @abstractmethod
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        """One response per left-padded prompt row (the trainer's batch call)."""

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        priority: int = 0,
    ) -> TokenOutput:
        """One request: the response to ``prompt_ids`` sampled with ``sampling_params`` (vLLM's names:
        ``temperature``, ``top_p``, ``top_k``, ``max_tokens``, ``stop_token_ids``, ``seed``, ...). Concurrent calls
        are batched by the engine; a bad request fails alone."""
        raise NotImplementedError(
            f"{type(self).__name__} has no per-request async generate; use an engine registered for "
            f"rollout.mode=async ({', '.join(n for n, m in registered_rollouts() if m == 'async')})"
        )

    @abstractmethod
    async def resume(self, tags: list[str]) -> None:
        """Bring the engine's ``tags`` (``"weights"``, ``"kv_cache"``) back into device memory before generating."""

    @abstractmethod
    async def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]], **kwargs: Any) -> None:
        """Load ``(parameter name, tensor)`` pairs into the engine's model (the policy's new weights)."""

    @abstractmethod
    async def release(self) -> None:
        """Free the engine's weights and KV cache from device memory between generation phases."""


# (rollout.name, rollout.mode) -> the engine class's import path
_ROLLOUT_REGISTRY: dict[tuple[str, str], str] = {
    ("hf", "sync"): "verl.workers.rollout.hf_rollout.HFRollout",
    ("hf", "async"): "verl.workers.rollout.hf_rollout.HFRollout",
    ("vllm", "sync"): "verl.workers.rollout.vllm_rollout.vLLMRollout",
    ("vllm", "async"): "verl.workers.rollout.vllm_rollout.vLLMRollout",
}


def registered_rollouts() -> list[tuple[str, str]]:
    """The ``(rollout.name, rollout.mode)`` pairs `get_rollout_class` resolves."""
    return sorted(_ROLLOUT_REGISTRY)


def get_rollout_class(rollout_name: str, mode: str = "async") -> type[BaseRollout]:
    """The engine class of ``actor_rollout_ref.rollout.name`` in ``rollout.mode`` (verl's function)."""
    if mode not in ROLLOUT_MODES:
        raise ValueError(f"actor_rollout_ref.rollout.mode={mode!r}: the modes are {', '.join(ROLLOUT_MODES)}")
    path = _ROLLOUT_REGISTRY.get((rollout_name, mode))
    if path is None:
        known = ", ".join(f"{n}/{m}" for n, m in registered_rollouts())
        raise ValueError(
            f"actor_rollout_ref.rollout.name={rollout_name!r} with rollout.mode={mode!r} is not a registered rollout "
            f"engine (name/mode: {known}); set rollout.name=hf"
        )
    module_name, class_name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module_name), class_name)
