"""kill -9 of a rollout replica and of the trainer in ``separate_async`` on the Ray backend, at random points, each
followed by a resume: every resume must finish the run with the uninterrupted run's metrics, and leave nothing running.

    python benchmarks/async_faults.py                    # 5 replica kills and 5 trainer kills, 8 steps (the check)
    python benchmarks/async_faults.py --kills 2 --seed 3

The runs are ``python -m verl.trainer.main_ppo`` subprocesses with ``trainer.backend=ray trainer.n_gpus_per_node=1
trainer.v1.trainer_mode=separate_async trainer.deterministic=true``: one trainer process and one standalone rollout
replica (the logical schedule, so a resumed run can be compared with an uninterrupted one bit for bit). First the
uninterrupted run. Then, for each target (``replica``: the rollout replica's process; ``trainer``: alternately the
trainer rank's process and the controller, the ``main_ppo`` process itself), ``--kills`` runs in a row on one
directory, each killed with SIGKILL at a random point: a step drawn from a seeded RNG among the next ``--window`` steps
the run will train after the checkpoint it resumed from, and a random fraction of that step's time. Each killed run
must exit within ``--timeout`` seconds (the controller's kill ends it at once) naming the dead process in one line
with no traceback, and no process of its Ray may outlive it. The last run resumes to the end. Then, against the
uninterrupted run, as ``benchmarks/fault_injection.py`` checks it: every step's metrics equal bit for bit but the
wall-clock ones, ``training/prompt_digest`` equal at every step (no prompt lost or repeated), one record per step.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_injection import SMALL, check, committed_step, records  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = [  # fault_injection's small run (4 prompts a step, 2 mini-batches of 2): one weight sync per step
    *SMALL,
    "trainer.save_freq=2",
    "trainer.test_freq=3",
    "trainer.backend=ray",
    "trainer.n_gpus_per_node=1",
    "trainer.deterministic=true",
    "trainer.v1.trainer_mode=separate_async",
    "trainer.v1.separate_async.parameter_sync_step=2",
]


def start_job(out_dir: str, steps: int, overrides: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *RUN, *overrides]
    cmd += [f"trainer.default_local_dir={out_dir}", f"trainer.total_training_steps={steps}"]
    env = {**os.environ, "PYTHONPATH": ROOT, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def logged_steps(out_dir: str) -> int:
    """The last step the run has written to ``metrics.jsonl`` (-1: none yet)."""
    path = os.path.join(out_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return -1
    with open(path) as f:
        lines = [line for line in f if line.endswith("\n")]
    return json.loads(lines[-1])["step"] if lines else -1


def victim_pid(out_dir: str, target: str) -> int:
    """The pid of the replica's or the trainer rank's process, from the run's ``workers.json`` (written at start)."""
    with open(os.path.join(out_dir, "workers.json")) as f:
        workers = json.load(f)
    want = (
        (lambda roles: roles == ["rollout_replica"]) if target == "replica" else (lambda r: "rollout_replica" not in r)
    )
    return next(w["pid"] for w in workers if want(w["roles"]))


def processes_under(path: str) -> list[str]:
    """``pid command`` of every process with a file open under ``path`` (a run's Ray keeps its session there)."""
    root, found = os.path.realpath(path), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith(root) for fd in fds):
                found.append(f"{pid} {open(f'/proc/{pid}/cmdline').read().replace(chr(0), ' ')[:120]}")
        except OSError:
            continue
    return found


def left_running(path: str, seconds: float = 60.0) -> tuple[list[str], float]:
    """Processes still holding files under ``path`` after ``seconds``, and how long the last of them took to exit.
    Ray's daemons exit after the driver: at once when it shuts Ray down, within seconds to a minute when it was
    killed (the raylet's agents notice their parent is gone on a poll of their own)."""
    start = time.time()
    while (found := processes_under(path)) and time.time() < start + seconds:
        time.sleep(0.2)
    return found, time.time() - start


def kill_at(proc: subprocess.Popen, out_dir: str, step: int, fraction: float, step_s: float, who: str) -> str:
    """Wait until the run trains ``step`` (its step before logged), then ``fraction`` of a step's time, and SIGKILL
    ``who`` (``replica``, ``trainer`` or ``controller``); returns what was killed, or why nothing was."""
    started, deadline = time.time(), time.time() + 600
    workers = os.path.join(out_dir, "workers.json")  # a resumed run's directory holds the last run's until rewritten
    while logged_steps(out_dir) < step - 1 or not os.path.exists(workers) or os.path.getmtime(workers) < started:
        if proc.poll() is not None or time.time() > deadline:
            return f"the run ended before step {step} (exit {proc.returncode})"
        time.sleep(0.05)
    time.sleep(fraction * step_s)
    pid = proc.pid if who == "controller" else victim_pid(out_dir, who)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return f"{who} (pid {pid}) had exited before the kill (exit {proc.poll()})"
    return f"{who} pid {pid}"


