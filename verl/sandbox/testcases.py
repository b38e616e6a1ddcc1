"""Run a program against test cases in the sandbox and judge it on the host.

Two kinds of cases, in APPS / TACO / verl ``prime_code`` layout (``{"inputs": [...], "outputs": [...]}``, plus
``"fn_name"`` for the second kind):

- **stdin/stdout**: the program reads ``inputs[i]`` on stdin; its stdout must equal ``outputs[i]`` (trailing
  whitespace on each line and trailing empty lines ignored; numbers that differ by less than 1e-6 match).
- **function call** (``fn_name`` set): the program defines ``fn_name`` (a function, or a method of a ``Solution``
  class as LeetCode writes it); ``inputs[i]`` is its argument list, and its return value, sent back as JSON, must
  equal ``outputs[i]`` (APPS also wraps an output in a one-element list: either matches).

One sandbox run per program: inside it, a small harness compiles the program once and forks one child per case,
with the case's input on fd 0 and its output captured to a file, killed at ``case_timeout_s``. **The expected
outputs never enter the sandbox**: the harness sends back what the program printed or returned, and the host
compares. So a program cannot pass by reading the answers, exiting early with status 0 (no output is no pass), or
patching the harness or ``__eq__`` (a return value is compared after a round trip through JSON, on the host).
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from typing import Any

from verl.sandbox.local import SandboxConfig, run_files

_HARNESS = r"""import json, os, signal, sys, time
nonce = sys.argv[1]
cases = json.load(open("cases.json"))
try:
    code = compile(open("main.py", encoding="utf-8").read(), "main.py", "exec")
except (SyntaxError, ValueError) as e:
    print(nonce + json.dumps({"compile_error": "%s: %s" % (type(e).__name__, e)}), flush=True)
    sys.exit(0)
limit, cap, fn_name = cases["case_timeout_s"], cases["max_case_output"], cases.get("fn_name")
results = []


