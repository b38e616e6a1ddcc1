"""Reward managers by name (``reward_model.reward_manager``): ``@register("name")`` on a class makes it loadable by
``get_reward_manager_cls("name")``, verl's registry. Names are case-sensitive; a name taken by another class is an
error (two managers silently replacing each other would change a run's rewards)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["REWARD_MANAGER_REGISTRY", "get_reward_manager_cls", "register"]

REWARD_MANAGER_REGISTRY: dict[str, type] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: register the class under ``name`` and return it unchanged."""

    def decorate(cls: type) -> type:
        existing = REWARD_MANAGER_REGISTRY.get(name)
        if existing is not None and existing is not cls:
            raise ValueError(
                f"reward manager {name!r} is already registered as {existing.__module__}.{existing.__qualname__}; "
                f"register {cls.__qualname__} under another name"
            )
        REWARD_MANAGER_REGISTRY[name] = cls
        return cls

    return decorate


def get_reward_manager_cls(name: str) -> type:
    """The class registered as ``name``."""
    if name not in REWARD_MANAGER_REGISTRY:
        raise ValueError(
            f"Unknown reward manager: {name} (registered: {sorted(REWARD_MANAGER_REGISTRY)}); a custom one is "
            "registered with @verl.workers.reward_manager.register(name) in a module imported before the run"
        )
    return REWARD_MANAGER_REGISTRY[name]
