"""The quick start on a busy machine: seconds per step quiet and beside one and two busy-loop processes, for the thread
policy off (``VERL_THREAD_POLICY=off``: libgomp's default spin) and on (verl.utils.cpu_threads), side by side in one
run.

    python benchmarks/busy_machine.py --reps 3 --json /tmp/busy.json --md /tmp/busy.md    # the acceptance run
    python benchmarks/busy_machine.py --reps 1 --steps 4 --busy 0 1                        # a short look

Each cell is a fresh ``python -m verl.trainer.main_ppo`` (the default job: GRPO on 2-digit addition from the shipped
warm start) with ``trainer.total_training_steps=--steps``, no validation, no checkpoints and a fresh run directory;
``--busy`` processes running ``while True: pass`` start before it and are killed after. Both policies get the same
environment but for the switch: the wait variables (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``, ``KMP_BLOCKTIME``) and
``OMP_NUM_THREADS`` are removed from this process's, so each side chooses as a fresh shell would (``--threads N``
pins the count on both). Cells are interleaved: every repetition runs each busy level with both policies, the order
of the two alternating, so a drift of the machine hits both alike. A step's seconds are the job's own
``timing_s/step`` (metrics.jsonl); step 1 (first-touch allocations) is left out. A cell's value is the median over
its steps, the table's the median over repetitions, and the ratio is against the same policy's quiet median. The old
policy beside two busy loops runs ``--steps-worst`` steps (about 50 s each on 2 cores); a run past ``--timeout``
seconds keeps the steps it logged. The wait policy never changes the numbers a run computes, so every run's
non-timing metrics are also compared with the first run's over their common steps (``same_metrics``).

Prediction, written before this script's first run (from single probes while designing the policy, 2-core AMD
EPYC, 2 threads): quiet, both policies within 5% of each other (~0.9 s per step); beside one busy loop the old policy
~4x its quiet time and the new ~2.2x; beside two the old ~50x and the new ~2.5x. The new policy meets the targets
(2.5x and 5x) with little margin beside one busy loop: a passive policy would do ~1.8x there but costs ~45%
quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from verl.utils.wall_clock import WALL_CLOCK

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = {"old": "libgomp's default spin (VERL_THREAD_POLICY=off)", "new": "verl's policy (a short spin)"}
# variables each side must choose itself: a value inherited from this shell would decide for both
SCRUBBED = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "VERL_THREAD_POLICY", "OMP_NUM_THREADS")


def job_env(policy: str, threads: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(PYTHONPATH=ROOT, TQDM_DISABLE="1")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    if policy == "old":
        env["VERL_THREAD_POLICY"] = "off"
    return env


def start_busy(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def read_metrics(run_dir: str) -> dict[int, dict[str, float]]:
    rows: dict[int, dict[str, float]] = {}
    path = os.path.join(run_dir, "metrics.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for row in map(json.loads, f):
                rows.setdefault(row["step"], {}).update({k: v for k, v in row.items() if k != "step"})
    return rows


def run_cell(run_dir: str, policy: str, busy: int, steps: int, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", f"trainer.total_training_steps={steps}"]
    cmd += [f"trainer.default_local_dir={run_dir}", "trainer.resume_mode=disable", "trainer.val_before_train=false"]
    cmd += ["trainer.test_freq=-1", "trainer.save_freq=-1", "trainer.logger=[file]", *args.overrides]
    hogs = start_busy(busy)
    start, timed_out, error = time.perf_counter(), False, None
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=job_env(policy, args.threads), capture_output=True, text=True, timeout=args.timeout
        )
        if proc.returncode != 0:
            error = proc.stderr[-2000:]
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        stop(hogs)
    metrics = read_metrics(run_dir)
    times = [metrics[s]["timing_s/step"] for s in sorted(metrics) if s > 1 and "timing_s/step" in metrics[s]]
    if error and not times:
        raise RuntimeError(f"{policy} policy beside {busy} busy processes failed:\n{error}")
    return {
        "policy": policy,
        "busy": busy,
        "steps": steps,
        "step_s": times,
        "median_s": statistics.median(times) if times else None,
        "wall_s": round(time.perf_counter() - start, 1),
        "timed_out": timed_out,
        "metrics": {s: {k: v for k, v in m.items() if not k.startswith(WALL_CLOCK)} for s, m in metrics.items()},
    }


def same_metrics(a: dict, b: dict) -> bool:
    common = set(a) & set(b)
    return bool(common) and all(a[s] == b[s] for s in common)


def summarize(runs: list[dict], policies: list[str], busy_levels: list[int]) -> dict:
    cells: dict[str, dict[int, dict]] = {}
    for policy in policies:
        for busy in busy_levels:
            values = [r["median_s"] for r in runs if r["policy"] == policy and r["busy"] == busy and r["median_s"]]
            cells.setdefault(policy, {})[busy] = {
                "median_s": statistics.median(values) if values else None,
                "reps_s": values,
                "timed_out": sum(r["timed_out"] for r in runs if r["policy"] == policy and r["busy"] == busy),
            }
        quiet = cells[policy].get(0, {}).get("median_s")
        for cell in cells[policy].values():
            cell["x_quiet"] = cell["median_s"] / quiet if quiet and cell["median_s"] else None
    return cells


def fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def markdown(result: dict) -> str:
    busy_levels, cells = result["busy_levels"], result["cells"]
    head = "| policy | " + " | ".join(f"{b} busy: s/step | x quiet" for b in busy_levels) + " |"
    lines = [head, "|---|" + "---|---|" * len(busy_levels)]
    for policy, row in cells.items():
        parts = [f"{fmt(row[b]['median_s'], '.3f')} | {fmt(row[b]['x_quiet'], '.2f')}x" for b in busy_levels]
        lines.append(f"| {policy}: {POLICIES[policy]} | " + " | ".join(parts) + " |")
    lines.append("")
    lines.append("Per-repetition medians (s/step): " + "; ".join(
        f"{p} {b} busy: {', '.join(f'{v:.3f}' for v in cells[p][b]['reps_s'])}" for p in cells for b in busy_levels
    ))  # fmt: skip
    if "old" in cells and "new" in cells and cells["old"][0]["median_s"] and cells["new"][0]["median_s"]:
        cost = cells["new"][0]["median_s"] / cells["old"][0]["median_s"] - 1
        lines.append(f"\nQuiet, the new policy against the old: {cost:+.1%}.")
    differ = [f"{r['policy']}/{r['busy']} busy" for r in result["runs"] if not r["same_metrics"]]
    lines.append(
        f"\nNon-timing metrics against the first run's (common steps): {len(result['runs']) - len(differ)} of "
        f"{len(result['runs'])} runs identical" + (f"; differing: {', '.join(differ)}" if differ else "") + "."
    )
    m = result["machine"]
    lines.append(
        f"\n{m['cpu']}, {m['cpus']} CPUs ({m['affinity']} in the mask), load {m['loadavg']} at the start; "
        f"{result['reps']} repetitions of {result['steps']} steps ({result['steps_worst']} for the old policy beside "
        f"{max(busy_levels)} busy loops), threads: {result['threads'] or 'each policy chooses'}."
    )
    return "\n".join(lines) + "\n"


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    mask = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "cpus": os.cpu_count(), "affinity": mask, "loadavg": load}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--steps", type=int, default=8, help="steps per run (the first is left out of the timing)")
    p.add_argument("--steps-worst", type=int, default=4, help="steps of the old policy beside the most busy loops")
    p.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2], help="busy-loop processes beside the job")
    p.add_argument("--policies", nargs="+", default=["old", "new"], choices=list(POLICIES))
    p.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for both (default: each chooses)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run; a run past it keeps its steps")
    p.add_argument("--work-dir", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--md", default=None)
    p.add_argument("overrides", nargs="*", help="extra key=value overrides for every run")
    args = p.parse_args(argv)
    busy_levels = sorted(set(args.busy))
    if 0 not in busy_levels:
        busy_levels = [0, *busy_levels]  # the ratio needs the quiet time
    work = args.work_dir or tempfile.mkdtemp(prefix="busy-machine-")
    result = {"machine": machine(), "reps": args.reps, "steps": args.steps, "steps_worst": args.steps_worst}
    result.update(threads=args.threads, busy_levels=busy_levels, overrides=args.overrides, runs=[])
    reference = None
    for rep in range(args.reps):
        for i, busy in enumerate(busy_levels):
            order = args.policies if (rep + i) % 2 == 0 else args.policies[::-1]
            for policy in order:
                worst = policy == "old" and busy == max(busy_levels) and busy > 0
                steps = args.steps_worst if worst else args.steps
                run = run_cell(os.path.join(work, f"r{rep}-{policy}-b{busy}"), policy, busy, steps, args)
                reference = reference or run["metrics"]
                run["same_metrics"] = same_metrics(reference, run.pop("metrics"))
                result["runs"].append(run)
                print(
                    f"rep {rep} {policy} beside {busy} busy: {fmt(run['median_s'], '.3f')} s/step "
                    f"({', '.join(f'{t:.2f}' for t in run['step_s'])}){' TIMED OUT' if run['timed_out'] else ''}",
                    flush=True,
                )
    result["cells"] = summarize(result["runs"], args.policies, busy_levels)
    table = markdown(result)
    print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.md:
        with open(args.md, "w") as f:
            f.write(table)
    return result


if __name__ == "__main__":
    main()
