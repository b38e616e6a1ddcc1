"""The config objects the algorithm core reads: typed sections, never dicts (see the package docstring).

The leaf cannot import the schema (``verl.workers.config`` / ``verl.trainer.config`` sit in a higher layer), so it
cannot know a missing key's default: a plain dict or None reaching a function that reads its config is a caller's
error, named here instead of surfacing as an ``AttributeError`` deep inside a loss.
"""

from __future__ import annotations

from typing import Any


def typed_section(config: Any, section: str, function: str, optional: bool = False) -> Any:
    """``config`` itself, once checked to be a typed section (a dataclass of the schema, a ``DictConfig`` built from
    one, or another object with its attributes); a ``dict``, or None unless ``optional``, is a TypeError naming the
    conversion."""
    if (config is None and not optional) or isinstance(config, dict):
        raise TypeError(
            f"{function} reads the {section} section as attributes: pass the typed section (the worker's config, "
            f"or verl.utils.config.as_section(config, <its dataclass>)), or call it through "
            f"verl.trainer.ppo.core_algos, which converts a dict or None to one; got {type(config).__name__}"
        )
    return config
