"""Shared pieces of the built-in task generators: the task description and parameter types.

A task is described by a :class:`TaskSpec`. The generic code in :mod:`verl.data.tasks` does the
rest (train/test split by problem, deduplication, determinism, parquet writing), so a task only
says what its problems are:

* ``enumerate(params)`` lists every distinct problem when the space is small enough to list
  (``None`` otherwise); it makes the size checks exact and the sampling uniform;
* ``sample(rng, params)`` draws one problem (``None`` for a rejected draw) for large spaces;
* ``key(problem)`` is the problem's canonical identity (dedup and split assignment);
* ``render(problem, rng, params)`` gives ``(question, reference_answer, ground_truth)``;
* ``finish_row(row, problem, params)`` (optional) adds the columns a task has beyond the common ones (a tool task's
  ``agent_name``, ``extra_info.tools_kwargs`` and multi-turn demonstration) and returns the row.

A "problem" is whatever plain value the task likes (a tuple), as long as ``key`` names it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TaskParam:
    """One generator option: its default, how to parse it from text (CLI, query string), help."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str

    @property
    def cli_flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class TaskSpec:
    """A built-in verifiable task: metadata plus the callables described in the module docstring."""

    name: str
    data_source: str
    ability: str
    params: tuple[TaskParam, ...]
    validate: Callable[[dict[str, Any]], dict[str, Any]]
    key: Callable[[Any], str]
    enumerate: Callable[[Mapping[str, Any]], list[Any] | None]
    sample: Callable[[random.Random, Mapping[str, Any]], Any | None]
    render: Callable[[Any, random.Random, Mapping[str, Any]], tuple[str, str, Any]]
    enlarge_hint: str
    description: str = ""
    finish_row: Callable[[dict[str, Any], Any, Mapping[str, Any]], dict[str, Any]] | None = None
    defaults: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "defaults", {p.name: p.default for p in self.params})

    def normalize_params(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Fill defaults, reject unknown names, and validate/canonicalise the values."""
        unknown = sorted(set(kwargs) - set(self.defaults))
        if unknown:
            raise ValueError(
                f"unknown option(s) {unknown} for task {self.name!r}; its options are {sorted(self.defaults)}"
            )
        params = {**self.defaults, **kwargs}
        return self.validate(params)

    def __call__(self, split: str, size: int, seed: int = 0, **kwargs: Any) -> list[dict[str, Any]]:
        """Generate rows; same as ``verl.data.tasks.generate_task_rows(self.name, ...)``."""
        from verl.data.tasks import generate_task_rows

        return generate_task_rows(self.name, split, size, seed, **kwargs)


def check_int(params: Mapping[str, Any], name: str, low: int, high: int | None = None) -> int:
    """Return ``params[name]`` as an int within ``[low, high]`` or raise a ValueError naming it."""
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            if isinstance(value, bool) or int(value) != value:
                raise ValueError
            value = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value