def named_in_one_line(err: str, who: str, pid: int) -> bool:
    """The killed run says which process died in one line, with no traceback (the controller's own kill says
    nothing: it is the process that would)."""
    if who == "controller":
        return True
    lines = [line for line in err.splitlines() if f"(pid {pid} " in line]
    return "Traceback" not in err and len(lines) == 1 and "same command again" in lines[0]


def run_target(
    work: str, target: str, steps: int, kills: int, window: int, rng: random.Random, step_s: float, timeout: float
) -> tuple[list[dict], list[str]]:
    run_dir, done, problems = os.path.join(work, target), [], []
    for i in range(kills):
        resume_from = committed_step(run_dir)
        step = rng.randint(resume_from + 1, min(resume_from + window, steps))
        fraction = rng.random()
        who = target if target == "replica" else ("trainer", "controller")[i % 2]
        proc = start_job(run_dir, steps, [])
        what = kill_at(proc, run_dir, step, fraction, step_s, who)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            problems.append(f"{target} kill {i + 1}: the run hung {timeout:.0f} s after {what} was killed")
        pid = int(what.split("pid ")[1]) if what.startswith(f"{who} pid ") else -1
        if pid < 0:
            problems.append(f"{target} kill {i + 1}: {what}")
        elif not named_in_one_line(err, who, pid):
            problems.append(f"{target} kill {i + 1}: {what} not named in one line:\n{err[-1500:]}")
        left, linger = left_running(run_dir)
        if left:
            problems.append(f"{target} kill {i + 1}: left running after {linger:.0f} s: {left}")
        kill = {"target": who, "step": step, "fraction": round(fraction, 2), "resumed_from": resume_from}
        done.append({**kill, "exit": proc.returncode, "linger_s": round(linger, 1)})
    proc = start_job(run_dir, steps, [])
    _, err = proc.communicate(timeout=900)
    if proc.returncode != 0:
        problems.append(f"{target}: the final resume failed (exit {proc.returncode}):\n{err[-1500:]}")
    return done, problems


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=5, help="kills in a row per target (default 5)")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seed", type=int, default=0, help="seeds the draw of kill points")
    p.add_argument("--window", type=int, default=3, help="a kill lands within the next N steps after the resume")
    p.add_argument("--timeout", type=float, default=300, help="seconds a killed run may take to exit")
    p.add_argument("--targets", default="replica,trainer")
    p.add_argument("--json", help="write the result here")
    args = p.parse_args(argv)
    start, rng, result = time.time(), random.Random(args.seed), {"kills": [], "problems": []}
    with tempfile.TemporaryDirectory() as work:
        ref_dir = os.path.join(work, "uninterrupted")
        proc = start_job(ref_dir, args.steps, [])
        _, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"the uninterrupted run failed:\n{err[-3000:]}")
        reference = records(ref_dir)
        step_s = sorted(r["timing_s/step"] for r in reference if "timing_s/step" in r)[len(reference) // 2 - 1]
        for target in args.targets.split(","):
            done, problems = run_target(work, target, args.steps, args.kills, args.window, rng, step_s, args.timeout)
            if not any("final resume failed" in p for p in problems):
                problems += [f"{target}: {p}" for p in check(reference, records(os.path.join(work, target)))]
            result["kills"] += done
            result["problems"] += problems
    result["seconds"] = time.time() - start
    print(report(result, args.steps), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


def report(result: dict, steps: int) -> str:
    lines = [f"{'#':>3} {'killed':<11} {'in step':>7} {'at':>5} {'resumed from':>12}  exit  Ray gone after (s)"]
    for i, k in enumerate(result["kills"], 1):
        row = f"{i:>3} {k['target']:<11} {k['step']:>7} {k['fraction']:>5} {k['resumed_from']:>12}  {k['exit']:>4}"
        lines.append(f"{row}  {k['linger_s']}")
    bad = result["problems"]
    lines.append(
        f"{'PASS' if not bad else 'FAIL'}: {len(result['kills'])} kill -9 then resumes to step {steps}: "
        + (
            "every resume finished with the uninterrupted run's metrics and prompts, nothing left running"
            if not bad
            else "; ".join(bad)
        )
        + f" ({result['seconds']:.0f} s)"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(0 if not main()["problems"] else 1)
