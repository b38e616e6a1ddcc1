"""kill -9 of the main job at random points, N times in a row, then a resume to the end: the run must equal an
uninterrupted one exactly.

    python benchmarks/fault_injection.py                       # 10 random kills in a row, 10 steps (the default check)
    python benchmarks/fault_injection.py --kills 3 --seed 1
    python benchmarks/fault_injection.py --plan checkpoint.write@2,metrics.logged@2   # chosen points, in order

Each run is a fresh ``python -m verl.trainer.main_ppo`` subprocess with 1 intra-op thread. The uninterrupted run goes
first with ``VERL_FAILPOINTS_TRACE``: the failpoints it passes (``verl.utils.failpoints``: rollout, actor update,
validation, checkpoint write, checkpoint rename, metrics record), step by step. Every later run resumes the run
directory left by the one before, and is killed (SIGKILL, by the failpoint itself) at a pass drawn from a seeded RNG
among the failpoints of the next ``--window`` steps it will run, each kind of point in turn (so every kill lands,
at every kind of place; with a window longer than ``save_freq`` a run may commit a checkpoint before it is killed,
so the kills move through the run). The last run resumes to the end. Then, against the uninterrupted run:

- every step's metrics are equal, bit for bit, but wall-clock ones (``timing_s/``, ``perf/throughput``, ...);
- ``training/prompt_digest`` (a CRC of the step's dataset rows) is equal at every step: no batch skipped or repeated;
- ``metrics.jsonl`` holds exactly one record per step: nothing written before a kill lost, nothing recomputed after a
  resume doubled.

Prints one line per kill (the point, its pass in that run, the step it hit, the checkpoint that run had resumed
from) and the verdict with the wall time.
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
from collections import Counter

from verl.utils.wall_clock import WALL_CLOCK

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = [
    "data.train_files=builtin://arithmetic/train?train_size=64",
    "data.val_files=builtin://arithmetic/test?test_size=16",
    "data.train_batch_size=4",
    "data.max_response_length=24",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=2",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "trainer.logger=[file]",
]
LOGGED = "metrics.logged"  # the last failpoint of every step: it splits a trace into steps


def run_job(out_dir: str, steps: int, overrides: list[str], failpoints: str = "", trace: str = "") -> tuple[int, str]:
    """One main-job subprocess on ``out_dir``, 1 thread; returns its exit status (-9: killed) and its output's tail."""
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *SMALL, *overrides]
    cmd += [f"trainer.default_local_dir={out_dir}", f"trainer.total_training_steps={steps}"]
    env = {**os.environ, "PYTHONPATH": ROOT, "TQDM_DISABLE": "1", "VERL_FAILPOINTS": failpoints}
    env.update({k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
    env["VERL_FAILPOINTS_TRACE"] = trace
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return proc.returncode, (proc.stdout + proc.stderr)[-3000:]


def records(out_dir: str) -> list[dict]:
    """The records of the run's ``metrics.jsonl``, in file order."""
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def numeric(record: dict) -> dict:
    return {k: v for k, v in record.items() if not k.startswith(WALL_CLOCK)}


def committed_step(out_dir: str) -> int:
    """The step a rerun resumes from (0: none)."""
    path = os.path.join(out_dir, "latest_checkpointed_iteration.txt")
    return int(open(path).read()) if os.path.exists(path) else 0


def read_trace(path: str) -> list[str]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().split()


def steps_of(trace: list[str]) -> list[list[str]]:
    """A trace cut into the failpoints of each logged record, in order (step 0's validation before training, step 1,
    ...): every record ends with ``metrics.logged``."""
    segments, current = [], []
    for name in trace:
        current.append(name)
        if name == LOGGED:
            segments.append(current)
            current = []
    return segments


def segments_run(ref_steps: list[int], resume_from: int) -> list[int]:
    """The indices of the uninterrupted run's records a run resuming from ``resume_from`` logs again (a fresh run,
    0, logs them all)."""
    return [i for i, step in enumerate(ref_steps) if step > resume_from or resume_from == 0]


def draw_kill(
    segments: list[list[str]],
    ref_steps: list[int],
    resume_from: int,
    window: int,
    rng: random.Random,
    used: Counter | None = None,
) -> tuple[str, int]:
    """A (point, pass) among the failpoints a run resuming from ``resume_from`` passes in its next ``window`` steps:
    first the point, uniformly among those it passes that were drawn least so far (``used``: every kind gets its
    turn, a checkpoint write as often as the actor's update, passed once per mini-batch), then one of its passes.
    The pass is counted from the start of that run, as the failpoint counts it."""
    used = Counter() if used is None else used
    ahead = [i for i in segments_run(ref_steps, resume_from) if ref_steps[i] <= resume_from + window]
    passes = [name for i in ahead for name in segments[i]]
    fewest = min(used[n] for n in set(passes))
    name = rng.choice(sorted(n for n in set(passes) if used[n] == fewest))
    used[name] += 1
    return name, rng.randint(1, passes.count(name))


def check(reference: list[dict], final: list[dict]) -> list[str]:
    """What differs between the interrupted run's records and the uninterrupted run's (empty: nothing)."""
    problems = []
    steps = [r["step"] for r in final]
    if steps != sorted(set(steps)):
        problems.append(f"metrics.jsonl steps are not one record per step: {steps}")
    if steps != [r["step"] for r in reference]:
        problems.append(f"steps {steps} vs the uninterrupted run's {[r['step'] for r in reference]}")
    ref = {r["step"]: numeric(r) for r in reference}
    digests = [(r["step"], r.get("training/prompt_digest")) for r in final if r["step"] > 0]
    if digests != [(s, ref[s].get("training/prompt_digest")) for s, _ in digests]:
        problems.append(f"the prompts trained on differ: {digests}")
    for r in final:
        mine, theirs = numeric(r), ref.get(r["step"], {})
        diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        if diff:
            problems.append(f"step {r['step']}: {len(diff)} metrics differ, e.g. {diff[0]}")
    return problems


def kill_and_resume(
    work: str, steps: int, overrides: list[str], kills: list[tuple[str, int]] | int, seed: int = 0, window: int = 3
) -> dict:
    """The uninterrupted run, then ``kills`` (a number to draw, or chosen ``(point, pass)`` pairs) killed runs in a
    row on one directory, then the resume to the end; returns the kills, the problems found and the wall time."""
    start = time.time()
    ref_dir, run_dir = os.path.join(work, "uninterrupted"), os.path.join(work, "killed")
    rc, tail = run_job(ref_dir, steps, overrides, trace=os.path.join(work, "trace.ref"))
    if rc != 0:
        raise RuntimeError(f"the uninterrupted run failed:\n{tail}")
    segments = steps_of(read_trace(os.path.join(work, "trace.ref")))
    ref_steps = [r["step"] for r in records(ref_dir)]
    rng, used, done, problems = random.Random(seed), Counter(), [], []
    plan = kills if isinstance(kills, list) else [None] * kills
    for i, chosen in enumerate(plan):
        resume_from = committed_step(run_dir)
        name, hit = chosen or draw_kill(segments, ref_steps, resume_from, window, rng, used)
        trace = os.path.join(work, f"trace.{i}")
        rc, tail = run_job(run_dir, steps, overrides, failpoints=f"{name}@{hit}", trace=trace)
        passed = read_trace(trace)
        landed = rc == -signal.SIGKILL and passed and passed[-1] == name and passed.count(name) == hit
        if not landed:
            problems.append(f"kill {i + 1} ({name}@{hit}) did not land: exit {rc}\n{tail[-1500:]}")
        run_records = segments_run(ref_steps, resume_from)
        at = passed[:-1].count(LOGGED)  # records this run wrote before the kill
        step = ref_steps[run_records[at]] if landed and at < len(run_records) else None
        done.append({"point": name, "pass": hit, "step": step, "resumed_from": resume_from, "exit": rc})
    rc, tail = run_job(run_dir, steps, overrides)
    if rc != 0:
        problems.append(f"the final resume failed (exit {rc}):\n{tail[-1500:]}")
    else:
        problems += check(records(ref_dir), records(run_dir))
    return {"kills": done, "problems": problems, "seconds": time.time() - start, "steps": steps}


def report(result: dict) -> str:
    lines = [f"{'#':>3} {'failpoint':<18} {'pass':>4} {'in step':>7} {'resumed from':>12}  exit"]
    for i, k in enumerate(result["kills"], 1):
        lines.append(f"{i:>3} {k['point']:<18} {k['pass']:>4} {k['step']:>7} {k['resumed_from']:>12}  {k['exit']}")
    n, bad = len(result["kills"]), result["problems"]
    verdict = "PASS" if not bad else "FAIL"
    lines.append(
        f"{verdict}: {n} kill -9 in a row then a resume to step {result['steps']}: "
        + ("every step's metrics, prompts and record equal the uninterrupted run's" if not bad else "; ".join(bad))
        + f" ({result['seconds']:.0f} s)"
    )
    return "\n".join(lines)


def parse_plan(text: str) -> list[tuple[str, int]]:
    from verl.utils.failpoints import parse

    return [(name, hit) for part in text.split(",") for name, hit in parse(part).items()]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=10, help="random kills in a row (default 10)")
    p.add_argument("--plan", default="", help="chosen kills instead, in order: point@pass,point@pass,...")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0, help="seeds the draw of kill points")
    p.add_argument(
        "--window", type=int, default=3, help="a kill lands within the next N steps a run trains (more than save_freq)"
    )
    p.add_argument("overrides", nargs="*", help="key=value overrides for every run (default: save_freq=2, test_freq=3)")
    args = p.parse_args(argv)
    overrides = ["trainer.save_freq=2", "trainer.test_freq=3", *args.overrides]
    kills = parse_plan(args.plan) if args.plan else args.kills
    with tempfile.TemporaryDirectory() as work:
        result = kill_and_resume(work, args.steps, overrides, kills, args.seed, args.window)
    print(report(result), flush=True)
    return result


if __name__ == "__main__":
    sys.exit(0 if not main()["problems"] else 1)
