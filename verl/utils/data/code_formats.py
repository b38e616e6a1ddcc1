"""Converters from the common public code-data formats to verl's RL rows, test cases in ``reward_model``.

Every converter returns a verl row::

    {"data_source": "apps", "prompt": [{"role": "user", "content": "<the problem>"}], "ability": "code",
     "reward_model": {"style": "rule", "ground_truth": "<test cases as JSON text>"},
     "extra_info": {"split": ..., "index": ..., "reference_solution": "<code or None>", "source_id": ...}}

with the test cases in APPS layout (``{"inputs", "outputs"}`` plus ``"fn_name"`` for function-call cases), which the
code data sources' scorer (:mod:`verl.utils.reward_score.prime_code`) and SandboxFusion client judge. A row that
cannot be converted raises ``ValueError`` naming what is missing, so a cleaning script can count and drop it.

- **APPS / TACO** (``from_apps``): ``question``, ``input_output`` (JSON text: ``inputs``, ``outputs``,
  optional ``fn_name``), ``solutions`` (JSON text: a list of programs), ``starter_code``.
- **HumanEval** (``from_humaneval``): ``prompt`` (signature + docstring), ``canonical_solution``, ``test`` (a
  ``check(candidate)`` of asserts), ``entry_point``.
- **MBPP** (``from_mbpp``): ``text`` (or ``prompt``), ``code``, ``test_list`` (assert lines).
- **LeetCode style** (``from_leetcode``): ``question`` (or ``content``), ``starter_code``, ``entry_point``,
  ``tests`` (a list of ``{"input": [args...], "output": value}``).

Assert-style tests (HumanEval, MBPP) become function-call cases by reading each ``assert f(args) == expected`` with
``ast`` (literal arguments and expected values only), so they are judged on the host like every other case: a program
cannot pass them by patching ``assert`` or returning an object equal to everything. Asserts of another shape
(``assert abs(f(x) - 2.5) < 1e-6``, ``assert f(x)``) are counted in ``extra_info.unconverted_asserts``; a row with
none converted is an error.
"""

from __future__ import annotations

import ast
import json
from typing import Any

CODE_INSTRUCTION = "Write a Python program that solves the problem. Put the program in one ```python code block."
FUNCTION_INSTRUCTION = "Write the Python function `{fn}`. Put the code in one ```python code block."


def _literal(node: ast.AST) -> Any:
    return ast.literal_eval(node)


def assert_cases(test_code: str, fn_name: str | None = None) -> tuple[dict[str, Any] | None, int]:
    """``(function-call cases, number of asserts not converted)`` from assert lines: ``assert NAME(args) == value``
    (or ``value == NAME(args)``) with literal arguments and value. ``fn_name``: only calls of that name (HumanEval's
    ``candidate`` counts as it); None: the name of the first such call. Cases are None when no assert converts."""
    try:
        tree = ast.parse(test_code)
    except SyntaxError as e:
        raise ValueError(f"the test code does not parse: {e}") from e
    inputs, outputs, skipped, name = [], [], 0, fn_name
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        test = node.test
        pair = None
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            left, right = test.left, test.comparators[0]
            pair = (
                (left, right) if isinstance(left, ast.Call) else (right, left) if isinstance(right, ast.Call) else None
            )
        if pair is None or not isinstance(pair[0].func, ast.Name) or pair[0].keywords:
            skipped += 1
            continue
        called = pair[0].func.id
        if name is None:
            name = called
        if called not in (name, "candidate"):
            skipped += 1
            continue
        try:
            args = [_literal(a) for a in pair[0].args]
            expected = _literal(pair[1])
        except (ValueError, SyntaxError, TypeError):
            skipped += 1
            continue
        inputs.append(args)
        outputs.append(expected)
    if not inputs:
        return None, skipped
    return {"fn_name": name, "inputs": inputs, "outputs": outputs}, skipped


def code_rl_row(
    data_source: str,
    problem: str,
    test_cases: dict[str, Any],
    reference_solution: str | None = None,
    index: int = 0,
    split: str = "train",
    source_id: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    """One verl RL row (module docstring); ``test_cases`` must hold at least one case."""
    if not test_cases.get("inputs"):
        raise ValueError(f"{data_source} row {source_id if source_id is not None else index}: no test cases")
    if len(test_cases["inputs"]) != len(test_cases["outputs"]):
        raise ValueError(
            f"{data_source} row {source_id}: {len(test_cases['inputs'])} inputs, {len(test_cases['outputs'])} outputs"
        )
    return {
        "data_source": data_source,
        "prompt": [{"role": "user", "content": problem}],
        "ability": "code",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(test_cases)},
        "extra_info": {"split": split, "index": index, "reference_solution": reference_solution,
                       "source_id": None if source_id is None else str(source_id), **extra},
    }  # fmt: skip


