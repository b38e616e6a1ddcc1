"""SandboxFusion's ``/run_code`` request and response, served by the local sandbox.

SandboxFusion (bytedance/SandboxFusion) is the code-execution service verl's code scorers call
(``reward_model.sandbox_fusion.url``). A request is JSON::

    {"code": "...", "language": "python", "stdin": "...", "compile_timeout": 10, "run_timeout": 10,
     "memory_limit_MB": 1024, "files": {}, "fetch_files": []}

and the response::

    {"status": "Success" | "Failed" | "SandboxError", "message": "",
     "compile_result": null,
     "run_result": {"status": "Finished" | "TimeLimitExceeded" | "Error", "execution_time": 0.02,
                    "return_code": 0, "stdout": "...", "stderr": "..."},
     "executor_pod_name": null, "files": {}, "isolation": "bwrap"}

(``isolation`` is this server's addition: "bwrap", or "rlimit" when it runs with resource limits only.)

``Success`` means the program finished with exit code 0; ``Failed`` anything else the program did (an error, a
time-out, a syntax error: Python has no compile step, so it is a failed run with the traceback in stderr, as
SandboxFusion reports it); ``SandboxError`` that the sandbox itself could not run it. Only Python runs here
(``python`` and ``python3``); another language is a request error naming the supported ones.
"""

from __future__ import annotations

from typing import Any

from verl.sandbox.local import SandboxConfig, run_code

LANGUAGES = ("python", "python3")
DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 300.0
MAX_MEMORY_MB = 16384


class RequestError(ValueError):
    """A request this server cannot run: the message names the field and what is accepted."""


def _number(payload: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = payload.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise RequestError(f"'{key}' must be a number in [{low:g}, {high:g}], got {value!r}")
    return float(value)


def parse_request(payload: Any) -> tuple[str, str | None, SandboxConfig]:
    """``(code, stdin, limits)`` of a ``/run_code`` request, or ``RequestError``."""
    if not isinstance(payload, dict):
        raise RequestError(f"the request body must be a JSON object, got {type(payload).__name__}")
    code = payload.get("code")
    if not isinstance(code, str):
        raise RequestError("'code' (the program text) is required and must be a string")
    language = payload.get("language", "python")
    if language not in LANGUAGES:
        raise RequestError(f"'language' {language!r} is not supported by this sandbox; it runs {list(LANGUAGES)}")
    stdin = payload.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        raise RequestError(f"'stdin' must be a string or null, got {type(stdin).__name__}")
    if payload.get("files"):
        raise RequestError("'files' is not supported by this sandbox: send the program in 'code' (files: {})")
    run_timeout = _number(payload, "run_timeout", DEFAULT_TIMEOUT_S, 0.1, MAX_TIMEOUT_S)
    memory = _number(payload, "memory_limit_MB", 1024, 16, MAX_MEMORY_MB)
    config = SandboxConfig(
        wall_timeout_s=run_timeout, cpu_time_s=max(1, int(run_timeout + 0.999)), memory_limit_mb=int(memory)
    )
    return code, stdin, config


def run_request(payload: Any, isolation: str | None = None) -> dict[str, Any]:
    """Run one ``/run_code`` request in the local sandbox and answer in SandboxFusion's shape, plus the field
    ``isolation`` ("bwrap" or "rlimit": what isolated the program). ``isolation``: what the server resolved at start
    (None: resolve it for this run, which raises ``SandboxUnavailable`` where bubblewrap cannot start)."""
    code, stdin, config = parse_request(payload)
    result = run_code(code, stdin, config, isolation=isolation)
    if result.status == "sandbox_error":
        return {"status": "SandboxError", "message": result.stderr, "compile_result": None, "run_result": None,
                "executor_pod_name": None, "files": {}, "isolation": result.isolation}  # fmt: skip
    run_status = {"ok": "Finished", "runtime_error": "Finished", "syntax_error": "Finished", "timeout":
                  "TimeLimitExceeded"}.get(result.status, "Error")  # fmt: skip
    return_code = result.returncode if result.returncode is not None else -9
    return {
        "status": "Success" if result.status == "ok" else "Failed",
        "message": "" if result.status in ("ok", "runtime_error", "syntax_error") else result.status,
        "compile_result": None,
        "run_result": {
            "status": run_status,
            "execution_time": round(result.wall_s, 4),
            "return_code": return_code,
            "stdout": result.stdout,
            "stderr": result.stderr,
        },
        "executor_pod_name": None,
        "files": {},
        "isolation": result.isolation,
    }
