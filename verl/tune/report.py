"""What a study leaves in its output directory (no browser needed):

best_params.json        best trial's parameters and value (single objective) or the Pareto front (several)
best_config.yaml        the best trial's full config, ready to run: main_ppo --config best_config.yaml
pareto_trial_<n>.yaml   with several objectives: one ready-to-run config per Pareto-optimal trial
trials.csv, trials.md   every trial: state, value(s), params, duration, prune step, failure reason
report.md               summary + the table + the plots below
optimization_history.png, param_importances.png, intermediate_values.png, pareto_front.png (matplotlib)
"""

from __future__ import annotations

import csv
import json
import math
import os
import warnings
from typing import Any

import yaml


def _trial_rows(study) -> list[dict[str, Any]]:
    from verl.tune.recovery import retried_numbers

    rows = []
    params = sorted({p for t in study.trials for p in t.params})
    nobj = len(study.directions)
    retried = retried_numbers(study.trials)
    for t in study.trials:
        row: dict[str, Any] = {"number": t.number, "state": t.state.name}
        vals = t.values or [None] * nobj
        for i, v in enumerate(vals):
            row["value" if nobj == 1 else f"value_{i}"] = v
        for p in params:
            row[p] = t.params.get(p)
        dur = t.duration.total_seconds() if t.duration else None
        row["seconds"] = round(dur, 1) if dur is not None else None
        row["pruned_at_step"] = t.user_attrs.get("pruned_at_step")
        row["early_stopped_at_step"] = t.user_attrs.get("early_stopped_at_step")
        row["note"] = t.user_attrs.get("fail_reason") or ("baseline" if t.user_attrs.get("baseline") else "")
        if t.state.name == "FAIL" and not row["note"] and t.number in retried:  # failed by Optuna's heartbeat check
            row["note"] = "interrupted: its tuner sent no heartbeat for the grace period"
        if t.user_attrs.get("retry_of") is not None:
            row["note"] = (row["note"] + f" retry of #{t.user_attrs['retry_of']}").strip()
        rows.append(row)
    return rows


def _md_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "\\|").replace("\n", " ")[:120]


