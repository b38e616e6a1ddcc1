"""The loaded config as a tree of values, whatever holds it (a job's schema dataclass from ``load_config``, a
``DictConfig`` or a plain mapping): its errors (`ConfigError`), its plain form (`to_container`), its YAML (`to_yaml`:
the text ``OmegaConf.to_yaml`` gave the merged config, what a run saves as ``config.yaml``) and dotted reads
(`select`). Nothing here changes a config; `verl.utils.config_loader` builds them (and changed copies:
``replace_keys``), and ``verl.utils.config`` re-exports these names.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

__all__ = ["ConfigError", "UnknownConfigKeyError", "select", "to_container", "to_yaml"]


class ConfigError(ValueError):
    """A bad key or value in a job's configuration; the message names the key path and the fix."""


class UnknownConfigKeyError(ConfigError, KeyError):
    """An unknown key in a dict config; both a ``ValueError`` (like every :class:`ConfigError`) and a ``KeyError``."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


def to_container(cfg: Any) -> Any:
    """A config (a schema dataclass, a ``DictConfig`` or a mapping) as plain dicts and lists, resolved, in field
    order; a key added with ``+`` follows its section's fields, as in the merged ``DictConfig``."""
    if isinstance(cfg, DictConfig | ListConfig):
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        names = [f.name for f in dataclasses.fields(cfg)]
        names += [k for k in vars(cfg) if k not in names and not k.startswith("_")]
        return {name: to_container(getattr(cfg, name)) for name in names}
    if isinstance(cfg, Mapping):
        return {key: to_container(value) for key, value in cfg.items()}
    if isinstance(cfg, list | tuple):
        return [to_container(value) for value in cfg]
    if isinstance(cfg, enum.Enum):
        return cfg.name
    return cfg


def to_yaml(cfg: Any) -> str:
    """The config as YAML, the text ``OmegaConf.to_yaml`` gave the merged config (what a run saves as
    ``config.yaml``)."""
    return OmegaConf.to_yaml(to_container(cfg))


_REQUIRED = object()


def select(cfg: Any, key: str, default: Any = _REQUIRED) -> Any:
    """The value at dotted ``key`` of a config (a schema dataclass, a ``DictConfig`` or a mapping); ``default`` when
    a part of the path is missing (without one, a missing key is a `ConfigError`)."""
    node = cfg
    for part in key.split("."):
        if isinstance(node, DictConfig | Mapping) and part in node:
            node = node[part]
        elif not isinstance(node, Mapping) and hasattr(node, part):
            node = getattr(node, part)
        elif default is _REQUIRED:
            raise ConfigError(f"config key {key!r} does not exist")
        else:
            return default
    return node
