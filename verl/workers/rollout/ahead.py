"""`AheadRollout`: a second rollout engine over its own copy of the policy, so generation can run while the actor
trains (``trainer.v1.trainer_mode=colocate_async``, docs/async.md).

The hybrid engine samples with the actor's parameters in place, so it cannot generate while an update changes them.
The ahead engine holds a copy that changes only when the controller hands it a version of the weights
(`load_weights`): the trainable tensors (a LoRA policy: its adapters alone, since the frozen base never changes).
It is built with the hybrid engine's settings and sampling state (``seed``, call counter), so a batch it samples
with version ``v`` holds the tokens the hybrid engine would have sampled with ``v``: bit for bit on CPU.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable

import torch

from verl.protocol import DataProto
from verl.single_controller.base import Dispatch, register
from verl.utils.failpoints import failpoint
from verl.utils.lora import full_adapter_state, iter_merged_full_tensors
from verl.workers.rollout.base import BaseRollout

__all__ = ["AheadRollout", "AheadRolloutMixin", "copy_named_weights", "trainable_weights"]


def trainable_weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``module``'s trainable parameters by name: what changes between two policy versions."""
    with torch.no_grad():
        return {name: p.detach().clone() for name, p in module.named_parameters() if p.requires_grad}


def copy_named_weights(target: dict[str, torch.Tensor], weights: dict[str, torch.Tensor], owner: str) -> None:
    """Copy ``weights`` into the tensors of ``target`` (a module's parameters or state dict) by name, in place; a
    name ``target`` lacks is an error naming ``owner`` (a policy handed weights of another model)."""
    with torch.no_grad():
        for name, tensor in weights.items():
            if name not in target:
                raise KeyError(f"{owner}: the policy has no weight {name!r} (are the weights of the same model?)")
            target[name].copy_(tensor)


class AheadRollout:
    """An engine of the hybrid engine's class over a frozen copy of ``module`` (see the module docstring)."""

    def __init__(self, module: torch.nn.Module, hybrid: BaseRollout, build: Callable[[torch.nn.Module], BaseRollout]):
        self.module = copy.deepcopy(module)
        self.module.requires_grad_(False)
        self.params = dict(self.module.named_parameters())
        self.engine: BaseRollout = build(self.module)
        self.engine.set_rng_state(hybrid.get_rng_state())
        self.version: int | None = None
        self._lock = threading.Lock()  # a load never lands in the middle of a generation

    def load_weights(self, weights: dict[str, torch.Tensor], version: int) -> float:
        """Copy ``weights`` (`trainable_weights` of the actor at ``version``) into the engine's module; returns
        the seconds it took. Loading the version it holds is free."""
        if version == self.version:
            return 0.0
        t = time.perf_counter()
        with self._lock:
            copy_named_weights(self.params, weights, "the ahead rollout engine")
            self.version = version
        return time.perf_counter() - t

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        with self._lock:
            return self.engine.generate_sequences(prompts)

    def get_rng_state(self) -> torch.Tensor:
        return self.engine.get_rng_state()

    def set_rng_state(self, state: torch.Tensor) -> None:
        self.engine.set_rng_state(state)


class AheadRolloutMixin:
    """The actor-rollout worker's calls for the ahead engine (``colocate_async``): a worker that has
    ``actor_module``, ``rollout`` (the hybrid engine), ``_build_rollout(module)`` and ``distributed``."""

    @register(Dispatch.ONE_TO_ALL)
    def init_ahead_rollout(self) -> None:
        """Build the engine that generates while the actor trains (`AheadRollout`)."""
        if self.distributed or getattr(self, "_engine_owns_weights", False):
            raise NotImplementedError(
                "trainer.v1.trainer_mode=colocate_async generates with a copy of the policy in this process: it runs "
                f"on trainer.backend=local with rollout.name=hf (here: rollout.name={self.config.rollout.name}, "
                f"{'sharded' if self.distributed else 'in one process'})"
            )
        self.ahead_rollout = AheadRollout(self.actor_module, self.rollout, self._build_rollout)

    @register(Dispatch.ONE_TO_ALL)
    def policy_weights(self) -> dict[str, torch.Tensor]:
        """A copy of the actor's trainable weights (a LoRA policy: its adapters): one policy version."""
        return trainable_weights(self.actor_module)

    @register(Dispatch.ONE_TO_ALL)
    def load_ahead_weights(self, weights: dict[str, torch.Tensor], version: int) -> float:
        """Hand ``weights`` (`policy_weights` at ``version``) to the ahead engine; returns the seconds it took."""
        return self.ahead_rollout.load_weights(weights, version)

    @register(Dispatch.ONE_TO_ALL)
    def ahead_rng_state(self) -> torch.Tensor:
        return self.ahead_rollout.get_rng_state()

    @register(Dispatch.ONE_TO_ALL)
    def set_ahead_rng_state(self, state: torch.Tensor) -> None:
        self.ahead_rollout.set_rng_state(state)

    @register(Dispatch.ONE_TO_ALL)
    def full_policy_weights(self, with_base: bool = True) -> dict[str, dict[str, torch.Tensor]] | None:
        """One policy version for a standalone rollout replica, gathered from the FSDP shards by every rank (a
        collective) and returned by rank 0 only (the other ranks return None, so one copy travels):
        ``{"base": ...}``, the whole weights under the base model's names; a LoRA policy sends
        ``{"adapter": ...}``, its adapters alone, and the frozen base (adapters off) only ``with_base``."""
        out: dict[str, dict[str, torch.Tensor]] = {}
        if not self._is_lora:
            out["base"] = {name: t.detach().to("cpu", copy=True) for name, t in self._iter_policy_weights()}
        else:
            if with_base:
                with self.actor_module.disable_adapter():
                    base = iter_merged_full_tensors(self.actor_module)
                    out["base"] = {name: t.detach().to("cpu", copy=True) for name, t in base}
            out["adapter"] = full_adapter_state(self.actor_module)
        return out if self.rank == 0 else None

    @register(Dispatch.DP_COMPUTE_PROTO, pad=True)
    def generate_sequences_ahead(self, prompts: DataProto) -> DataProto:
        """``generate_sequences`` with the ahead engine (the version it was last handed)."""
        out = self.ahead_rollout.generate_sequences(prompts)
        failpoint("rollout.generate")
        return out
