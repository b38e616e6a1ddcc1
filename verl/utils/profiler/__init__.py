"""Profiler settings at verl's import path (``from verl.utils.profiler import ProfilerConfig``).

Profiling is not wired into the workers in this version (``benchmarks/`` has the profiling scripts): the sections are
accepted so verl's configs load, and ``profiler.enable=true`` or ``global_profiler.tool`` warns
(``verl.utils.ported_keys``).
"""

from verl.utils.profiler import config
from verl.utils.profiler.config import *  # noqa: F403

__all__ = config.__all__
