"""Optional dependencies are imported where they are used; a missing one names the ``pip install`` that adds it."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, pip_name: str, feature: str) -> ModuleType:
    """``import module``, or an ImportError naming ``pip install <pip_name>`` and the ``feature`` that needs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{feature} needs {module!r}: pip install '{pip_name}'") from e
