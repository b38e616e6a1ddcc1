"""Run a program against test cases in the sandbox and judge it on the host.

Two kinds of cases, in APPS / TACO / verl ``prime_code`` layout (``{"inputs": [...], "outputs": [...]}``, plus
``"fn_name"`` for the second kind):

- **stdin/stdout**: the program reads ``inputs[i]`` on stdin; its stdout must equal ``outputs[i]`` (trailing
  whitespace on each line and trailing empty lines ignored; numbers that differ by less than 1e-6 match).
- **function call** (``fn_name`` set): the program defines ``fn_name`` (a function, or a method of a ``Solution``
  class as LeetCode writes it); ``inputs[i]`` is its argument list, and its return value, sent back as JSON, must
  equal ``outputs[i]`` (APPS also wraps an output in a one-element list: either matches).

One sandbox run per program, or per group of programs that share their cases (:func:`run_test_cases_many`: a
prompt's samples, kept apart as its docstring says): inside it, a small harness compiles each program once and forks
one child per case, with the case's input on fd 0 and its output captured to a file, killed at ``case_timeout_s``.
**The expected outputs never enter the sandbox**: the harness sends back what the program printed or returned, and
the host compares. So a program cannot pass by reading the answers, exiting early with status 0 (no output is no
pass), or patching the harness or ``__eq__`` (a return value is compared after a round trip through JSON, on the
host).
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from typing import Any

from verl.sandbox.local import SandboxConfig, resolve_isolation, run_files

_HARNESS = r"""import ctypes, json, os, select, shutil, signal, sys, time
# no process of the run may read or write this one's memory or open its files through /proc (ptrace checks)
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
nonce = sys.argv[1]
with open("cases.json", encoding="utf-8") as f:
    spec = json.load(f)
sources = []
for k in range(spec["num_programs"]):
    with open("main_%d.py" % k, encoding="utf-8") as f:
        sources.append(f.read())
for name in os.listdir("."):  # read once, into this process: a program cannot rewrite a sibling
    os.unlink(name)
limit, cap, fn_name = spec["case_timeout_s"], spec["max_case_output"], spec.get("fn_name")
budget, own_namespace, me = spec["sample_budget_s"], spec["own_pid_namespace"], os.getpid()
session = os.getsid(0)


def child(i, inp, code):
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


def others():
    # every live process of the run but this one and the namespace's init (bubblewrap's); without a PID
    # namespace of its own (resource limits only), the processes of this session
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (me, 1):
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in (b"Z", b"X") and (own_namespace or int(fields[3]) == session):
            pids.append(int(entry))
    return pids


def kill_others():
    # nothing a program started may still run when the next program does
    for _ in range(100):
        pids = others()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.001)


def wait(pid, seconds):
    # (wait status, timed out): the child's exit, or SIGKILL to its group after `seconds`
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        ready = select.select([fd], [], [], max(seconds, 0))[0]
        os.close(fd)
        if ready:
            return os.waitpid(pid, 0)[1], False
    else:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status, False
            time.sleep(0.002)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1], True


def run_program(k, source):
    try:
        code = compile(source, "main.py", "exec")
    except (SyntaxError, ValueError) as e:
        return {"program": k, "compile_error": "%s: %s" % (type(e).__name__, e)}
    home = os.path.abspath("p%d" % k)
    os.mkdir(home)
    results, start, out_of_time = [], time.monotonic(), False
    for i, inp in enumerate(spec["inputs"]):
        left = budget - (time.monotonic() - start)
        if left <= 0:
            out_of_time = True
            break
        case_start = time.monotonic()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                os.chdir(home)
                child(i, inp, code)
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
        wait_status, timed_out = wait(pid, min(limit, left))
        out_of_time = timed_out and left < limit
        kill_others()  # before reading: no process of this program is left to rewrite its output
        code_ = os.waitstatus_to_exitcode(wait_status)
        results.append({"timeout": timed_out, "exit": code_, "stdout": read(os.path.join(home, "out_%d" % i)),
                        "stderr": (read(os.path.join(home, "err_%d" % i)) or "")[-400:],
                        "ret": read(os.path.join(home, "ret_%d" % i)),
                        "seconds": round(time.monotonic() - case_start, 4)})
        if out_of_time or (spec["stop_on_failure"] and (timed_out or code_ != 0)):
            break
    shutil.rmtree(home, ignore_errors=True)
    for name in os.listdir("/tmp") if own_namespace else []:  # the run's own tmpfs: nothing passes to the next
        path = os.path.join("/tmp", name)
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
    return {"program": k, "results": results, "sample_timeout": out_of_time,
            "seconds": round(time.monotonic() - start, 4)}


for k, source in enumerate(sources):
    print(nonce + json.dumps(run_program(k, source), ensure_ascii=False), flush=True)
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
    """One program's report from the harness, or {} when it is missing or malformed (a program that kills the
    harness and prints a line of its own must lose its cases, not make the host raise)."""
    try:
        payload = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    if not isinstance(payload, dict) or not isinstance(payload.get("program", 0), int):
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
    return run_test_cases_many(
        [code],
        test_cases,
        case_timeout_s=case_timeout_s,
        sample_timeout_s=sample_timeout_s,
        stop_on_failure=stop_on_failure,
        config=config,
    )[0]