def child(i, inp):
    os.setpgid(0, 0)
    if fn_name is None:
        with open("in_%d" % i, "w") as f:
            f.write(inp)
        fd = os.open("in_%d" % i, os.O_RDONLY)
    else:
        fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.dup2(os.open("out_%d" % i, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
    os.dup2(os.open("err_%d" % i, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    g = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(code, g)
    if fn_name is not None:
        target = g.get(fn_name)
        if target is None and isinstance(g.get("Solution"), type):
            target = getattr(g["Solution"](), fn_name, None)
        if target is None:
            raise NameError("the program defines no function %r" % fn_name)
        value = target(*inp)
        text = json.dumps(value)
        with open("ret_%d" % i, "w") as f:
            f.write(text)


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read(cap).decode("utf-8", "replace")
    except OSError:
        return None


for i, inp in enumerate(cases["inputs"]):
    start = time.monotonic()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            child(i, inp)
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            import traceback
            traceback.print_exc()
            status = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)
    timed_out = False
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - start > limit:
            timed_out = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                os.kill(pid, signal.SIGKILL)
            done, wait_status = os.waitpid(pid, 0)
            break
        time.sleep(0.002)
    code_ = os.waitstatus_to_exitcode(wait_status)
    results.append({"timeout": timed_out, "exit": code_, "stdout": read("out_%d" % i),
                    "stderr": (read("err_%d" % i) or "")[-400:], "ret": read("ret_%d" % i),
                    "seconds": round(time.monotonic() - start, 4)})
    if cases["stop_on_failure"] and (timed_out or code_ != 0):
        break
print(sys.argv[1] + json.dumps({"results": results}, ensure_ascii=False), flush=True)
"""

CASE_STATUSES = ("passed", "failed", "timeout", "runtime_error", "compile_error", "not_run", "sandbox_error")


@dataclass
class CaseResult:
    status: str  # one of CASE_STATUSES
    stdout: str = ""  # what it printed (stdin/stdout cases) or returned, as JSON text (function-call cases)
    stderr: str = ""  # the tail
    seconds: float = 0.0


@dataclass
class TestRun:
    """The verdict on one program: one ``CaseResult`` per case (cases after a stop are ``not_run``)."""

    __test__ = False  # not a pytest class, though its name starts with Test

    cases: list[CaseResult] = field(default_factory=list)
    compile_error: str | None = None
    sandbox_status: str = "ok"  # the whole run's: ok, timeout (past the per-sample wall clock), output_limit, ...
    wall_s: float = 0.0

    @property
    def passed(self) -> int:
        return sum(c.status == "passed" for c in self.cases)

    @property
    def pass_rate(self) -> float:
        return self.passed / len(self.cases) if self.cases else 0.0

    @property
    def all_passed(self) -> bool:
        return bool(self.cases) and self.passed == len(self.cases)


def parse_test_cases(test_cases: str | dict[str, Any]) -> dict[str, Any]:
    """``{"inputs", "outputs"[, "fn_name"]}`` from a dict or its JSON text (verl stores it as text in
    ``reward_model.ground_truth``); a clear error for anything else."""
    if isinstance(test_cases, str):
        try:
            test_cases = json.loads(test_cases)
        except json.JSONDecodeError as e:
            raise ValueError(f"test cases are not valid JSON ({e}): {test_cases[:120]!r}") from e
    if not isinstance(test_cases, dict) or not {"inputs", "outputs"} <= set(test_cases):
        raise ValueError(
            "test cases must be {'inputs': [...], 'outputs': [...]} (plus 'fn_name' for function-call cases), got "
            f"{str(test_cases)[:120]!r}"
        )
    inputs, outputs = list(test_cases["inputs"]), list(test_cases["outputs"])
    if len(inputs) != len(outputs):
        raise ValueError(f"test cases have {len(inputs)} inputs but {len(outputs)} outputs")
    fn_name = test_cases.get("fn_name") or None
    if fn_name is None:
        inputs = ["\n".join(x) + "\n" if isinstance(x, list) else str(x) for x in inputs]
    else:
        inputs = [x if isinstance(x, list) else [x] for x in inputs]
    return {"inputs": inputs, "outputs": outputs, "fn_name": fn_name}


def _tokens_match(got: str, want: str) -> bool:
    if got == want:
        return True
    a, b = got.split(), want.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            fx, fy = float(x), float(y)
        except ValueError:
            return False
        if not math.isclose(fx, fy, rel_tol=1e-6, abs_tol=1e-6):
            return False
    return True


def stdout_matches(got: str, want: Any) -> bool:
    """Output comparison of stdin/stdout cases (see the module docstring)."""
    want = "\n".join(map(str, want)) if isinstance(want, list) else str(want)

    def norm(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).rstrip()

    return norm(got) == norm(want) or _tokens_match(got, want)


def _canonical(value: Any) -> Any:
    return json.loads(json.dumps(value))  # tuples -> lists, as the program's value came back


def return_matches(got_json: str, want: Any) -> bool:
    """Return-value comparison of function-call cases."""
    try:
        got = json.loads(got_json)
    except json.JSONDecodeError:
        return False
    want = _canonical(want)
    if got == want:
        return True
    return isinstance(want, list) and len(want) == 1 and got == want[0]


_RESULT_KEYS = {"timeout", "exit", "stdout", "stderr", "ret", "seconds"}


def _parse_report(text: str | None) -> dict[str, Any]:
    """The harness's report, or {} when it is missing or malformed (the program may have killed the harness and
    printed a line of its own: that must cost it the cases, not raise here)."""
    try:
        payload = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    if not isinstance(payload, dict):
        return {}
    if "compile_error" in payload:
        return payload if isinstance(payload["compile_error"], str) else {}
    results = payload.get("results")
    ok = isinstance(results, list) and all(isinstance(r, dict) and _RESULT_KEYS <= set(r) for r in results)
    return payload if ok else {}


def run_test_cases(
    code: str,
    test_cases: str | dict[str, Any],
    *,
    case_timeout_s: float = 5.0,
    sample_timeout_s: float | None = None,
    stop_on_failure: bool = False,
    config: SandboxConfig | None = None,
) -> TestRun:
    """Run ``code`` against every case in one sandbox run and judge each on the host. ``sample_timeout_s`` bounds the
    whole program (default: the cases' timeouts added up, plus start-up); ``stop_on_failure`` stops at the first
    case that times out or crashes (the rest are ``not_run``: an all-or-nothing score needs no more; a wrong output
    is only known on the host, so those cases still run)."""
    cases = parse_test_cases(test_cases)
    config = config or SandboxConfig()
    budget = sample_timeout_s or case_timeout_s * len(cases["inputs"]) + 2.0
    # each case keeps up to max_output_bytes of stdout and of its return value; the harness's report carries them all,
    # so the run's own cap leaves room for every case (a cut report would lose every case)
    case_cap = config.max_output_bytes
    report_cap = case_cap * (2 * len(cases["inputs"]) + 1) + 65536
    config = SandboxConfig(
        **{
            **config.__dict__,
            "wall_timeout_s": budget,
            "cpu_time_s": max(1, int(budget) + 1),
            "max_output_bytes": report_cap,
        }
    )
    nonce = uuid.uuid4().hex
    spec = {
        "inputs": cases["inputs"],
        "fn_name": cases["fn_name"],
        "case_timeout_s": case_timeout_s,
        "max_case_output": case_cap,
        "stop_on_failure": stop_on_failure,
    }
    files = {"main.py": code, "_harness.py": _HARNESS, "cases.json": json.dumps(spec)}
    returncode, out, err, reason, wall, _ = run_files(files, "_harness.py", [nonce], None, config)
    run = TestRun(sandbox_status=reason or "ok", wall_s=wall)
    report = next((line[len(nonce) :] for line in reversed(out.splitlines()) if line.startswith(nonce)), None)
    payload = _parse_report(report)
    report = report if payload else None
    if "compile_error" in payload:
        run.compile_error = payload["compile_error"]
        run.cases = [CaseResult("compile_error", stderr=payload["compile_error"]) for _ in cases["inputs"]]
        return run
    ran = payload.get("results", [])
    if not report and run.sandbox_status == "ok":
        run.sandbox_status = "sandbox_error" if returncode not in (0, None) else "ok"
    for i, want in enumerate(cases["outputs"]):
        if i >= len(ran):
            status = "timeout" if run.sandbox_status == "timeout" else "not_run"
            run.cases.append(CaseResult(status, stderr=err[-400:] if i == len(ran) else ""))
            continue
        r = ran[i]
        if r["timeout"]:
            status = "timeout"
        elif cases["fn_name"] is not None:
            ok = r["exit"] == 0 and r["ret"] is not None and return_matches(r["ret"], want)
            status = "passed" if ok else ("failed" if r["exit"] == 0 else "runtime_error")
        else:
            ok = r["exit"] == 0 and stdout_matches(r["stdout"] or "", want)
            status = "passed" if ok else ("failed" if r["exit"] == 0 else "runtime_error")
        shown = r["ret"] if cases["fn_name"] is not None else r["stdout"]
        run.cases.append(CaseResult(status, shown or "", r["stderr"], r["seconds"]))
    return run
