"""The guide's code reward: a weighted sum of syntax and logic, with an optional syntax penalty.

    from verl.utils.reward_score.code_reward import compute_reward
    reward = compute_reward(code, execution_result)           # 0.6 * check_syntax + 0.4 * evaluate_logic

``check_syntax(code)`` is 1.0 when the program parses (``ast.parse`` on the host: parsing runs nothing), else 0.0.
``evaluate_logic(execution_result)`` is the share of test cases passed: ``execution_result`` is a
:class:`verl.sandbox.testcases.TestRun`, a :class:`verl.sandbox.SandboxResult` (1.0 for a clean exit), a dict with
``passed`` and ``total`` (or ``pass_rate``), or a number. With ``syntax_penalty`` set (the guide's
``reward.syntax_penalty: -0.5``) a program that does not parse gets that value instead of the weighted sum.

As a reward function for the trainer (``custom_reward_function.path=verl/utils/reward_score/code_reward.py``), its
``compute_score`` runs the response's program against the row's test cases (``reward_model.ground_truth``, APPS
layout) in the local sandbox and returns the weighted reward with ``syntax``, ``logic`` and ``pass_rate`` as extra
metrics; ``syntax_weight``, ``logic_weight`` and ``syntax_penalty`` are ``custom_reward_function.reward_kwargs``.
"""

from __future__ import annotations

import ast
from typing import Any

from verl.sandbox import SandboxResult
from verl.sandbox.testcases import TestRun, parse_test_cases, run_test_cases
from verl.utils.reward_score.code_common import extract_code


def check_syntax(code: str) -> float:
    """1.0 when ``code`` parses as Python, else 0.0 (a pathological nesting depth counts as not parsing)."""
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return 0.0
    return 1.0


def evaluate_logic(execution_result: Any) -> float:
    """The share of tests passed, from any of the result kinds in the module docstring."""
    if isinstance(execution_result, TestRun):
        return execution_result.pass_rate
    if isinstance(execution_result, SandboxResult):
        return 1.0 if execution_result.status == "ok" else 0.0
    if isinstance(execution_result, dict):
        if "pass_rate" in execution_result:
            return float(execution_result["pass_rate"])
        total = execution_result.get("total")
        if total:
            return float(execution_result.get("passed", 0)) / float(total)
        raise ValueError(
            f"execution_result needs 'pass_rate' or 'passed' and 'total', got keys {sorted(execution_result)}"
        )
    if isinstance(execution_result, (int, float)) and not isinstance(execution_result, bool):
        return float(execution_result)
    raise TypeError(
        f"execution_result must be a TestRun, SandboxResult, dict or number, got {type(execution_result).__name__}"
    )


def compute_reward(
    code: str,
    execution_result: Any,
    syntax_weight: float = 0.6,
    logic_weight: float = 0.4,
    syntax_penalty: float | None = None,
) -> float:
    """``syntax_weight * check_syntax(code) + logic_weight * evaluate_logic(execution_result)``, or
    ``syntax_penalty`` for a program that does not parse when it is set."""
    return _weighted(check_syntax(code), execution_result, syntax_weight, logic_weight, syntax_penalty)


def _weighted(syntax: float, execution_result: Any, syntax_weight: float, logic_weight: float, penalty: float | None):
    if syntax == 0.0 and penalty is not None:
        return float(penalty)
    return syntax_weight * syntax + logic_weight * evaluate_logic(execution_result)


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    syntax_weight: float = 0.6,
    logic_weight: float = 0.4,
    syntax_penalty: float | None = None,
    case_timeout_s: float = 5.0,
) -> dict[str, Any]:
    """The trainer-facing reward function (verl's custom reward signature); see the module docstring."""
    code = extract_code(solution_str)
    syntax = check_syntax(code)
    run = run_test_cases(code, parse_test_cases(ground_truth), case_timeout_s=case_timeout_s) if syntax else TestRun()
    reward = _weighted(syntax, run, syntax_weight, logic_weight, syntax_penalty)
    return {"score": reward, "syntax": syntax, "logic": run.pass_rate, "pass_rate": run.pass_rate}
