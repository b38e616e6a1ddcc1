"""Run the public verl project's own CPU unit tests, unmodified, against this package; print a per-file table.

    git clone https://github.com/volcengine/verl /tmp/verl-upstream      # or any checkout of it
    python scripts/verl_tests_report.py --verl-repo /tmp/verl-upstream [--json report.json] [--markdown table.md]

The files are verl's ``tests/**/*_on_cpu.py`` plus ``tests/utils/test_torch_functional.py`` and
``tests/utils/test_seqlen_balancing.py``, minus ``EXCLUDED`` (each with the reason: it needs model weights or data
from a hub, upstream's own YAML or scripts, or a part this version does not have) and the single tests in
``EXCLUDED_TESTS`` (deselected, each with its reason). Each file is copied into a scratch directory at its own path
with the helper modules, ``conftest.py`` and ``__init__.py`` files upstream keeps beside it (so ``tests/...`` imports
resolve as upstream's layout expects) and run by pytest in a subprocess with this checkout first on ``PYTHONPATH``,
with ``--asyncio-mode=auto`` as verl's CI runs it; nothing in the copies is edited. A git directory (e.g.
``verl.git``, a bare clone) works too: the files are read with ``git show HEAD:path``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRA = ("tests/utils/test_torch_functional.py", "tests/utils/test_seqlen_balancing.py")

_YAML_COMPOSE = (
    "composes verl's own YAML files with hydra from the verl checkout's verl/trainer/config (this package's config "
    "is typed dataclasses, not YAML; verl's YAML files load with --config, checked by "
    "tests/trainer/config/test_ppo_trainer_verl_keys.py)"
)

# verl test file -> why it does not run against this package (docs/compatibility.md repeats the list)
EXCLUDED: dict[str, str] = {
    "tests/experimental/reward_loop/test_async_token_bucket_on_cpu.py": "verl's experimental async reward loop "
    "(rate-limited remote reward services) has no counterpart here",
    "tests/experimental/reward_loop/test_rate_limited_reward_manager_on_cpu.py": "verl's experimental async reward "
    "loop (rate-limited remote reward services) has no counterpart here",
    "tests/utils/dataset/test_rl_dataset_on_cpu.py": "loads Qwen2-VL from ~/models (a hub download this machine "
    "cannot make) and multimodal data",
    "tests/utils/dataset/test_sft_dataset_on_cpu.py": "loads a DeepSeek tokenizer from ~/models and GSM8K from "
    "~/data (hub downloads this machine cannot make)",
    "tests/utils/dataset/test_multiturn_sft_dataset_on_cpu.py": "loads Qwen2.5/Qwen3 tokenizers and "
    "Qwen3-VL from ~/models (hub downloads) and needs torchdata; our MultiTurnSFTDataset has its own tests "
    "(tests/utils/dataset/test_multiturn_sft_loss_mask.py)",
    "tests/utils/dataset/test_create_rl_sampler_on_cpu.py": "verl's experimental curriculum samplers "
    "(verl.experimental.dataset.sampler) are not implemented",
    "tests/utils/reward_score/reward_score/test_sandbox_fusion_on_cpu.py": "calls a SandboxFusion service "
    "(this package's own sandbox serves that API: docs/code_rl.md)",
    "tests/utils/reward_score/test_sandbox_on_cpu.py": "calls a SandboxFusion service "
    "(this package's own sandbox serves that API: docs/code_rl.md)",
    "tests/workers/rollout/test_vllm_cli_args_on_cpu.py": "vLLM server arguments "
    "(this package's vLLM rollout: docs/rollout.md)",
    "tests/trainer/config/test_legacy_config_on_cpu.py": _YAML_COMPOSE,
    "tests/workers/config/test_critic_config_on_cpu.py": "imports hydra (not a dependency here) at module level; "
    "with hydra installed all 10 tests skip, as they read verl's critic YAML files from a verl checkout's "
    "verl/trainer/config/critic",
}

# single tests (pytest node ids) left out of files that otherwise run, with the reason
EXCLUDED_TESTS: dict[str, str] = {
    "tests/utils/test_config_on_cpu.py::TestPrintCfgCommand::test_command_with_override": "runs upstream's own "
    "scripts/print_cfg.py (a hydra script over verl's YAML files); here `--cfg job` on every job prints the config",
    "tests/trainer/config/test_algo_config_on_cpu.py::TestAlgoConfig::test_config_init_from_yaml": _YAML_COMPOSE,
    "tests/workers/config/test_actor_config_on_cpu.py::TestActorConfig::test_actor_config_from_yaml": _YAML_COMPOSE,
    "tests/workers/config/test_actor_config_on_cpu.py::TestActorConfig::test_fsdp_actor_config_from_yaml": _YAML_COMPOSE,
    "tests/workers/config/test_actor_config_on_cpu.py::TestActorConfig::test_megatron_actor_config_from_yaml": (
        _YAML_COMPOSE
    ),
}


def all_test_tree_files(repo: Path) -> list[str]:
    listing = _git(repo, "ls-tree", "-r", "--name-only", "HEAD", "tests") if _is_git(repo) else None
    if listing is not None:
        return listing.splitlines()
    return [str(p.relative_to(repo)) for p in (repo / "tests").rglob("*.py")]


def test_files(repo: Path) -> list[str]:
    return sorted(n for n in all_test_tree_files(repo) if n.endswith("_on_cpu.py") or n in EXTRA)


def _is_git(repo: Path) -> bool:
    return (repo / ".git").exists() or (repo / "HEAD").exists()


def _git(repo: Path, *args: str) -> str | None:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else None


def read(repo: Path, name: str) -> str:
    text = _git(repo, "show", f"HEAD:{name}") if _is_git(repo) else None
    return text if text is not None else (repo / name).read_text()


def support_files(all_files: list[str], name: str) -> list[str]:
    """The non-test Python files a test file may import or load beside it, as upstream's layout has them: every
    ``conftest.py`` and ``__init__.py`` from ``tests/`` down to its folder and the helper modules in its folder
    (``tests/utils/_test_module.py``)."""
    folder = os.path.dirname(name)
    out = []
    for other in all_files:
        if not other.endswith(".py") or other == name:
            continue
        base, here = os.path.basename(other), os.path.dirname(other)
        above = folder == here or folder.startswith(here + "/")
        if (above and base in ("conftest.py", "__init__.py")) or (here == folder and not base.startswith("test_")):
            out.append(other)
    return out


def run_file(repo: Path, name: str, scratch: Path, timeout: float, all_files: list[str] = ()) -> dict:
    for path in [name, *support_files(list(all_files), name)]:
        target = scratch / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(read(repo, path))
    xml = scratch / (name.replace("/", "__") + ".xml")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", name]
    if importlib.util.find_spec("pytest_asyncio") is not None:
        cmd.append("--asyncio-mode=auto")  # as verl's CI runs its tests (async tests carry no marker)
    cmd += [f"--deselect={node}" for node in EXCLUDED_TESTS if node.split("::")[0] == name]
    try:
        proc = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
        tail = (proc.stdout + proc.stderr)[-1500:]
    except subprocess.TimeoutExpired:
        return {"file": name, "passed": 0, "failed": 0, "errors": 1, "skipped": 0, "note": f"timeout {timeout:.0f} s"}
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    collection_failed = False
    if xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            kinds = {child.tag: child.get("message", "") for child in case}
            collection_failed |= "collection failure" in kinds.get("error", "")
            key = "failed" if "failure" in kinds else "errors" if "error" in kinds else "passed"
            counts["skipped" if "skipped" in kinds else key] += 1
    if collection_failed or sum(counts.values()) == 0:  # the file's tests never ran: each counts as an error
        errors = max(1, len(re.findall(r"^\s*def test_", read(repo, name), re.M)))
        counts = {"passed": 0, "failed": 0, "errors": errors, "skipped": 0}
    note = "" if counts["failed"] + counts["errors"] == 0 else _first_error(tail)
    return {"file": name, **counts, "note": note}


def _first_error(tail: str) -> str:
    for line in tail.splitlines():
        if re.search(r"(Error|error|assert)", line) and not line.startswith("="):
            return line.strip()[:160]
    return tail.strip().splitlines()[-1][:160] if tail.strip() else ""


def markdown(rows: list[dict], excluded: dict[str, str]) -> str:
    out = ["| verl test file | passed | failed | errors | skipped | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| `{r['file']}` | {r['passed']} | {r['failed']} | {r['errors']} | {r['skipped']} | {r['note'].replace('|', '/')} |"
        )
    ran = sum(r["passed"] + r["failed"] + r["errors"] for r in rows)
    passed = sum(r["passed"] for r in rows)
    out.append(f"| **total** | **{passed}** of {ran} ({100 * passed / max(ran, 1):.1f}%) | | | | |")
    out += ["", "Excluded files:", ""] + [f"- `{name}`: {why}" for name, why in excluded.items()]
    out += ["", "Excluded tests:", ""] + [f"- `{node}`: {why}" for node, why in EXCLUDED_TESTS.items()]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/verl_tests_report.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--verl-repo", required=True, help="a checkout (or git directory) of volcengine/verl")
    parser.add_argument("--only", action="append", default=None, help="run only files containing this text")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test file")
    parser.add_argument("--json", default=None, help="write the rows as JSON here")
    parser.add_argument("--markdown", default=None, help="write the table here")
    args = parser.parse_args(argv)
    repo = Path(args.verl_repo).expanduser()
    names = [n for n in test_files(repo) if n not in EXCLUDED and (not args.only or any(o in n for o in args.only))]
    rows, tree = [], all_test_tree_files(repo)
    with tempfile.TemporaryDirectory(prefix="verl-upstream-tests-") as scratch:
        for name in names:
            rows.append(run_file(repo, name, Path(scratch), args.timeout, tree))
            r = rows[-1]
            print(f"{r['passed']:3d} passed {r['failed']:3d} failed {r['errors']:3d} errors  {name}", flush=True)
    table = markdown(rows, EXCLUDED)
    print(table)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"rows": rows, "excluded": EXCLUDED, "excluded_tests": EXCLUDED_TESTS}, indent=1)
        )
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
