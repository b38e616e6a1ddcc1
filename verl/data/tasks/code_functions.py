"""The built-in code task: short Python functions from a small specification language, judged by hidden tests.

    Write a Python function f(x) that returns x plus 3, then times 2.
    -> ```python
       def f(x):
           return (x + 3) * 2
       ```

Four kinds of specification, each a template over small constants (8,346 distinct problems with the defaults; a
problem is drawn by picking a kind uniformly, then its constants, so the list kinds are not drowned by ``arith``):

- ``arith``: ``f(x)``: x {plus, minus, times} A, then {plus, minus, times} B (A, B in 1..``max_const``);
- ``filter_sum``: ``f(xs)``: the sum of the numbers in xs {greater, less} than A (A in 0..``max_const``);
- ``count``: ``f(xs)``: how many numbers in xs are {even, odd}, or {greater, less} than A;
- ``extreme``: ``f(xs)``: the {largest, smallest} of the numbers in xs {plus, times} A (xs never empty).

The ground truth is five hidden function-call test cases (APPS layout, JSON text: ``{"fn_name": "f", "inputs",
"outputs"}``) with inputs drawn from the problem's own seed and outputs computed by the reference semantics here, on
the host; the response is judged in the sandbox (:mod:`verl.utils.reward_score.prime_code`, data source
``code_functions``: the share of cases passed). ``extra_info.answer`` is the reference program in a fenced block, the
SFT target. Train and test are disjoint by problem, as for every built-in task.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from verl.data.tasks.base import TaskParam, TaskSpec, check_int

DATA_SOURCE = "code_functions"
KINDS = ("arith", "filter_sum", "count", "extreme")
_OPS = {"plus": "+", "minus": "-", "times": "*"}
NUM_CASES = 5


def _validate(params: dict[str, Any]) -> dict[str, Any]:
    kinds = params["kinds"]
    names = [k.strip() for k in kinds.split(",")] if isinstance(kinds, str) else list(kinds)
    bad = [k for k in names if k not in KINDS]
    if bad or not names:
        raise ValueError(f"kinds must be a comma-separated subset of {KINDS}, got {kinds!r}")
    return {"kinds": ",".join(k for k in KINDS if k in names), "max_const": check_int(params, "max_const", 1, 99)}


def _problems(params: Mapping[str, Any]) -> list[tuple]:
    kinds, top = params["kinds"].split(","), params["max_const"]
    out: list[tuple] = []
    if "arith" in kinds:
        out += [
            ("arith", o1, a, o2, b) for o1 in _OPS for a in range(1, top + 1) for o2 in _OPS for b in range(1, top + 1)
        ]
    if "filter_sum" in kinds:
        out += [("filter_sum", cmp, a) for cmp in ("greater", "less") for a in range(0, top + 1)]
    if "count" in kinds:
        out += [("count", p, 0) for p in ("even", "odd")]
        out += [("count", cmp, a) for cmp in ("greater", "less") for a in range(0, top + 1)]
    if "extreme" in kinds:
        out += [
            ("extreme", w, o, a) for w in ("largest", "smallest") for o in ("plus", "times") for a in range(1, top + 1)
        ]
    return out


def _sample(rng: random.Random, params: Mapping[str, Any]) -> tuple:
    kind = rng.choice(params["kinds"].split(","))
    return rng.choice(_problems({**params, "kinds": kind}))


def _spec_and_code(p: tuple) -> tuple[str, str]:
    kind = p[0]
    if kind == "arith":
        _, o1, a, o2, b = p
        return (
            f"f(x) that returns x {o1} {a}, then {o2} {b}",
            f"def f(x):\n    return (x {_OPS[o1]} {a}) {_OPS[o2]} {b}",
        )
    if kind == "filter_sum":
        _, cmp, a = p
        sign = ">" if cmp == "greater" else "<"
        return (f"f(xs) that returns the sum of the numbers in xs {cmp} than {a}",
                f"def f(xs):\n    return sum(v for v in xs if v {sign} {a})")  # fmt: skip
    if kind == "count":
        _, what, a = p
        if what in ("even", "odd"):
            return (f"f(xs) that returns how many numbers in xs are {what}",
                    f"def f(xs):\n    return len([v for v in xs if v % 2 == {0 if what == 'even' else 1}])")  # fmt: skip
        sign = ">" if what == "greater" else "<"
        return (f"f(xs) that returns how many numbers in xs are {what} than {a}",
                f"def f(xs):\n    return len([v for v in xs if v {sign} {a}])")  # fmt: skip
    _, which, op, a = p
    fn = "max" if which == "largest" else "min"
    return (f"f(xs) that returns the {which} of the numbers in xs {op} {a}",
            f"def f(xs):\n    return {fn}(v {_OPS[op]} {a} for v in xs)")  # fmt: skip


def reference_value(p: tuple, arg: Any) -> Any:
    """What the problem's function returns for ``arg``: the semantics, written apart from the reference code."""
    kind = p[0]
    if kind == "arith":
        _, o1, a, o2, b = p
        ops = {"plus": lambda u, v: u + v, "minus": lambda u, v: u - v, "times": lambda u, v: u * v}
        return ops[o2](ops[o1](arg, a), b)
    if kind == "filter_sum":
        return sum(v for v in arg if (v > p[2] if p[1] == "greater" else v < p[2]))
    if kind == "count":
        what, a = p[1], p[2]
        tests = {"even": lambda v: v % 2 == 0, "odd": lambda v: v % 2 == 1, "greater": lambda v: v > a,
                 "less": lambda v: v < a}  # fmt: skip
        return sum(1 for v in arg if tests[what](v))
    _, which, op, a = p
    values = [v + a if op == "plus" else v * a for v in arg]
    return max(values) if which == "largest" else min(values)


def hidden_tests(p: tuple) -> dict[str, Any]:
    """Five function-call cases drawn from the problem's own seed (the same wherever it is generated)."""
    rng = random.Random(f"code_functions|{_key(p)}")
    inputs = []
    for _ in range(NUM_CASES):
        if p[0] == "arith":
            inputs.append([rng.randint(-20, 20)])
        else:
            low = 1 if p[0] == "extreme" else 0
            inputs.append([[rng.randint(-9, 9) for _ in range(rng.randint(low, 6))]])
    return {"fn_name": "f", "inputs": inputs, "outputs": [reference_value(p, args[0]) for args in inputs]}


def _key(p: tuple) -> str:
    return ":".join(str(v) for v in p)


def _render(p: tuple, rng: random.Random, params: Mapping[str, Any]) -> tuple[str, str, str]:
    spec, code = _spec_and_code(p)
    question = f"Write a Python function {spec}. Put the code in one ```python block."
    return question, f"```python\n{code}\n```", json.dumps(hidden_tests(p))


TASK = TaskSpec(
    name="code_functions",
    data_source=DATA_SOURCE,
    ability="code",
    params=(
        TaskParam("kinds", ",".join(KINDS), str, f"comma-separated specification kinds, of {KINDS}"),
        TaskParam("max_const", 30, int, "largest constant A (and B) in a specification"),
    ),
    validate=_validate,
    key=_key,
    enumerate=lambda params: None,  # sampled, kind first (module docstring)
    sample=_sample,
    render=_render,
    enlarge_hint="raise max_const or add kinds",
    description="short Python functions from a small specification language, judged by 5 hidden tests in the sandbox",
)
