"""Rule-based reward scorers, dispatched on a sample's ``data_source``.

Built-in data sources:

* ``"openai/gsm8k"``, ``"gsm8k"`` -> :func:`verl.utils.reward_score.gsm8k.compute_score`
* ``"arithmetic"`` -> :func:`verl.utils.reward_score.arithmetic.compute_score`
* ``"arithmetic_partial"`` -> :func:`verl.utils.reward_score.arithmetic.compute_partial_score` (digit-level partial
  credit; the arithmetic task's ``reward=partial``)
* ``"countdown"`` -> :func:`verl.utils.reward_score.countdown.compute_score`
* ``"calc_multiply"`` -> :func:`verl.utils.reward_score.calc_multiply.compute_score` (the tool task: the
  ``#### N`` of the last assistant turn of the multi-turn transcript)
* ``"lighteval/MATH"``, ``"DigitalLearningGmbH/MATH-lighteval"``, ``"HuggingFaceH4/MATH-500"`` ->
  :func:`verl.utils.reward_score.math.compute_score` (the last ``\\boxed{}`` answer, MATH's normalisation)
* ``"math_dapo"``, ``"math"``, ``"math_dapo_reasoning"`` and every name starting with ``"aime"`` ->
  :func:`verl.utils.reward_score.math_dapo.compute_score` (DAPO's ``Answer:`` scorer, 1 or -1), as in public verl
* ``"codecontests"``, ``"apps"``, ``"codeforces"``, ``"taco"``, ``"humaneval"``, ``"mbpp"``, ``"leetcode"`` ->
  :func:`verl.utils.reward_score.prime_code.score_code_sample` (the share of the first 10 test cases passed, run
  in the local sandbox :mod:`verl.sandbox`)

Scorer contract
---------------
A scorer is called as ``fn(solution_str, ground_truth, extra_info=..., **kwargs)``
and returns either a ``float`` or a ``dict`` with at least a ``"score"`` key (the
reward; any other keys are extra metrics). :func:`default_compute_score` returns
the scorer's value unchanged. Keyword arguments the scorer's signature does not
accept (``extra_info`` included) are dropped, so infrastructure arguments such as
``sandbox_fusion_url`` never reach a scorer that cannot take them; a scorer with
``**kwargs`` receives everything.

Adding a data source
--------------------
Either register a scorer in code::

    from verl.utils.reward_score import register_scorer

    @register_scorer("my_source")
    def my_score(solution_str, ground_truth, extra_info=None):
        return float(solution_str.strip() == ground_truth)

or, without touching verl, write a custom reward function and point the config
at it with ``custom_reward_function.path=/path/to/file.py`` and
``custom_reward_function.name=compute_score``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from verl.utils.reward_score import arithmetic, calc_multiply, countdown, gsm8k, math_dapo, prime_code
from verl.utils.reward_score import math as boxed_math

__all__ = [
    "Scorer",
    "default_compute_score",
    "default_compute_score_group",
    "get_scorer",
    "has_group_scorer",
    "register_group_scorer",
    "register_scorer",
    "register_scorer_prefix",
    "registered_data_sources",
    "unregister_scorer",
]

Scorer = Callable[..., "float | dict[str, Any]"]

# data_source -> (scorer, names of keyword arguments it accepts, or None for "any")
_REGISTRY: dict[str, tuple[Scorer, frozenset[str] | None]] = {}
# data_source -> (group scorer, accepted keyword names): several responses sharing one ground truth in one call
_GROUP_REGISTRY: dict[str, tuple[Callable[..., list], frozenset[str] | None]] = {}
# data_source prefixes (verl scores every "aime..." source alike), tried after the exact names, in order
_PREFIXES: list[tuple[str, Scorer, frozenset[str] | None]] = []


def _accepted_kwargs(fn: Scorer) -> frozenset[str] | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    keywordable = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in params if p.kind in keywordable)


def _as_names(data_source: str | Iterable[str]) -> list[str]:
    names = [data_source] if isinstance(data_source, str) else list(data_source)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"data_source must be a non-empty string or strings, got {data_source!r}")
    return names


def register_scorer(
    data_source: str | Iterable[str],
    fn: Scorer | None = None,
    *,
    overwrite: bool = False,
) -> Any:
    """Register ``fn`` as the scorer for one or more data sources.

    Use as a decorator (``@register_scorer("src")``) or call directly
    (``register_scorer("src", fn)`` or ``register_scorer("src")(fn)``); either
    way ``fn`` is returned unchanged. ``data_source`` may be a list of aliases.
    See the module docstring for the scorer contract.

    Raises:
        ValueError: if a name is already registered and ``overwrite`` is False.
        TypeError: if ``fn`` is not callable.
    """
    names = _as_names(data_source)

    def decorator(func: Scorer) -> Scorer:
        if not callable(func):
            raise TypeError(f"scorer for {names} must be callable, got {func!r}")
        taken = [n for n in names if n in _REGISTRY]
        if taken and not overwrite:
            raise ValueError(f"a scorer is already registered for {taken}; pass overwrite=True to replace it")
        entry = (func, _accepted_kwargs(func))
        for name in names:
            _REGISTRY[name] = entry
            _GROUP_REGISTRY.pop(name, None)  # a group scorer belongs to the scorer it was registered with
        return func

    return decorator if fn is None else decorator(fn)


def unregister_scorer(data_source: str) -> Scorer:
    """Remove and return the scorer registered for ``data_source`` (``KeyError`` if none)."""
    _GROUP_REGISTRY.pop(data_source, None)
    return _REGISTRY.pop(data_source)[0]


def register_scorer_prefix(prefix: str, fn: Scorer) -> Scorer:
    """Score every ``data_source`` starting with ``prefix`` (and with no exact registration) with ``fn``."""
    _PREFIXES.append((prefix, fn, _accepted_kwargs(fn)))
    return fn


def register_group_scorer(data_source: str | Iterable[str], fn: Callable[..., list]) -> Callable[..., list]:
    """Register a scorer of several responses to the same problem at once, ``fn(solution_strs, ground_truth,
    extra_infos=None, **kwargs) -> [score or dict, ...]`` (one per response, in order), next to the data source's
    one-response scorer. The reward manager calls it for the responses of a batch that share a data source and a
    ground truth (the ``rollout.n`` samples of a prompt) when it scores with the default scorer: the test-case
    scorer of the code data sources judges them in one sandbox run instead of one run each."""
    if not callable(fn):
        raise TypeError(f"group scorer for {data_source!r} must be callable, got {fn!r}")
    for name in _as_names(data_source):
        if name not in _REGISTRY:
            raise ValueError(f"register the one-response scorer of {name!r} first (register_scorer)")
        _GROUP_REGISTRY[name] = (fn, _accepted_kwargs(fn))
    return fn


def has_group_scorer(data_source: Any) -> bool:
    """Whether ``data_source`` has a group scorer (:func:`register_group_scorer`)."""
    return isinstance(data_source, str) and data_source in _GROUP_REGISTRY


def default_compute_score_group(
    data_source: str,
    solution_strs: list[str],
    ground_truth: Any,
    extra_infos: list[dict[str, Any] | None] | None = None,
    **kwargs: Any,
) -> list[float | dict[str, Any]] | None:
    """:func:`default_compute_score` of several responses sharing ``data_source`` and ``ground_truth``, in one call
    to the data source's group scorer; None when it has none (then score them one by one)."""
    entry = _GROUP_REGISTRY.get(data_source) if isinstance(data_source, str) else None
    if entry is None:
        return None
    fn, accepted = entry
    call_kwargs = {"extra_infos": extra_infos, **kwargs}
    if accepted is not None:
        call_kwargs = {k: v for k, v in call_kwargs.items() if k in accepted}
    results = list(fn(solution_strs, ground_truth, **call_kwargs))
    if len(results) != len(solution_strs):
        raise ValueError(
            f"the group scorer of {data_source!r} returned {len(results)} results for {len(solution_strs)}"
        )
    return results


