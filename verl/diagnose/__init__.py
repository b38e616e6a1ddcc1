"""``verl diagnose``: is this machine ready to run verl, and if not, what exactly to do (docs/diagnose.md).

    verl diagnose                          # the fast checks (a few seconds): platform, packages, disk, configured services
    verl diagnose --check-all              # + the model directory loads and a 1-step run of the main job (~10 s on CPU)
    verl diagnose --model-path /models/Qwen2.5-0.5B-Instruct --storage postgresql://u:pw@db/optuna --json
    python scripts/diagnose.py --check-all # the same, from a checkout

Each check prints ``PASS|WARN|FAIL <name>: <what was found>``; a WARN or FAIL adds ``-> <the fix>`` (the pip or
apt-get command, the key or environment variable to set). ``--json`` prints a list of ``{name, status, detail,
fix}`` instead. The exit code is 1 when any check fails, else 0.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator

from verl.diagnose.base import DEFAULT_MODEL, FAIL, PASS, TORCH_INDEX, WARN, Check

__all__ = ["Check", "PASS", "WARN", "FAIL", "build_parser", "iter_checks", "run_checks", "main"]


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Check this machine for verl: Python, torch's build, GPUs, CPU features, optional extras, "
        "bubblewrap, free disk, a configured Ray cluster or tuning database, and (--check-all) a model directory "
        "and a 1-step run of the main job. Exit code 1 when a check FAILs.",
    )
    p.add_argument("--check-all", action="store_true", help="also load the model and run 1 step of the main job")
    p.add_argument("--json", action="store_true", help="print a JSON list of {name, status, detail, fix}")
    p.add_argument(
        "--model-path",
        default=None,
        help=f"model directory to check: config, tokenizer, weights (default with --check-all: {DEFAULT_MODEL})",
    )
    p.add_argument(
        "--run-dir", default="outputs", help="where runs are written: trainer.default_local_dir's parent (outputs)"
    )
    p.add_argument("--cache-dir", default=None, help="verl's cache (default $VERL_CACHE_DIR, else ~/.cache/verl)")
    p.add_argument("--min-free-gb", type=float, default=1.0, help="FAIL below this much free disk (GiB, default 1)")
    p.add_argument("--ray-address", default=None, help="Ray cluster to reach (default $RAY_ADDRESS; none: skipped)")
    p.add_argument("--storage", default=None, help="verl tune database URL to reach (sqlite:///..., postgresql://...)")
    p.add_argument("--smoke-timeout", type=float, default=600.0, help="seconds the 1-step run may take (600)")
    return p


def _guarded(name: str, fn: Callable[[], Check]) -> Check:
    try:
        return fn()
    except ModuleNotFoundError as e:  # what the check itself needs is missing: that is the finding
        fix = f"pip install {'pyyaml' if e.name == 'yaml' else e.name}"
        if e.name == "torch":
            fix = f"pip install torch --index-url {TORCH_INDEX}/cpu (CPU machines; NVIDIA: .../whl/cu128)"
        return Check(name, FAIL, f"cannot run this check: {e}", fix)
    except Exception as e:  # a check that crashes is itself a finding, never the end of the report
        return Check(
            name,
            FAIL,
            f"the check itself crashed: {type(e).__name__}: {e}",
            "report it with this output: python scripts/diagnose.py --json",
        )


def _call(module: str, function: str, *args, **kwargs) -> Callable[[], Check]:
    """A check run later, its module imported only then (a missing dependency fails that check, not the report)."""

    def run() -> Check:
        return getattr(importlib.import_module(f"verl.diagnose.{module}"), function)(*args, **kwargs)

    return run


def _cache_dir() -> str:
    # = verl.utils.model.verl_cache_dir(), which imports torch: this check must not depend on torch
    return os.path.expanduser(os.environ.get("VERL_CACHE_DIR") or "~/.cache/verl")


def iter_checks(
    check_all: bool = False,
    model_path: str | None = None,
    run_dir: str = "outputs",
    cache_dir: str | None = None,
    min_free_gb: float = 1.0,
    ray_address: str | None = None,
    storage: str | None = None,
    smoke_timeout: float = 600.0,
) -> Iterator[Check]:
    """The checks' results in order, each as soon as it is done. The fast set always; the model with
    ``model_path`` or ``check_all`` (then the built-in tiny model by default); the smoke run with ``check_all``."""
    try:
        from verl.diagnose.packages import OPTIONAL
    except ModuleNotFoundError:  # packaging is missing: the deps check fails naming it
        OPTIONAL = {}
    steps: list[tuple[str, Callable[[], Check]]] = [
        ("python", _call("system", "check_python")),
        ("torch", _call("system", "check_torch")),
        ("gpu", _call("system", "check_gpus")),
        ("distributed", _call("system", "check_distributed")),
        ("cpu", _call("system", "check_cpu")),
        ("deps", _call("packages", "check_dependencies")),
        *((f"extra.{name}", _call("packages", "check_optional", name)) for name in OPTIONAL),
        ("bwrap", _call("system", "check_bwrap")),
        ("disk.run", _call("resources", "check_run_dir", run_dir, min_free_gb)),
        ("disk.cache", _call("resources", "check_cache_dir", cache_dir or _cache_dir(), min_free_gb)),
        ("ray-cluster", _call("resources", "check_ray", ray_address, connect=check_all)),
        ("tune-storage", _call("resources", "check_storage", storage)),
    ]
    if model_path or check_all:
        steps.append(("model", _call("runs", "check_model", model_path or DEFAULT_MODEL)))
    if check_all:
        steps.append(("smoke", _call("runs", "check_smoke", smoke_timeout)))
    for name, fn in steps:
        yield _guarded(name, fn)


def run_checks(**kwargs) -> list[Check]:
    """All results of :func:`iter_checks` (same keyword arguments)."""
    return list(iter_checks(**kwargs))


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    # the verl command names itself in verl.utils.cli (imported only if it ran: verl.utils needs omegaconf)
    prog = prog or getattr(sys.modules.get("verl.utils.cli"), "COMMAND_NAME", None) or "python -m verl.diagnose"
    args = build_parser(prog).parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    checks = []
    for check in iter_checks(
        check_all=args.check_all,
        model_path=args.model_path,
        run_dir=args.run_dir,
        cache_dir=args.cache_dir,
        min_free_gb=args.min_free_gb,
        ray_address=args.ray_address,
        storage=args.storage,
        smoke_timeout=args.smoke_timeout,
    ):
        checks.append(check)
        if not args.json:
            print("\n".join(check.lines()), flush=True)
    counts = {s: sum(c.status == s for c in checks) for s in (PASS, WARN, FAIL)}
    if args.json:
        print(json.dumps([c.as_dict() for c in checks], indent=2))
    else:
        print(f"{counts[PASS]} passed, {counts[WARN]} warnings, {counts[FAIL]} failed", flush=True)
    return 1 if counts[FAIL] else 0
