"""Interactions from verl's interaction YAML (``actor_rollout_ref.rollout.multi_turn.interaction_config_path``)::

    interaction:
      - name: gsm8k                                                  # what extra_info.interaction_kwargs.name says
        class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction
        config: {}                                                   # passed to the class, with name added

Without ``name`` the class name decides it, lower-cased without an ``Interaction`` suffix (``Gsm8kInteraction`` ->
``gsm8k``). Every problem is an error naming the file, the entry (``interaction[1]``) and the fix; a module that
does not exist is a ``ModuleNotFoundError``, a repeated name a ``ValueError`` ("Duplicate interaction name ...").
"""

from __future__ import annotations

import logging
import os
from typing import Any

from verl.interactions.base import BaseInteraction
from verl.utils.import_utils import load_class_by_name, load_entry_list

__all__ = ["default_interaction_name", "get_interaction_class", "initialize_interactions_from_config"]

logger = logging.getLogger(__name__)

_ENTRY_KEYS = {"name", "class_name", "config"}


def get_interaction_class(cls_name: str) -> type:
    """verl's helper: the class at ``package.module.Class``."""
    return load_class_by_name(cls_name, "interaction class")


def default_interaction_name(class_name: str) -> str:
    """``pkg.mod.Gsm8kInteraction`` -> ``gsm8k``; a class without the suffix -> its name lower-cased."""
    simple = class_name.rsplit(".", 1)[-1]
    return (simple.removesuffix("Interaction") or simple).lower()


def _interaction_from_entry(entry: Any, where: str) -> tuple[str, BaseInteraction]:
    if not isinstance(entry, dict) or not isinstance(entry.get("class_name"), str):
        raise ValueError(
            f"{where}: each entry needs class_name: package.module.InteractionClass "
            f"(e.g. verl.interactions.gsm8k_interaction.Gsm8kInteraction), got {entry!r}"
        )
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; an entry has name, class_name and config")
    config = entry.get("config") or {}
    if not isinstance(config, dict):
        raise ValueError(f"{where}: config must be a mapping (the interaction's settings)")
    cls = load_class_by_name(entry["class_name"], where)
    if not issubclass(cls, BaseInteraction):
        raise TypeError(f"{where}: {entry['class_name']} is not a verl.interactions.base.BaseInteraction subclass")
    name = entry.get("name") or default_interaction_name(entry["class_name"])
    return name, cls(config={**config, "name": name})


def initialize_interactions_from_config(interaction_config_file: str | os.PathLike) -> dict[str, BaseInteraction]:
    """The interactions of a verl interaction YAML by name (verl's function)."""
    path = os.fspath(interaction_config_file)
    entries = load_entry_list(
        path,
        "interaction",
        "interaction config",
        "actor_rollout_ref.rollout.multi_turn.interaction_config_path",
        "name, class_name, config",
    )
    interactions: dict[str, BaseInteraction] = {}
    first_index: dict[str, int] = {}
    for index, entry in enumerate(entries):
        where = f"interaction config {path}, interaction[{index}]"
        name, interaction = _interaction_from_entry(entry, where)
        if name in interactions:
            raise ValueError(
                f"Duplicate interaction name '{name}' found in {path} (interaction[{first_index[name]}] and "
                f"interaction[{index}]): give each entry a unique name"
            )
        interactions[name], first_index[name] = interaction, index
        logger.info("interaction %r: %s", name, entry["class_name"])
    return interactions