def registered_data_sources() -> list[str]:
    """Sorted names of all data sources that have a scorer (prefixes shown as ``prefix*``)."""
    return sorted([*_REGISTRY, *(f"{prefix}*" for prefix, _, _ in _PREFIXES)])


def _lookup(data_source: Any) -> tuple[Scorer, frozenset[str] | None]:
    try:
        return _REGISTRY[data_source]
    except (KeyError, TypeError):
        pass
    if isinstance(data_source, str):
        for prefix, fn, accepted in _PREFIXES:
            if data_source.startswith(prefix):
                return fn, accepted
    raise _unknown(data_source)


def _unknown(data_source: Any) -> NotImplementedError:
    known = ", ".join(repr(n) for n in registered_data_sources())
    return NotImplementedError(
        f"No reward scorer for data_source={data_source!r}. Known data sources: {known}. "
        "To score it, write a custom reward function and set custom_reward_function.path=<file.py> "
        "and custom_reward_function.name=<function name> in the config, or register a scorer with "
        f"verl.utils.reward_score.register_scorer({data_source!r})(fn)."
    )


def has_scorer(data_source: Any) -> bool:
    """Whether ``data_source`` has a registered scorer (by name or prefix)."""
    try:
        _lookup(data_source)
    except NotImplementedError:
        return False
    return True


def get_scorer(data_source: str) -> Scorer:
    """Return the scorer registered for ``data_source``.

    Raises:
        NotImplementedError: if none is registered; the message lists the known
            sources and how to add one.
    """
    return _lookup(data_source)[0]


def default_compute_score(
    data_source: str,
    solution_str: str | None,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> float | dict[str, Any]:
    """Score ``solution_str`` with the scorer registered for ``data_source``.

    Args:
        data_source: e.g. ``"openai/gsm8k"``, ``"gsm8k"``, ``"arithmetic"``, ``"countdown"``.
        solution_str: the decoded model response.
        ground_truth: the reference answer, in the format the scorer expects.
        extra_info: per-sample extra data, passed on if the scorer accepts it.
        **kwargs: passed on to the scorer if its signature accepts them
            (e.g. ``format_score=0.1``), silently dropped otherwise.

    Returns:
        The scorer's return value unchanged: a float, or a dict with a ``"score"`` key.

    Raises:
        NotImplementedError: for an unknown ``data_source``.
    """
    fn, accepted = _lookup(data_source)
    call_kwargs = {"extra_info": extra_info, **kwargs}
    if accepted is not None:
        call_kwargs = {k: v for k, v in call_kwargs.items() if k in accepted}
    return fn(solution_str, ground_truth, **call_kwargs)


# verl users import this name.
_default_compute_score = default_compute_score

register_scorer(("openai/gsm8k", "gsm8k"), gsm8k.compute_score)
register_scorer("arithmetic", arithmetic.compute_score)
register_scorer("arithmetic_partial", arithmetic.compute_partial_score)
register_scorer("countdown", countdown.compute_score)
register_scorer("calc_multiply", calc_multiply.compute_score)
register_scorer(
    ("lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500"), boxed_math.compute_score
)
register_scorer(("math_dapo", "math", "math_dapo_reasoning"), math_dapo.compute_score)
register_scorer_prefix("aime", math_dapo.compute_score)
register_scorer(prime_code.CODE_DATA_SOURCES, prime_code.score_code_sample)
register_group_scorer(prime_code.CODE_DATA_SOURCES, prime_code.score_code_samples)
