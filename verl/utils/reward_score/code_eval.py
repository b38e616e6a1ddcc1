"""Code-generation evaluation metrics: syntax rate, execution success, test pass rate, pass@1 and unbiased pass@k.

``evaluate_code_responses(rows, responses, ks)`` scores ``responses[i]`` (n samples) against row ``i``'s test cases
(``reward_model.ground_truth``, APPS layout) in the sandbox. Per sample: **syntax** (its program parses), **execution
success** (every case ran to exit 0 within its timeout, whatever it printed), the share of cases passed, and
**correct** (all cases passed). Per problem with ``c`` correct of ``n`` samples, pass@k is the unbiased estimator of
Chen et al. (2021, "Evaluating Large Language Models Trained on Code")::

    pass@k = 1 - C(n - c, k) / C(n, k)        (1 when n - c < k)

averaged over problems; pass@1 is the mean of c / n. ``k`` larger than ``n`` is not estimated.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb
from typing import Any

from verl.sandbox.testcases import run_test_cases
from verl.utils.reward_score.code_common import extract_code
from verl.utils.reward_score.code_reward import check_syntax


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s unbiased pass@k for one problem: ``n`` samples, ``c`` of them correct."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def score_program(response: str, test_cases: Any, case_timeout_s: float = 5.0) -> dict[str, Any]:
    """One sample's verdict: syntax, execution success, share of cases passed, correct."""
    code = extract_code(response)
    if check_syntax(code) == 0.0:
        return {"syntax": False, "executed": False, "pass_rate": 0.0, "correct": False}
    run = run_test_cases(code, test_cases, case_timeout_s=case_timeout_s)
    executed = bool(run.cases) and all(c.status in ("passed", "failed") for c in run.cases)
    return {"syntax": True, "executed": executed, "pass_rate": run.pass_rate, "correct": run.all_passed}


def evaluate_code_responses(
    rows: Sequence[dict[str, Any]],
    responses: Sequence[Sequence[str]],
    ks: Sequence[int] = (1,),
    case_timeout_s: float = 5.0,
) -> dict[str, Any]:
    """Metrics over every row's samples (module docstring), plus a per-problem list."""
    if len(rows) != len(responses) or not rows:
        raise ValueError(f"need one list of responses per row, got {len(rows)} rows and {len(responses)} lists")
    per_problem, samples = [], []
    for row, texts in zip(rows, responses):
        truth = row["reward_model"]["ground_truth"]
        verdicts = [score_program(t, truth, case_timeout_s) for t in texts]
        samples += verdicts
        n, c = len(verdicts), sum(v["correct"] for v in verdicts)
        problem = {"source_id": (row.get("extra_info") or {}).get("source_id"), "n": n, "correct": c}
        problem.update({f"pass@{k}": pass_at_k(n, c, k) for k in ks if k <= n})
        per_problem.append(problem)
    result: dict[str, Any] = {
        "num_problems": len(rows),
        "num_samples": len(samples),
        "syntax_rate": sum(s["syntax"] for s in samples) / len(samples),
        "execution_success_rate": sum(s["executed"] for s in samples) / len(samples),
        "case_pass_rate": sum(s["pass_rate"] for s in samples) / len(samples),
        "pass@1": sum(p["correct"] / p["n"] for p in per_problem) / len(per_problem),
    }
    for k in ks:
        if k > 1 and all(f"pass@{k}" in p for p in per_problem):
            result[f"pass@{k}"] = sum(p[f"pass@{k}"] for p in per_problem) / len(per_problem)
    result["per_problem"] = per_problem
    return result
