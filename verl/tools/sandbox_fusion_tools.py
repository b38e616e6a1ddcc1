"""The ``code_interpreter`` tool: the model runs Python and reads its output, in the sandbox.

verl's ``SandboxFusionTool`` (same module path, class name, YAML keys and schema), so verl's tool configs load.
With ``sandbox_fusion_url`` set, the code runs on that SandboxFusion service (or ``python -m verl.sandbox.server``);
with it empty, in the local sandbox (:mod:`verl.sandbox`: bubblewrap + resource limits). Call::

    <tool_call>{"name": "code_interpreter", "arguments": {"code": "print(4821 * 37)"}}</tool_call>

The model reads the program's stdout (and stderr after it, when there is any). A program that fails reads
``Error (<what happened>):`` and the tail of its stderr: a time-out, a crash or a syntax error is an observation for
the model, never a failed run. At most ``num_workers`` programs run at once per tool (verl's ``rate_limit`` and
``enable_global_rate_limit`` are accepted; the bound here is per tool object). Tool YAML:
``examples/agent_loop/tool_configs/python_interpreter.yaml``; config keys: ``sandbox_fusion_url`` (""),
``num_workers`` (10), ``default_timeout`` (30 s), ``default_language`` (python), ``memory_limit_mb`` (1024), and
ours, ``isolation`` (null: the job's ``sandbox.isolation``). A local tool resolves its isolation when it is built (at
the trainer's start): where bubblewrap cannot run it stops the job with one error, unless ``isolation: rlimit``
accepts resource limits only (docs/security.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

from verl.tools.base_tool import BaseTool, ToolError
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

__all__ = ["CODE_INTERPRETER_SCHEMA", "SandboxFusionTool"]

LOCAL_OPT_IN = "isolation: rlimit in the tool's config, or sandbox.isolation=rlimit in the job's"

CODE_INTERPRETER_SCHEMA = {
    "type": "function",
    "function": {
        "name": "code_interpreter",
        "description": "A tool for executing code.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The code to execute."}},
            "required": ["code"],
        },
    },
}


class SandboxFusionTool(BaseTool):
    """Stateless apart from the concurrency bound: ``create``/``release`` are the base class's."""

    def __init__(self, config: dict | None = None, tool_schema: OpenAIFunctionToolSchema | dict | None = None):
        super().__init__(config, tool_schema)
        self.sandbox_fusion_url = self.config.get("sandbox_fusion_url") or ""
        self.num_workers = int(self.config.get("num_workers", 10))
        self.default_timeout = float(self.config.get("default_timeout", 30))
        self.default_language = self.config.get("default_language", "python")
        self.memory_limit_mb = int(self.config.get("memory_limit_mb", 1024))
        if self.num_workers < 1:
            raise ValueError(f"code_interpreter: num_workers must be >= 1, got {self.num_workers}")
        self.isolation: str | None = None  # what isolates the local runs (None: they run on the service)
        if not self.sandbox_fusion_url:
            from verl.sandbox import SandboxConfig, resolve_isolation

            wanted = SandboxConfig(isolation=self.config.get("isolation"))
            self.isolation = resolve_isolation(wanted, opt_in=LOCAL_OPT_IN)
        self._slots: asyncio.Semaphore | None = None

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return getattr(self, "tool_schema", None) or OpenAIFunctionToolSchema.model_validate(CODE_INTERPRETER_SCHEMA)

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        code = parameters.get("code")
        if not isinstance(code, str) or not code.strip():
            raise ToolError("'code' must be a non-empty string of Python")
        timeout = float(parameters.get("timeout") or self.default_timeout)
        language = parameters.get("language") or self.default_language
        if self._slots is None:  # made on first use, inside the event loop that runs the calls
            self._slots = asyncio.Semaphore(self.num_workers)
        async with self._slots:
            text, status = await asyncio.to_thread(self.execute_code, instance_id, code, timeout, language)
        return ToolResponse(text=text), 0.0, {"status": status}

    def execute_code(
        self, instance_id: str, code: str, timeout: float = 30, language: str = "python"
    ) -> tuple[str, str]:
        """Run ``code``; ``(what the model reads, status)``. Blocking: ``execute`` runs it in a thread."""
        if self.sandbox_fusion_url:
            from verl.utils.reward_score.sandbox_fusion import call_sandbox_api

            response, error = call_sandbox_api(
                self.sandbox_fusion_url, code, None, timeout, timeout, self.memory_limit_mb, language
            )
            if response is None:
                return f"Error (sandbox unreachable): {error}", "api_error"
            run = response.get("run_result") or {}
            status = {"Finished": "ok" if run.get("return_code") == 0 else "runtime_error",
                      "TimeLimitExceeded": "timeout"}.get(run.get("status"), "error")  # fmt: skip
            return _observation(status, run.get("stdout") or "", run.get("stderr") or "", timeout), status
        if language not in ("python", "python3"):
            raise ToolError(f"the local sandbox runs Python only, not {language!r}")
        from verl.sandbox import SandboxConfig, run_code

        config = SandboxConfig(
            wall_timeout_s=timeout, cpu_time_s=max(1, int(timeout + 0.999)), memory_limit_mb=self.memory_limit_mb
        )
        result = run_code(code, None, config, isolation=self.isolation)
        return _observation(result.status, result.stdout, result.stderr, timeout), result.status


def _observation(status: str, stdout: str, stderr: str, timeout: float) -> str:
    if status == "ok":
        return stdout + (stderr if stderr.strip() else "") if stdout or stderr else "(no output)"
    what = {"timeout": f"timed out after {timeout:g} s", "syntax_error": "syntax error"}.get(status, status)
    tail = stderr.strip()[-600:]
    return f"{stdout}Error ({what}):\n{tail}" if tail else f"{stdout}Error ({what})"