def _markdown_table(rows: list[dict]) -> str:
    if not rows:
        return "(no trials)\n"
    cols = list(rows[0])
    short = [c.rsplit(".", 1)[-1] if "." in c else c for c in cols]
    lines = ["| " + " | ".join(short) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(_md_cell(r.get(c)) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def _ready_config(trial, output_dir: str, name: str) -> str | None:
    """The trial's saved config with its output directory and resume mode reset for a fresh run."""
    trial_dir = trial.user_attrs.get("trial_dir")
    path = os.path.join(trial_dir, "config.yaml") if trial_dir else None
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        cfg = yaml.safe_load(f)
    tr = cfg.setdefault("trainer", {})
    tr["default_local_dir"] = os.path.join(output_dir, name.replace(".yaml", ""))
    tr["resume_mode"] = "auto"
    tr["experiment_name"] = f"{tr.get('experiment_name', 'run')}-tuned"
    out = os.path.join(output_dir, name)
    header = (
        f"# Trial {trial.number} of the study (values {trial.values}), ready to run:\n"
        f"#   python -m verl.trainer.main_ppo --config {out}\n"
    )
    with open(out, "w") as f:
        f.write(header + yaml.safe_dump(cfg, sort_keys=False))
    return out


def _plots(study, output_dir: str, objective) -> dict[str, str]:
    """Write the PNGs; returns {file: "ok" | why it was skipped}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna
    from optuna.visualization import matplotlib as ovm

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    names = [m for m in objective.metrics] if objective.multi else [objective.describe()]
    done: dict[str, str] = {}
    multi = len(study.directions) > 1
    jobs = []
    if multi:
        jobs.append(("pareto_front.png", lambda: ovm.plot_pareto_front(study, target_names=names[:3])))
        for i, m in enumerate(names):
            jobs.append(
                (
                    f"optimization_history_{i}.png",
                    lambda i=i, m=m: ovm.plot_optimization_history(study, target=lambda t: t.values[i], target_name=m),
                )
            )
        jobs.append(
            (
                "param_importances.png",
                lambda: ovm.plot_param_importances(study, target=lambda t: t.values[0], target_name=names[0]),
            )
        )
    else:
        jobs.append(("optimization_history.png", lambda: ovm.plot_optimization_history(study, target_name=names[0])))
        jobs.append(("param_importances.png", lambda: ovm.plot_param_importances(study)))
        jobs.append(("intermediate_values.png", lambda: ovm.plot_intermediate_values(study)))
    for fname, fn in jobs:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ax = fn()
            fig = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
            fig.set_size_inches(8, 5)
            fig.tight_layout()
            fig.savefig(os.path.join(output_dir, fname), dpi=100)
            plt.close(fig)
            done[fname] = "ok"
        except Exception as e:  # too few trials for importances, no intermediate values, ...
            plt.close("all")
            done[fname] = f"skipped: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return done


def write_report(study, output_dir: str, objective) -> dict[str, Any]:
    from optuna.trial import TrialState

    os.makedirs(output_dir, exist_ok=True)
    rows = _trial_rows(study)
    with open(os.path.join(output_dir, "trials.csv"), "w", newline="") as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    table = _markdown_table(rows)
    with open(os.path.join(output_dir, "trials.md"), "w") as f:
        f.write(table)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE and not t.user_attrs.get("failed")]
    summary: dict[str, Any] = {
        "study": study.study_name,
        "directions": [d.name.lower() for d in study.directions],
        "objective": objective.describe(),
        "states": {s.name: sum(t.state == s for t in study.trials) for s in TrialState},
    }
    configs = []
    if len(study.directions) == 1 and complete:
        best = (
            max(complete, key=lambda t: t.value)
            if study.directions[0].name == "MAXIMIZE"
            else min(complete, key=lambda t: t.value)
        )
        summary.update(best_trial=best.number, best_value=best.value, best_params=best.params)
        p = _ready_config(best, output_dir, "best_config.yaml")
        if p:
            configs.append(p)
            summary["best_config"] = p
    elif complete:
        front = [t for t in study.best_trials if not t.user_attrs.get("failed")]
        summary["pareto_front"] = [{"number": t.number, "values": t.values, "params": t.params} for t in front]
        for t in front:
            p = _ready_config(t, output_dir, f"pareto_trial_{t.number}.yaml")
            if p:
                configs.append(p)
    with open(os.path.join(output_dir, "best_params.json"), "w") as f:
        json.dump(
            summary, f, indent=1, default=lambda v: None if isinstance(v, float) and not math.isfinite(v) else str(v)
        )
    plots = _plots(study, output_dir, objective)
    summary["plots"] = plots
    md = [
        f"# Study `{study.study_name}`",
        "",
        f"Objective: {objective.describe()}",
        "",
        "Trials: " + ", ".join(f"{k.lower()} {v}" for k, v in summary["states"].items() if v),
        "",
    ]
    if "best_value" in summary:
        md += [
            f"Best: trial {summary['best_trial']}, value {summary['best_value']:.4g}",
            "",
            "```",
            *(f"{k}={v}" for k, v in summary["best_params"].items()),
            "```",
            "",
        ]
    if "pareto_front" in summary:
        md += [
            f"Pareto front ({len(summary['pareto_front'])} trials): "
            + ", ".join(f"#{p['number']} {p['values']}" for p in summary["pareto_front"]),
            "",
        ]
    if configs:
        md += ["Ready-to-run configs: " + ", ".join(f"`{os.path.basename(c)}`" for c in configs), ""]
    md += ["## Trials", "", table, "## Plots", ""]
    for fname, status in plots.items():
        md.append(f"![{fname}]({fname})" if status == "ok" else f"- {fname}: {status}")
    with open(os.path.join(output_dir, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return summary
