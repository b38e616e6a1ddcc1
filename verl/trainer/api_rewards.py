"""What the Python API's ``reward_model`` argument may be: a built-in scorer name, a Python function, or a local
reward-model directory (:func:`resolve_reward`; docs/python_api.md)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

NAMED_REWARDS = ("auto", "rule", "length")


def length_score(solution_str: str | None, target_chars: int = 32) -> float:
    """Open-ended built-in reward (no ground truth needed): 1 at ``target_chars`` characters of stripped response,
    falling linearly to 0 at 0 and at twice the target. A stand-in so prompts without answers train out of the box;
    give a reward model or function for real open-ended tasks."""
    n = len((solution_str or "").strip())
    return max(0.0, 1.0 - abs(n - target_chars) / target_chars)


def auto_compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> float | dict[str, Any]:
    """The ``"auto"`` reward: the rule scorer of ``data_source`` when one is registered and the sample has a ground
    truth (e.g. the built-in arithmetic data), else :func:`length_score` (e.g. open-ended JSONL prompts)."""
    from verl.utils.reward_score import default_compute_score, registered_data_sources

    if ground_truth is not None and data_source in registered_data_sources():
        return default_compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    target = kwargs.get("target_chars", 32)
    return length_score(solution_str, target)


def _length_compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    return length_score(solution_str, kwargs.get("target_chars", 32))


def _source_scorer(name: str) -> Callable[..., Any]:
    from verl.utils.reward_score import default_compute_score

    def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return default_compute_score(name, solution_str, ground_truth, extra_info, **kwargs)

    compute_score.__qualname__ = f"rule[{name}]"
    return compute_score


def wrap_reward_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A user's reward function in verl's form ``fn(data_source, solution_str, ground_truth, extra_info=None, **kw)``.

    Taken as is when its first parameter is ``data_source``, or it has 3+ positional parameters or ``*args``;
    ``fn(solution_str, ground_truth)`` and ``fn(solution_str)`` are adapted."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in params) or len(positional) >= 3:
        return fn
    if positional and positional[0].name == "data_source":
        return fn
    if len(positional) == 2:

        def adapted(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
            return fn(solution_str, ground_truth)
    elif len(positional) == 1:

        def adapted(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
            return fn(solution_str)
    else:
        raise TypeError(
            f"reward function {getattr(fn, '__qualname__', fn)!r} must take (solution_str), (solution_str, "
            "ground_truth) or verl's (data_source, solution_str, ground_truth, extra_info=None, **kwargs)"
        )
    adapted.__qualname__ = getattr(fn, "__qualname__", repr(fn))
    return adapted


def resolve_reward(spec: Any) -> tuple[dict[str, Any], Callable[..., Any] | None]:
    """``(overrides, compute_score)`` for a ``reward_model`` argument.

    - ``None`` or ``"auto"``: :func:`auto_compute_score` (rule scorer where the data has one, else length);
    - ``"rule"``: ``default_compute_score`` by each row's ``data_source`` (``custom_reward_function`` if configured);
    - a registered data source (``"arithmetic"``, ``"gsm8k"``, ``"countdown"``, ...): that rule scorer for every row;
    - ``"length"``: :func:`length_score` for every row;
    - a Python function: see :func:`wrap_reward_function`;
    - a local directory (or ``builtin://`` model): a sequence-classification reward model
      (``reward_model.enable=true``, ``reward_model.model.path``).
    """
    from verl.utils.reward_score import registered_data_sources

    if spec is None or spec == "auto":
        return {}, auto_compute_score
    if callable(spec):
        return {}, wrap_reward_function(spec)
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"reward_model={spec!r}: give a scorer name, a function or a local model directory")
    name = os.fspath(spec)
    if name == "rule":
        return {}, None
    if name == "length":
        return {}, _length_compute_score
    if name in registered_data_sources():
        return {}, _source_scorer(name)
    if name.startswith("builtin://") or os.path.isdir(os.path.expanduser(name)):
        return {"reward_model.enable": True, "reward_model.model.path": name}, None
    known = ", ".join(repr(n) for n in (*NAMED_REWARDS, *registered_data_sources()))
    hint = ""
    if "/" in name and not name.startswith((".", "/", "~")):
        hint = " It looks like a hub id: download the model and pass its local directory."
    raise ValueError(f"reward_model={name!r} is neither a built-in scorer ({known}) nor a local model directory.{hint}")
