"""The two test tiers and the rule that keeps them apart (used by tests/conftest.py).

* Fast tier: ``python -m pytest tests -m "not slow"``: unit tests and a handful of one-step smoke jobs.
* Full tier: ``python -m pytest tests -n 2 --dist loadgroup`` (the README's command): everything, on both cores.

The rule: a test without ``@pytest.mark.slow`` whose setup and call take longer than the budget fails, and its
message says to mark it. The budget is ``DEFAULT_BUDGET_S`` on a quiet 2-core AVX-512 machine, scaled by how much
slower this machine runs a fixed reference workload right now (an AVX2-only CPU, or a busy one), at most
``MAX_SLOWDOWN`` times. ``VERL_FAST_TEST_BUDGET_S`` sets another budget (0 turns the rule off).

Heavy modules, those that start Ray or vLLM, share one pytest-xdist group, so under ``--dist loadgroup`` they run one
after another on one worker and never fight over ports, /dev/shm or the cores they each assume they have.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DEFAULT_BUDGET_S = 2.0
MAX_SLOWDOWN = 4.0
BUDGET_ENV = "VERL_FAST_TEST_BUDGET_S"
SPEED_ENV = "VERL_TEST_SPEED"  # a fixed slowdown factor instead of the measured one
# The reference workload's best time on a quiet 2-core AMD EPYC with AVX-512 (one thread).
REFERENCE_S = 0.012
# a test whose source, parameters or fixtures name Ray or vLLM (ray, ray_cluster, vllm_engine, trainer.backend=ray)
HEAVY = re.compile(r"\b(ray|vllm)", re.I)
# a module that needs Ray or vLLM for all its tests (a top-level import or importorskip): every test in it joins
NEEDS_HEAVY = re.compile(
    r"^(\w+ = )?(import (ray|vllm)\b|from (ray|vllm)\b|pytest\.importorskip\(\s*.(ray|vllm)\b)", re.M
)


def _reference_workload() -> float:
    """Seconds for a fixed mix of interpreter work and small float32 matmuls (what tiny-model tests do)."""
    import torch

    a = torch.ones(128, 128)
    start = time.perf_counter()
    total = 0
    for i in range(60_000):
        total += i % 7
    for _ in range(200):
        a = (a @ a).clamp_(max=1.0)
    return time.perf_counter() - start


def measure_speed() -> float:
    """How many times slower than the reference machine this one runs right now (best of three)."""
    if os.environ.get(SPEED_ENV):
        return float(os.environ[SPEED_ENV])
    return min(_reference_workload() for _ in range(3)) / REFERENCE_S


def session_speed() -> float:
    """The slowdown measured once per session; ``VERL_TEST_SPEED`` wins even after that (an inner pytester run sets
    it and must not inherit the outer session's busy-machine measurement)."""
    if os.environ.get(SPEED_ENV):
        return float(os.environ[SPEED_ENV])
    return _first_measured_speed()


@functools.cache
def _first_measured_speed() -> float:
    return measure_speed()


def budget_s(speed: float) -> float | None:
    """The fast tier's per-test budget on a machine ``speed`` times slower than the reference; None: no rule."""
    base = float(os.environ.get(BUDGET_ENV, DEFAULT_BUDGET_S))
    if base <= 0:
        return None
    return base * min(max(speed, 1.0), MAX_SLOWDOWN)


def compile_package() -> None:
    """Byte-compile ``verl/`` up front: on a fresh clone the first test to import a module would otherwise pay for
    compiling it, and a fast test could run over its budget for that alone."""
    import compileall

    compileall.compile_dir(str(HERE.parent / "verl"), quiet=1, workers=1)


def _is_slow(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """Remembers how long the test's fixtures took (a conftest imports this hook to apply it)."""
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        item.stash[_SETUP_S] = time.perf_counter() - start


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A fast-tier test over its budget fails (its own failure wins); a conftest imports this hook to apply it."""
    start = time.perf_counter()
    result = yield
    took = item.stash.get(_SETUP_S, 0.0) + time.perf_counter() - start
    budget = budget_s(session_speed())
    # Re-measure before failing: the machine may be busier now than when the session started.
    if budget is not None and took > budget and not _is_slow(item):
        budget = budget_s(max(session_speed(), measure_speed()))
        if took > budget:
            pytest.fail(
                f"{item.nodeid} took {took:.1f} s, over the fast tier's budget of {budget:.1f} s on this machine: "
                "mark it @pytest.mark.slow (or the module: pytestmark = pytest.mark.slow), or make it faster "
                f"(tests/tiers.py; {BUDGET_ENV}=0 turns the rule off)",
                pytrace=False,
            )
    return result


_SETUP_S = pytest.StashKey[float]()


def heavy_group(text: str) -> str | None:
    """The xdist group of a test whose text names Ray or vLLM (one group for both: they share /dev/shm and ports)."""
    return "ray-vllm" if HEAVY.search(text) else None


@functools.cache
def _source(function: object) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


@functools.cache
def _module_needs_heavy(path: str) -> bool:
    return bool(NEEDS_HEAVY.search(Path(path).read_text()))


def group_heavy_tests(items: list[pytest.Item]) -> None:
    """Puts each test that may start Ray or vLLM into one xdist group. Judged per test (its source, parameters and
    fixture names, its path), not per module, so the fast tests of a module that also has a Ray test still spread out."""
    for item in items:
        text = " ".join([_source(getattr(item, "function", None)), item.nodeid, *getattr(item, "fixturenames", ())])
        group = "ray-vllm" if _module_needs_heavy(str(item.path)) else heavy_group(text)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(name=group))
