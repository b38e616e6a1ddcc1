"""Test-case scoring through a SandboxFusion service, with verl's ``sandbox_fusion`` interface.

    from verl.utils.reward_score import sandbox_fusion
    score, metadata = sandbox_fusion.compute_score(url, semaphore, 1024, completion, test_cases, continuous=True)

``url`` is the service's ``/run_code`` endpoint: a SandboxFusion deployment, or ``python -m verl.sandbox.server``,
which serves the same API over the local sandbox. Each test case is one request (the program with the case's input
on stdin; for ``fn_name`` cases the program plus a few lines that read the arguments as JSON from stdin, call the
function and print its value as JSON), and the output is compared here, on the client, with the same rules as the
local judge (:mod:`verl.sandbox.testcases`). ``concurrent_semaphore`` (a ``threading.Semaphore`` of
``reward_model.sandbox_fusion.max_concurrent``) bounds the requests in flight across scoring threads. A request that
fails (connection refused, 5xx) is retried 3 times with a growing delay, then the case counts as failed with the
error in its metadata: a sandbox outage lowers scores, it does not stop training.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from contextlib import nullcontext
from typing import Any

from verl.sandbox.testcases import parse_test_cases, return_matches, stdout_matches
from verl.utils.reward_score.code_common import extract_code, first_cases

RETRIES = 3
API_KEY_ENV = "VERL_SANDBOX_API_KEY"  # the key of a sandbox server started with --api-key
# appended to a function-call program: arguments as one JSON list on stdin, the value printed as JSON
_CALL_WRAPPER = """

if __name__ == "__main__":
    import json as _json, sys as _sys
    _args = _json.loads(_sys.stdin.read())
    _target = globals().get({fn!r})
    if _target is None and isinstance(globals().get("Solution"), type):
        _target = getattr(globals()["Solution"](), {fn!r}, None)
    if _target is None:
        raise NameError("the program defines no function %r" % {fn!r})
    print(_json.dumps(_target(*_args)))
"""


def call_sandbox_api(
    sandbox_fusion_url: str,
    code: str,
    stdin: str | None,
    compile_timeout: float,
    run_timeout: float,
    memory_limit_mb: int,
    language: str = "python",
) -> tuple[dict[str, Any] | None, str | None]:
    """POST one program to ``/run_code``: ``(response JSON, None)`` or ``(None, error message)`` after retries (of a
    busy server's 429 and of 5xx). With ``VERL_SANDBOX_API_KEY`` set, it is sent as ``Authorization: Bearer <key>``
    (``python -m verl.sandbox.server --api-key``)."""
    body = json.dumps(
        {"compile_timeout": compile_timeout, "run_timeout": run_timeout, "code": code, "stdin": stdin,
         "memory_limit_MB": memory_limit_mb, "language": language, "files": {}, "fetch_files": []}
    ).encode()  # fmt: skip
    error = None
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if os.environ.get(API_KEY_ENV):
        headers["Authorization"] = f"Bearer {os.environ[API_KEY_ENV]}"
    for attempt in range(RETRIES):
        request = urllib.request.Request(sandbox_fusion_url, body, headers)
        try:
            with urllib.request.urlopen(request, timeout=compile_timeout + run_timeout + 30) as response:
                return json.loads(response.read()), None
        except urllib.error.HTTPError as e:
            detail = e.read().decode("utf-8", "replace")[:300]
            error = f"HTTP {e.code} from {sandbox_fusion_url}: {detail}"
            if e.code < 500 and e.code != 429:
                return None, error  # the request itself is wrong: retrying cannot help (429: busy, retried)
        except (urllib.error.URLError, OSError, json.JSONDecodeError) as e:
            error = f"{type(e).__name__} calling {sandbox_fusion_url}: {e}"
        time.sleep(0.5 * (attempt + 1))
    return None, error


def _case_status(response: dict[str, Any] | None, error: str | None) -> tuple[str, str]:
    """(status, the program's stdout): passed/failed decided by the caller for finished runs."""
    if response is None:
        return "api_error", ""
    run = response.get("run_result") or {}
    if response.get("status") == "SandboxError":
        return "sandbox_error", ""
    if run.get("status") == "TimeLimitExceeded":
        return "timeout", run.get("stdout") or ""
    if run.get("status") != "Finished" or run.get("return_code") != 0:
        return "runtime_error", run.get("stdout") or ""
    return "finished", run.get("stdout") or ""


def compute_score(
    sandbox_fusion_url: str,
    concurrent_semaphore: Any,
    memory_limit_mb: int,
    completion: str,
    test_cases: str | dict[str, Any],
    continuous: bool = False,
    timeout: float = 10,
    max_cases: int = 10,
) -> tuple[bool | float, list[dict[str, Any]]]:
    """verl's ``sandbox_fusion.compute_score``: ``(all passed, or the fraction of the first max_cases passed,
    per-case metadata)``."""
    cases = parse_test_cases(test_cases)
    if continuous:
        cases = first_cases(cases, max_cases)
    inputs, outputs, fn = cases["inputs"], cases["outputs"], cases["fn_name"]
    program = extract_code(completion)
    if fn is not None:
        program += _CALL_WRAPPER.format(fn=fn)
    metadata, passed = [], 0
    for i, (inp, want) in enumerate(zip(inputs, outputs)):
        stdin = json.dumps(inp) if fn is not None else inp
        with concurrent_semaphore or nullcontext():
            response, error = call_sandbox_api(sandbox_fusion_url, program, stdin, timeout, timeout, memory_limit_mb)
        status, out = _case_status(response, error)
        err = ((response or {}).get("run_result") or {}).get("stderr") or ""
        if status == "finished":
            ok = return_matches(out.strip(), want) if fn is not None else stdout_matches(out, want)
            status = "passed" if ok else "failed"
        passed += status == "passed"
        metadata.append(
            {"case_index": i, "status": status, "stdout": out[-200:], "stderr": err[-300:], "api_request_error": error}
        )
        if status != "passed" and not continuous:
            break
    if continuous:
        return (passed / len(inputs) if inputs else 0.0), metadata
    return bool(inputs) and passed == len(inputs), metadata
