"""Test-case scoring of generated code, with verl's ``prime_code`` interface, run in the local sandbox.

    from verl.utils.reward_score import prime_code
    score, metadata = prime_code.compute_score(completion, test_cases, continuous=True)

``completion`` is the model's response; the program is its last fenced Python block (the whole text when it has
none). ``test_cases`` is APPS/TACO's ``{"inputs": [...], "outputs": [...]}`` (``"fn_name"`` for function-call cases),
as a dict or JSON text (verl stores it in ``reward_model.ground_truth``). ``continuous=False``: True when every case
passes; ``continuous=True``: the fraction of the first ``max_cases`` cases that pass (verl scores the first 10).
``metadata`` has one entry per case run (status, output tail, seconds). Cases run in
:func:`verl.sandbox.testcases.run_test_cases`; the expected outputs never enter the sandbox.

Registered in :mod:`verl.utils.reward_score` for the code data sources verl scores this way (``codecontests``,
``apps``, ``codeforces``, ``taco``), for the rows :mod:`verl.utils.data` converts (``humaneval``, ``mbpp``,
``leetcode``) and for the built-in code task (``code_functions``).
"""

from __future__ import annotations

from typing import Any

from verl.sandbox import SandboxConfig
from verl.sandbox.testcases import TestRun, parse_test_cases, run_test_cases, run_test_cases_many
from verl.utils.reward_score import sandbox_fusion
from verl.utils.reward_score.code_common import extract_code, first_cases

__all__ = [
    "CODE_DATA_SOURCES",
    "compute_score",
    "extract_code",
    "first_cases",
    "score_code_sample",
    "score_code_samples",
]

# verl scores these with prime_code; the rest are the other formats verl.utils.data converts
CODE_DATA_SOURCES = ("codecontests", "apps", "codeforces", "taco", "humaneval", "mbpp", "leetcode", "code_functions")


def compute_score(
    completion: str,
    test_cases: str | dict[str, Any],
    continuous: bool = False,
    timeout: float = 5.0,
    max_cases: int = 10,
    config: SandboxConfig | None = None,
) -> tuple[bool | float, list[dict[str, Any]]]:
    """verl's ``prime_code.compute_score``: ``(all passed or fraction passed, per-case metadata)``."""
    cases = parse_test_cases(test_cases)
    if continuous:  # a fraction over the first max_cases, as verl does, so a problem with 500 cases stays cheap
        cases = first_cases(cases, max_cases)
    run = run_test_cases(
        extract_code(completion), cases, case_timeout_s=timeout, stop_on_failure=not continuous, config=config
    )
    metadata = [
        {"status": c.status, "output": c.stdout[-200:], "stderr": c.stderr[-200:], "seconds": c.seconds}
        for c in run.cases
    ]
    return (run.pass_rate if continuous else run.all_passed), metadata


def score_code_sample(
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    case_timeout_s: float = 5.0,
    sample_timeout_s: float | None = None,
    max_cases: int = 10,
    sandbox_fusion_url: str | None = None,
    concurrent_semaphore: Any = None,
    memory_limit_mb: int = 1024,
) -> dict[str, Any]:
    """The reward of a code data source: the fraction of the first ``max_cases`` test cases passed (verl's
    ``continuous=True``), with ``all_passed`` and ``compile_error`` as extra metrics. The timeouts are
    ``reward_model.reward_kwargs`` keys; ``sample_timeout_s`` (default: the cases' added up) bounds one program.
    With ``sandbox_fusion_url`` (``reward_model.sandbox_fusion.url``) the cases run on that SandboxFusion service
    instead of the local sandbox, as verl does."""
    return score_code_samples(
        [solution_str], ground_truth, [extra_info], case_timeout_s, sample_timeout_s, max_cases,
        sandbox_fusion_url, concurrent_semaphore, memory_limit_mb,
    )[0]  # fmt: skip


def score_code_samples(
    solution_strs: list[str],
    ground_truth: Any,
    extra_infos: list[dict | None] | None = None,
    case_timeout_s: float = 5.0,
    sample_timeout_s: float | None = None,
    max_cases: int = 10,
    sandbox_fusion_url: str | None = None,
    concurrent_semaphore: Any = None,
    memory_limit_mb: int = 1024,
) -> list[dict[str, Any]]:
    """:func:`score_code_sample` of several responses to one problem (the same ``ground_truth``: the ``rollout.n``
    samples of a prompt), judged in one sandbox run (:func:`verl.sandbox.testcases.run_test_cases_many`), which
    pays the sandbox's start-up once instead of per response. The reward manager groups a batch this way."""
    if sandbox_fusion_url:  # the service runs every case as its own request anyway
        scores = []
        for text in solution_strs:
            fraction, meta = sandbox_fusion.compute_score(
                sandbox_fusion_url, concurrent_semaphore, memory_limit_mb, text, ground_truth,
                continuous=True, timeout=case_timeout_s, max_cases=max_cases,
            )  # fmt: skip
            syntax = any(m["status"] == "runtime_error" and "SyntaxError" in m["stderr"] for m in meta)
            scores.append(
                {"score": float(fraction), "all_passed": float(fraction == 1.0), "compile_error": float(syntax)}
            )
        return scores
    cases = first_cases(parse_test_cases(ground_truth), max_cases)
    runs = run_test_cases_many(
        [extract_code(t) for t in solution_strs],
        cases,
        case_timeout_s=case_timeout_s,
        sample_timeout_s=sample_timeout_s,
    )
    return [_sample_score(run) for run in runs]


def _sample_score(run: TestRun) -> dict[str, Any]:
    return {
        "score": run.pass_rate,
        "all_passed": float(run.all_passed),
        "compile_error": float(run.compile_error is not None),
    }
