"""One trial = one ``python -m verl.trainer.main_ppo`` subprocess, watched through its ``metrics.jsonl``.

The child runs in its own session (process group), so a crash, an out-of-memory kill or a hang in a trial never
reaches the tuner, and ending a trial (prune, early stop, wall-clock limit, Ctrl-C) kills the whole group: SIGTERM,
then SIGKILL after a grace period. On Linux the child also gets SIGKILL if the tuner dies (``PR_SET_PDEATHSIG``), and
its pid is kept in ``<trial_dir>/trial.pid`` so a resumed tuner can end an orphan that outlived it anyway.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PID_FILE = "trial.pid"
LOG_FILE = "train.log"


@dataclass
class TrialRun:
    """What a finished (or ended) trial subprocess left behind."""

    returncode: int | None
    ended_by: str | None  # None (exited by itself) | "prune" | "stop" | "timeout" | "interrupt"
    records: list[dict] = field(default_factory=list)
    log_tail: str = ""
    seconds: float = 0.0

    def series(self, metric: str) -> list[tuple[int, float]]:
        """``(step, value)`` points of ``metric``; NaN/inf were logged as null and come back as NaN."""
        out = []
        for r in self.records:
            if metric in r:
                v = r[metric]
                out.append((int(r.get("step", 0)), float("nan") if v is None else float(v)))
        return out

    def keys(self) -> set[str]:
        return {k for r in self.records for k in r}


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def proc_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (tells a live process from a reused pid); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return "?"
        except ProcessLookupError:
            return None
        except PermissionError:
            return "?"


def pid_alive(pid: int, start_time: str | None = None) -> bool:
    now = proc_start_time(pid)
    if now is None:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except OSError:
        pass
    return start_time is None or now == "?" or start_time == "?" or now == start_time


def kill_group(pid: int, grace: float = 5.0, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group led by ``pid``, then SIGKILL what is left after ``grace`` seconds."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.time() + grace
    while time.time() < deadline:
        if proc is not None:
            if proc.poll() is not None:
                break
        elif not pid_alive(pid):
            break
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc is not None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def kill_orphan(trial_dir: str) -> bool:
    """End a trainer a dead tuner left running in ``trial_dir`` (pid file written at launch). True if one was."""
    path = os.path.join(trial_dir, PID_FILE)
    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return False
    pid, start = int(info["pid"]), info.get("start")
    if info.get("host") != os.uname().nodename or not pid_alive(pid, start):
        return False
    kill_group(pid, grace=2.0)
    return True


def tail(path: str, n_chars: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n_chars))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


class MetricsReader:
    """Incremental reader of a JSON-lines file that another process is appending to."""

    def __init__(self, path: str):
        self.path, self.offset, self.buf = path, 0, b""

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


def run_trial_process(
    argv: list[str],
    trial_dir: str,
    on_record: Callable[[dict], str | None] | None = None,
    timeout: float | None = None,
    poll_interval: float = 1.0,
    env: dict[str, str] | None = None,
    kill_grace: float = 5.0,
) -> TrialRun:
    """Run ``python -m verl.trainer.main_ppo *argv`` writing into ``trial_dir``; feed each metrics line to
    ``on_record`` as it appears. ``on_record`` returns None to go on, "prune" or "stop" to end the run."""
    os.makedirs(trial_dir, exist_ok=True)
    metrics_path = os.path.join(trial_dir, "metrics.jsonl")
    if os.path.exists(metrics_path):  # a retried trial dir: start clean
        os.remove(metrics_path)
    log_path = os.path.join(trial_dir, LOG_FILE)
    cmd = [sys.executable, "-u", "-m", "verl.trainer.main_ppo", *argv]
    with open(os.path.join(trial_dir, "command.sh"), "w") as f:
        f.write(" ".join(_quote(c) for c in cmd) + "\n")
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    child_env.setdefault("TQDM_DISABLE", "1")
    start = time.time()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_set_pdeathsig if sys.platform.startswith("linux") else None,
            env=child_env,
        )
    with open(os.path.join(trial_dir, PID_FILE), "w") as f:
        json.dump({"pid": proc.pid, "start": proc_start_time(proc.pid), "host": os.uname().nodename}, f)
    reader = MetricsReader(metrics_path)
    records: list[dict] = []
    ended_by = None
    try:
        while True:
            done = proc.poll() is not None
            for rec in reader.read():
                records.append(rec)
                if on_record is not None and ended_by is None:
                    verdict = on_record(rec)
                    if verdict in ("prune", "stop"):
                        ended_by = verdict
            if ended_by is not None and not done:
                kill_group(proc.pid, kill_grace, proc)
                break
            if done:
                break
            if timeout is not None and time.time() - start > timeout:
                ended_by = "timeout"
                kill_group(proc.pid, kill_grace, proc)
                break
            time.sleep(poll_interval)
    except BaseException:  # KeyboardInterrupt / SystemExit in the tuner: never leave the trainer behind
        kill_group(proc.pid, kill_grace, proc)
        raise
    records.extend(reader.read())
    return TrialRun(proc.returncode, ended_by, records, tail(log_path), time.time() - start)


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def aggregate(points: list[tuple[int, float]], how: str) -> float:
    """Reduce a metric's ``(step, value)`` points: ``last``, ``best-max``/``best-min`` or ``meanK`` (mean of last K).

    Step 0 (the evaluation before training) is left out when later points exist: the objective measures training."""
    if not points:
        return float("nan")
    later = [p for p in points if p[0] > 0]
    vals = [v for _, v in (later or points)]
    if how == "last":
        return vals[-1]
    if how == "max":
        return max(vals) if not any(math.isnan(v) for v in vals) else float("nan")
    if how == "min":
        return min(vals) if not any(math.isnan(v) for v in vals) else float("nan")
    if how.startswith("mean"):
        k = how[4:]
        if k and (not k.isdigit() or int(k) < 1):
            raise ValueError(f"aggregation {how!r}: meanK needs a whole number K >= 1 (the last K points), e.g. mean3")
        tail_vals = vals[-int(k or len(vals)) :]
        return sum(tail_vals) / len(tail_vals)
    raise ValueError(f"unknown aggregation {how!r}: use last, best, mean or meanK (mean of the last K points)")


def describe_failure(run: TrialRun) -> str:
    """One line saying why a trial subprocess failed."""
    text = run.log_tail
    if run.ended_by == "timeout":
        return f"wall-clock limit reached after {run.seconds:.0f} s: trainer killed"
    oom_markers = ("out of memory", "OutOfMemoryError", "CUDA error: out of memory", "MemoryError")
    if any(m in text for m in oom_markers) or run.returncode in (-9, 137):
        return f"out of memory (exit {run.returncode})"
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("error:") or "Error" in line.split(":")[0]:
            return f"exit {run.returncode}: {line[:300]}"
    return f"exit {run.returncode}"


def objective_value(run: TrialRun, metric: str, how: str) -> tuple[float, str | None]:
    """The metric's aggregated value, or NaN and a reason (never logged / NaN)."""
    points = run.series(metric)
    if not points:
        import difflib

        near = difflib.get_close_matches(metric, sorted(run.keys()), n=3, cutoff=0.4)
        hint = f" Logged keys like it: {near}" if near else ""
        return float("nan"), f"metric {metric!r} was never logged.{hint}"
    v = aggregate(points, how)
    if math.isnan(v) or math.isinf(v):
        return float("nan"), f"metric {metric!r} is {v} (NaN or inf was logged)"
    return v, None


def _sets_save_freq(base_argv: list[str]) -> bool:
    """Whether the base overrides or one of their ``--config`` files set ``trainer.save_freq``."""
    from verl.utils.config import load_yaml, parse_overrides

    files, overrides = parse_overrides(base_argv)
    if any(key == "trainer.save_freq" for key, _, _ in overrides):
        return True
    return any("save_freq" in (load_yaml(f).get("trainer") or {}) for f in files)


def build_argv(base_argv: list[str], trial_overrides: list[str], trial_dir: str) -> list[str]:
    """The trial's command line: tuning defaults < base overrides < trial params < the trial's own directory."""
    from verl.utils.config import load_config

    defaults = [] if _sets_save_freq(base_argv) else ["trainer.save_freq=-1"]
    argv = [*defaults, *base_argv, *trial_overrides]
    loggers = list(load_config("ppo_trainer", argv).trainer.logger)
    if "file" not in loggers:  # the tuner reads metrics.jsonl
        argv.append(f"trainer.logger=[{','.join([*loggers, 'file'])}]")
    return [*argv, f"trainer.default_local_dir={trial_dir}", "trainer.resume_mode=disable"]


def jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
