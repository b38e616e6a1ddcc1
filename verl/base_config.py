"""``BaseConfig``: the base of every typed config section (verl's name and behaviour).

A section is a dataclass whose fields are its keys, each with its type, its default and a trailing ``#`` comment that
says what it does (``docs/config_reference.md`` is generated from those comments); a key the Python API names carries
the names as ``metadata={"api": (...)}`` (``verl.utils.config_dict`` makes the API's tables from them). Sections read
like mappings too (``cfg["lr"]``, ``cfg.get("lr")``, ``dict(cfg)``), so code written against verl's dict configs keeps
working.

Fields are frozen once set, except the names in ``_mutable_fields``: a worker cannot change its config behind the
controller's back. Set what you need before building the section, or ``dataclasses.replace`` it.
"""

from __future__ import annotations

import collections.abc
from dataclasses import FrozenInstanceError, dataclass, fields
from typing import Any, ClassVar


@dataclass
class BaseConfig(collections.abc.Mapping):
    """A typed config section: attribute and mapping access to its fields, frozen after construction."""

    _mutable_fields: ClassVar[frozenset[str]] = frozenset()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__dict__ and name not in self._mutable_fields:
            raise FrozenInstanceError(
                f"{type(self).__name__}.{name} is frozen: set it when the config is loaded (key=value), or build a "
                "new section with dataclasses.replace"
            )
        super().__setattr__(name, value)

    @classmethod
    def ported_layout(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A dict of this section's keys as older code wrote it, rearranged to the schema's layout before
        ``verl.utils.config.as_section`` builds the section from it. As it is, unless a section overrides this."""
        return data

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str):
            raise TypeError(f"config keys are strings, got {type(key).__name__} {key!r}")
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and hasattr(self, key)

    def __iter__(self):
        return (f.name for f in fields(self))

    def __len__(self) -> int:
        return len(fields(self))
