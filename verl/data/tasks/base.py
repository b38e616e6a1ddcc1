"""Shared pieces of the built-in task generators: the task description, its parameter types, the defaults and the
generation every task shares (`generate_rows`: train/test split by problem, deduplication, determinism).
:mod:`verl.data.tasks` adds the registry of tasks by name, parquet writing and ``builtin://`` specs; it imports
this module, never the reverse.

A task is described by a :class:`TaskSpec`, so a task only says what its problems are:

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

import hashlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# ---- defaults (the one place) -------------------------------------------------------------
DEFAULT_TRAIN_SIZE = 4000
DEFAULT_TEST_SIZE = 200
DEFAULT_SEED = 0
# Share of the problem space reserved for the test split (by seeded hash of the problem key).
DEFAULT_TEST_FRACTION = 0.1
# Large spaces are sampled; give up after this many draws in a row bring no new problem.
SAMPLE_STALL_DRAWS = 50_000
SPLITS = ("train", "test")


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
        return generate_rows(self, split, size, seed, **kwargs)


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


# ---- generation: the same for every task ---------------------------------------------------


def _split_of(task: str, seed: int, key: str, test_fraction: float) -> str:
    digest = hashlib.blake2b(f"{task}\x00{seed}\x00{key}".encode(), digest_size=8).digest()
    return "test" if int.from_bytes(digest, "big") < test_fraction * 2**64 else "train"


def _check_common(split: str, size: int, seed: int, test_fraction: float) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"size must be a non-negative integer, got {size!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be strictly between 0 and 1, got {test_fraction!r}")


def _describe(spec: TaskSpec, params: Mapping[str, Any]) -> str:
    return f"{spec.name}({', '.join(f'{k}={v!r}' for k, v in params.items())})"


def _pick_problems(
    spec: TaskSpec, params: Mapping[str, Any], split: str, size: int, seed: int, test_fraction: float
) -> list[Any]:
    rng = random.Random(f"verl.data.tasks|{spec.name}|{split}|{seed}|pick")

    def in_split(key: str) -> bool:
        return _split_of(spec.name, seed, key, test_fraction) == split

    pool = spec.enumerate(params)
    if pool is not None:
        candidates = [problem for problem in pool if in_split(spec.key(problem))]
        if len(candidates) < size:
            raise ValueError(
                f"{_describe(spec, params)} has only {len(pool)} distinct problems, {len(candidates)} of them "
                f"in the {split} split (test_fraction={test_fraction}), but {size} {split} rows were requested; "
                f"enlarge the problem space: {spec.enlarge_hint}"
            )
        rng.shuffle(candidates)
        return candidates[:size]

    chosen: list[Any] = []
    seen: set[str] = set()
    draws = stalled = 0
    while len(chosen) < size and stalled < SAMPLE_STALL_DRAWS:
        draws += 1
        stalled += 1
        problem = spec.sample(rng, params)
        if problem is None:
            continue
        key = spec.key(problem)
        if key in seen or not in_split(key):
            continue
        seen.add(key)
        chosen.append(problem)
        stalled = 0
    if len(chosen) < size:
        raise ValueError(
            f"{_describe(spec, params)}: random sampling found only {len(chosen)} distinct {split} problems "
            f"(no new one in the last {SAMPLE_STALL_DRAWS} of {draws} draws), but {size} were requested; "
            f"the problem space is too small or too sparse: {spec.enlarge_hint}"
        )
    return chosen


def generate_rows(
    spec: TaskSpec,
    split: str,
    size: int,
    seed: int = DEFAULT_SEED,
    test_fraction: float = DEFAULT_TEST_FRACTION,
    **task_kwargs: Any,
) -> list[dict[str, Any]]:
    """``size`` verl-format rows of ``spec`` for ``split``: ``verl.data.tasks.generate_task_rows`` once the task's
    name is looked up (see there)."""
    _check_common(split, size, seed, test_fraction)
    params = spec.normalize_params(task_kwargs)
    problems = _pick_problems(spec, params, split, size, seed, test_fraction)
    render_rng = random.Random(f"verl.data.tasks|{spec.name}|{split}|{seed}|render")
    rows = []
    for index, problem in enumerate(problems):
        question, answer, ground_truth = spec.render(problem, render_rng, params)
        row = {
            "data_source": spec.data_source,
            "prompt": [{"role": "user", "content": question}],
            "ability": spec.ability,
            "reward_model": {"style": "rule", "ground_truth": ground_truth},
            "extra_info": {"split": split, "index": index, "question": question, "answer": answer},
        }
        rows.append(spec.finish_row(row, problem, params) if spec.finish_row else row)
    return rows
