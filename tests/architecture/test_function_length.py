"""No function or method in ``verl/`` runs over 80 lines, counted from its ``def`` (decorators aside) to its last line
as ``ast`` sees it: a longer one is split into parts a reader can hold in their head, each named for what it does.

Nested functions count on their own as well as inside the function that holds them. There are no exemptions.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "verl"
MAX_FUNCTION_LINES = 80


def long_functions(package: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``path:function (N lines)`` for every function or method under ``package`` longer than ``limit`` lines, the
    path relative to ``package``'s parent, sorted."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(package.parent).as_posix()}:{node.name} ({lines} lines)")
    return found


def test_no_function_in_verl_is_over_80_lines():
    too_long = long_functions(PACKAGE)
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps):\n  " + "\n  ".join(
        too_long
    )


def _function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines - 1))
    return f"{indent}def {name}():\n{body}"


def test_the_checker_catches_an_81_line_function_and_method(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "ok.py").write_text(_function("exactly_80", 80) + "\n\nasync " + _function("short", 3))
    (package / "sub" / "long.py").write_text(
        "import os\n\n\n" + _function("too_long", 81) + "\n\nclass Holder:\n" + _function("method", 82, "    ")
    )
    assert long_functions(package) == ["pkg/sub/long.py:too_long (81 lines)", "pkg/sub/long.py:method (82 lines)"]
