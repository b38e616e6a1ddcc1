"""Reading one option from a config that may be a ``dict``, an omegaconf ``DictConfig`` or an attribute object."""

from __future__ import annotations

from typing import Any


def _cfg_get(config: Any, key: str, default: Any = None) -> Any:
    """``config[key]`` for a dict / DictConfig / attribute object; ``default`` when absent or None."""
    if config is None:
        return default
    value = config.get(key, None) if hasattr(config, "get") else getattr(config, key, None)
    return default if value is None else value