def _need(row: dict[str, Any], *keys: str) -> list[Any]:
    missing = [k for k in keys if row.get(k) in (None, "")]
    if missing:
        raise ValueError(f"missing {missing} (has {sorted(row)})")
    return [row[k] for k in keys]


def from_apps(row: dict[str, Any], index: int = 0, split: str = "train", data_source: str = "apps") -> dict:
    """An APPS / TACO row (module docstring); the first solution is the reference."""
    (question, io_text) = _need(row, "question", "input_output")
    cases = json.loads(io_text) if isinstance(io_text, str) else io_text
    cases = {k: v for k, v in cases.items() if k in ("inputs", "outputs", "fn_name") and v is not None}
    solutions = row.get("solutions") or "[]"
    solutions = json.loads(solutions) if isinstance(solutions, str) else solutions
    starter = row.get("starter_code") or ""
    instruction = FUNCTION_INSTRUCTION.format(fn=cases["fn_name"]) if cases.get("fn_name") else CODE_INSTRUCTION
    problem = question.rstrip() + (f"\n\nStart from:\n```python\n{starter.rstrip()}\n```" if starter.strip() else "")
    return code_rl_row(data_source, f"{problem}\n\n{instruction}", cases, solutions[0] if solutions else None,
                       index, split, row.get("problem_id", row.get("id")))  # fmt: skip


def from_humaneval(row: dict[str, Any], index: int = 0, split: str = "test", data_source: str = "humaneval") -> dict:
    """A HumanEval row: the reference is prompt + canonical solution; the tests come from ``check``'s asserts."""
    prompt, test, entry = _need(row, "prompt", "test", "entry_point")
    cases, skipped = assert_cases(test, entry)
    if cases is None:
        raise ValueError(f"none of the {skipped} asserts is 'assert candidate(literal args) == literal'")
    cases["fn_name"] = entry
    reference = prompt + row["canonical_solution"] if row.get("canonical_solution") else None
    problem = f"Complete this function:\n```python\n{prompt.rstrip()}\n```\n\n{FUNCTION_INSTRUCTION.format(fn=entry)}"
    return code_rl_row(data_source, problem, cases, reference, index, split, row.get("task_id"),
                       unconverted_asserts=skipped)  # fmt: skip


def from_mbpp(row: dict[str, Any], index: int = 0, split: str = "train", data_source: str = "mbpp") -> dict:
    """An MBPP row: the function name is the one the asserts call; the asserts are shown, as MBPP prompts do."""
    text = row.get("text") or row.get("prompt")
    if not text:
        raise ValueError(f"missing ['text'] (has {sorted(row)})")
    (tests,) = _need(row, "test_list")
    tests = list(tests)
    cases, skipped = assert_cases("\n".join(tests))
    if cases is None:
        raise ValueError(f"none of the {skipped} asserts is 'assert f(literal args) == literal'")
    problem = f"{text.strip()}\nYour code should pass these tests:\n" + "\n".join(tests[:3])
    problem += f"\n\n{FUNCTION_INSTRUCTION.format(fn=cases['fn_name'])}"
    return code_rl_row(data_source, problem, cases, row.get("code"), index, split, row.get("task_id"),
                       unconverted_asserts=skipped)  # fmt: skip


def from_leetcode(row: dict[str, Any], index: int = 0, split: str = "train", data_source: str = "leetcode") -> dict:
    """A LeetCode-style row: a function (or ``Solution`` method) ``entry_point`` and input/output pairs."""
    question = row.get("question") or row.get("content")
    if not question:
        raise ValueError(f"missing ['question'] (has {sorted(row)})")
    entry, tests = _need(row, "entry_point", "tests")
    cases = {"fn_name": entry, "inputs": [t["input"] if isinstance(t["input"], list) else [t["input"]] for t in tests],
             "outputs": [t["output"] for t in tests]}  # fmt: skip
    starter = row.get("starter_code") or ""
    problem = question.rstrip() + (f"\n\nStart from:\n```python\n{starter.rstrip()}\n```" if starter.strip() else "")
    return code_rl_row(data_source, f"{problem}\n\n{FUNCTION_INSTRUCTION.format(fn=entry)}", cases,
                       row.get("solution"), index, split, row.get("question_id", row.get("id")))  # fmt: skip
