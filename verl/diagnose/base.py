"""One check's result, and the small helpers the checks share."""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
GiB = 1024**3
TORCH_INDEX = "https://download.pytorch.org/whl"  # + /cpu, /cu128, ...: the index of each torch build
DEFAULT_MODEL = "builtin://tiny-qwen2-arith-sft"  # the model --check-all loads
VERL_ROOT = Path(__file__).resolve().parents[2]  # the directory holding the verl package (a checkout's root)


@dataclass
class Check:
    """``status`` is PASS, WARN or FAIL; ``fix`` (WARN/FAIL) is the exact command or setting that resolves it."""

    name: str
    status: str
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        """``STATUS name: detail`` (a multi-line detail indented below), then ``  -> fix`` for WARN/FAIL."""
        first, *rest = self.detail.splitlines() or [""]
        out = [f"{self.status} {self.name}: {first}", *(f"     {line}" for line in rest)]
        if self.fix and self.status != PASS:
            out.append(f"  -> {self.fix}")
        return out


def existing_ancestor(path: str) -> str:
    """``path`` itself when it exists, else its nearest existing parent directory."""
    probe = os.path.abspath(os.path.expanduser(path))
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    return probe


def writable(directory: str) -> bool:
    """Whether a file can be created in ``directory`` (tried, then removed: ``os.access`` says yes to root even on
    read-only pseudo file systems such as /proc)."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".verl-diagnose-"):
            return True
    except OSError:
        return False


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def tail(text: str, n: int = 8) -> str:
    """The last ``n`` non-empty lines of ``text``."""
    return "\n".join([line.rstrip() for line in text.splitlines() if line.strip()][-n:])
