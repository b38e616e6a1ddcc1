"""The ``profiler`` section of each role and the run's ``global_profiler`` (verl's keys; no effect in this version:
nothing is profiled, a value that asks for profiling warns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig

__all__ = [
    "GlobalProfilerConfig",
    "NPUToolConfig",
    "NsightToolConfig",
    "ProfilerConfig",
    "ProfilerToolConfig",
    "TorchMemoryToolConfig",
    "TorchProfilerToolConfig",
]


@dataclass
class NsightToolConfig(BaseConfig):
    """Nsight Systems capture of a role."""

    discrete: bool = False  # no effect: one capture per role pass instead of one per step


@dataclass
class NPUToolConfig(BaseConfig):
    """Ascend NPU profiler of a role."""

    contents: list[str] = field(default_factory=list)  # no effect: what the NPU profiler records
    level: str = "level0"  # no effect: the NPU profiler's level
    analysis: bool = True  # no effect: analyse the trace after capture
    discrete: bool = False  # no effect: one capture per role pass


@dataclass
class TorchProfilerToolConfig(BaseConfig):
    """``torch.profiler`` capture of a role."""

    contents: list[str] = field(default_factory=list)  # no effect: what torch.profiler records (cuda, cpu, memory, ...)
    discrete: bool = False  # no effect: one capture per role pass


@dataclass
class TorchMemoryToolConfig(BaseConfig):
    """CUDA memory-snapshot recording of a role."""

    trace_alloc_max_entries: int = 100_000  # no effect: allocations kept in the snapshot
    stack_depth: int = 32  # no effect: stack frames kept per allocation


@dataclass
class ProfilerToolConfig(BaseConfig):
    """Per-tool settings of a role's profiler (``tool_config``)."""

    nsys: NsightToolConfig = field(default_factory=NsightToolConfig)  # Nsight Systems
    npu: NPUToolConfig = field(default_factory=NPUToolConfig)  # Ascend NPU profiler
    torch: TorchProfilerToolConfig = field(default_factory=TorchProfilerToolConfig)  # torch.profiler
    torch_memory: TorchMemoryToolConfig = field(default_factory=TorchMemoryToolConfig)  # CUDA memory snapshots


@dataclass
class ProfilerConfig(BaseConfig):
    """A role's profiler (verl's ``verl.utils.profiler.ProfilerConfig``): which tool, on which ranks, saved where."""

    tool: str | None = None  # no effect: nsys | npu | torch | torch_memory (profiling is not wired here)
    enable: bool = False  # no effect: profiling is not wired into the workers (true warns)
    all_ranks: bool = False  # no effect: profile every rank
    ranks: list[int] = field(default_factory=list)  # no effect: the ranks to profile
    save_path: str | None = None  # no effect: where traces are written
    tool_config: ProfilerToolConfig = field(default_factory=ProfilerToolConfig)  # no effect: per-tool settings
    discrete: bool = False  # older verl key: no effect


@dataclass
class GlobalProfilerConfig(BaseConfig):
    """The run's profiler (``global_profiler``): which steps, which tool, and the tools' global options."""

    tool: str | None = None  # no effect: nsys | npu | torch | torch_memory (a value warns: nothing is profiled)
    steps: list[int] | None = None  # no effect: the steps to profile (a value warns)
    profile_continuous_steps: bool = False  # no effect: one trace over consecutive profiled steps
    save_path: str = "outputs/profile"  # no effect: where traces are written
    # no effect: each tool's global options as verl passes them (nsys command-line options, torch memory snapshots)
    global_tool_config: dict[str, Any] = field(
        default_factory=lambda: {
            "nsys": {
                "discrete": False,
                "controller_nsight_options": {
                    "trace": "cuda,nvtx,cublas,ucx",
                    "cuda-memory-usage": "true",
                    "cuda-graph-trace": "graph",
                },
                "worker_nsight_options": {
                    "trace": "cuda,nvtx,cublas,ucx",
                    "cuda-memory-usage": "true",
                    "cuda-graph-trace": "graph",
                    "capture-range": "cudaProfilerApi",
                    "capture-range-end": None,
                    "kill": "none",
                },
            },
            "torch_memory": {
                "trace_alloc_max_entries": 100_000,
                "stack_depth": 32,
                "context": "all",
                "stacks": "all",
                "kw_args": {},
            },
        }
    )