def run_test_cases_many(
    codes: list[str],
    test_cases: str | dict[str, Any],
    *,
    case_timeout_s: float = 5.0,
    sample_timeout_s: float | None = None,
    stop_on_failure: bool = False,
    config: SandboxConfig | None = None,
) -> list[TestRun]:
    """:func:`run_test_cases` for several programs against the same cases (the ``rollout.n`` answers to one prompt),
    one after another in one sandbox run: its start-up (about 30 ms: bubblewrap and the interpreter) is paid once.

    The programs stay apart: the harness reads them all before any runs; each runs in a directory of its own that is
    deleted after it; after each case every other process of the run is killed, and the run's ``/tmp`` is emptied
    between programs; the harness is not dumpable, so no program can read or write its memory or its files through
    ``/proc``. Each program keeps its own ``sample_timeout_s``. A program that kills the harness ends the run: it is
    charged with the run's failure and the programs after it run again in a fresh sandbox."""
    cases = parse_test_cases(test_cases)
    config = config or SandboxConfig()
    per_program = sample_timeout_s or case_timeout_s * len(cases["inputs"]) + 1.0
    runs: list[TestRun | None] = [None] * len(codes)
    first = 0
    while first < len(codes):
        reports, status, returncode, err, wall = _sandbox_run(
            codes[first:], cases, case_timeout_s, per_program, stop_on_failure, config
        )
        done = 0
        while done in reports:
            runs[first + done] = _judge(reports[done], cases)
            done += 1
        if first + done < len(codes):  # the run ended inside this program: it is charged, the rest run again
            if status == "ok":
                status = "sandbox_error" if returncode not in (0, None) else "ok"
            runs[first + done] = _judge(None, cases, status, err)
            done += 1
        for i in range(first, first + done):
            runs[i].wall_s = runs[i].wall_s or wall / done
        first += done
    return runs  # type: ignore[return-value]


def _sandbox_run(
    codes: list[str],
    cases: dict[str, Any],
    case_timeout_s: float,
    per_program: float,
    stop_on_failure: bool,
    config: SandboxConfig,
) -> tuple[dict[int, dict], str, int | None, str, float]:
    """One sandbox run of the harness over ``codes``: the reports by program index, the run's status, return code,
    stderr and wall time."""
    budget = per_program * len(codes) + 2.0
    # each case keeps up to max_output_bytes of stdout and of its return value; the reports carry them all, so the
    # run's own cap leaves room for every case of every program (a cut report would lose its cases)
    case_cap = config.max_output_bytes
    report_cap = (case_cap * (2 * len(cases["inputs"]) + 1) + 65536) * len(codes)
    run_config = SandboxConfig(
        **{
            **config.__dict__,
            "wall_timeout_s": budget,
            "cpu_time_s": max(1, int(budget) + 1),
            "max_output_bytes": report_cap,
        }
    )
    isolation = resolve_isolation(run_config)
    nonce = uuid.uuid4().hex
    spec = {
        "num_programs": len(codes),
        "inputs": cases["inputs"],
        "fn_name": cases["fn_name"],
        "case_timeout_s": case_timeout_s,
        "sample_budget_s": per_program,
        "max_case_output": case_cap,
        "stop_on_failure": stop_on_failure,
        "own_pid_namespace": isolation == "bwrap",
    }
    files = {f"main_{k}.py": code for k, code in enumerate(codes)}
    files.update({"_harness.py": _HARNESS, "cases.json": json.dumps(spec)})
    returncode, out, err, reason, wall, _ = run_files(files, "_harness.py", [nonce], None, run_config, isolation)
    reports: dict[int, dict] = {}
    for line in out.splitlines():
        if line.startswith(nonce):
            payload = _parse_report(line[len(nonce) :])
            k = payload.get("program")
            if payload and isinstance(k, int) and 0 <= k < len(codes) and k not in reports:
                reports[k] = payload
    return reports, reason or "ok", returncode, err, wall


def _judge(payload: dict | None, cases: dict[str, Any], status: str = "ok", err: str = "") -> TestRun:
    """The verdict on one program from its report (None: the run ended before it reported, with ``status``)."""
    run = TestRun(sandbox_status=status)
    if payload and "compile_error" in payload:
        run.compile_error = payload["compile_error"]
        run.cases = [CaseResult("compile_error", stderr=payload["compile_error"]) for _ in cases["inputs"]]
        return run
    ran = (payload or {}).get("results", [])
    if payload:
        run.wall_s = float(payload.get("seconds") or 0.0)
        if payload.get("sample_timeout"):
            run.sandbox_status = "timeout"
    for i, want in enumerate(cases["outputs"]):
        if i >= len(ran):
            missing = "timeout" if run.sandbox_status == "timeout" else "not_run"
            run.cases.append(CaseResult(missing, stderr=err[-400:] if i == len(ran) else ""))
            continue
        r = ran[i]
        if r["timeout"]:
            case_status = "timeout"
        elif cases["fn_name"] is not None:
            ok = r["exit"] == 0 and r["ret"] is not None and return_matches(r["ret"], want)
            case_status = "passed" if ok else ("failed" if r["exit"] == 0 else "runtime_error")
        else:
            ok = r["exit"] == 0 and stdout_matches(r["stdout"] or "", want)
            case_status = "passed" if ok else ("failed" if r["exit"] == 0 else "runtime_error")
        shown = r["ret"] if cases["fn_name"] is not None else r["stdout"]
        run.cases.append(CaseResult(case_status, shown or "", r["stderr"], r["seconds"]))
    return run
