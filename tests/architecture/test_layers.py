"""verl's imports form no circle and point down the layers of docs/architecture.md.

Every ``import`` and ``from ... import`` in ``verl/`` counts, also those inside functions or under ``TYPE_CHECKING``
(a lazy import is still a dependency), and so does ``importlib.import_module("verl.x")`` with a literal name. A
layer is a set of verl/'s top-level folders and modules, so the folders are the map: a module may import its own
layer and the layers below it, and a new top-level folder fails here until LAYERS (and the docs) give it a layer.
The file also keeps files under 600 lines and the controller's step on one screen.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "verl"
MAX_LINES = 600

# bottom to top: (layer, verl/'s top-level packages and modules in it); "__init__" is verl/__init__.py itself
LAYERS: list[tuple[str, list[str]]] = [
    ("core_algos", ["core_algos"]),
    ("protocol", ["protocol*", "base_config", "version"]),
    ("utils", ["utils", "data", "sandbox", "models"]),
    ("tools", ["tools", "interactions"]),
    ("single_controller", ["single_controller"]),
    ("workers", ["workers"]),
    ("experimental", ["experimental"]),
    ("engine", ["engine"]),
    ("planner", ["planner"]),
    ("tune", ["tune"]),
    ("trainer", ["trainer"]),
    ("entry", ["__init__", "cli", "diagnose", "model_merger"]),
]
# Entry points that sit at verl's module paths inside a lower package (its users' scripts run them by that path):
# they are the entry layer, and nothing imports them.
ENTRY_POINTS = {
    "verl.experimental.one_step_off_policy.main_ppo",
    "verl.experimental.fully_async_policy.fully_async_main",
}


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module under ``package`` by dotted name (a package by its ``__init__.py``)."""
    out = {}
    for path in package.rglob("*.py"):
        name = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _named(node: ast.AST, package: str) -> list[str]:
    """The dotted names an import statement or a literal ``import_module`` call reaches (``pkg.name`` for ``from pkg
    import name``: the module when ``name`` is one, else ``pkg``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        parts = package.split(".")
        base = ".".join([*parts[: len(parts) - node.level + 1], *[node.module or ""]]) if node.level else node.module
        return [f"{base.rstrip('.')}.{a.name}" for a in node.names]
    func = getattr(node, "func", None)
    if getattr(func, "attr", getattr(func, "id", None)) == "import_module" and node.args:
        arg = node.args[0]
        return [arg.value] if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else []
    return []


def imports_of(module: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """The modules of ``known`` that ``module`` imports, each with the line of its first import."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        for name in _named(node, package):
            while name and name not in known:  # an attribute: its module
                name = name.rpartition(".")[0]
            if name and name != module:
                found[name] = min(found.get(name, node.lineno), node.lineno)
    return found


def import_graph(package: Path = PACKAGE) -> dict[str, dict[str, int]]:
    known = modules(package)
    return {module: imports_of(module, path, known) for module, path in sorted(known.items())}


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm): each is an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return sorted(found)


def top_level(package: Path = PACKAGE) -> list[str]:
    """verl/'s top-level modules and packages (folders holding Python files): the names LAYERS places."""
    return sorted(
        p.stem if p.is_file() else p.name
        for p in package.iterdir()
        if (p.is_file() and p.suffix == ".py") or (p.is_dir() and any(p.rglob("*.py")))
    )


def layer_of(module: str) -> int:
    if module in ENTRY_POINTS:
        return len(LAYERS) - 1
    top = module.split(".")[1] if "." in module else "__init__"
    found = [i for i, (_, names) in enumerate(LAYERS) for name in names if fnmatch.fnmatch(top, name)]
    assert len(found) == 1, f"verl.{top} is in {len(found)} layers: give it one in LAYERS and in docs/architecture.md"
    return found[0]


def test_no_import_circles():
    graph = import_graph()
    found = circles(graph)
    report = [
        " <-> ".join(c) + "".join(f"\n    {a}:{graph[a][b]} imports {b}" for a in c for b in sorted(graph[a]) if b in c)
        for c in found
    ]
    assert not found, "import circles (move what both need to a module below them):\n" + "\n".join(report)


def test_the_guard_sees_a_circle_through_a_function_level_import(tmp_path):
    fake = tmp_path / "verl"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "a.py").write_text("import verl.b\n")
    (fake / "b.py").write_text("def f():\n    from verl.a import thing\n")
    (fake / "c.py").write_text("import importlib\n\n\ndef g():\n    return importlib.import_module('verl.d')\n")
    (fake / "d.py").write_text("from verl import c\n")
    graph = import_graph(fake)
    assert graph["verl.b"] == {"verl.a": 2} and graph["verl.c"] == {"verl.d": 5}
    assert circles(graph) == [["verl.a", "verl.b"], ["verl.c", "verl.d"]]


def test_every_top_level_package_has_one_layer():
    names = top_level()
    for name in names:
        layer_of("verl" if name == "__init__" else f"verl.{name}")
    stale = [pattern for _, patterns in LAYERS for pattern in patterns if not fnmatch.filter(names, pattern)]
    assert not stale, f"LAYERS names packages verl/ does not have: {stale}"


def test_every_import_points_down_the_layers():
    upward = []
    for module, targets in import_graph().items():
        mine = layer_of(module)
        for target, line in sorted(targets.items()):
            if layer_of(target) > mine:
                allowed = [name for name, _ in LAYERS[: mine + 1]]
                upward.append(f"{module}:{line} imports {target} ({LAYERS[layer_of(target)][0]}); may import {allowed}")
    assert not upward, "imports pointing up the layers (docs/architecture.md):\n" + "\n".join(upward)


def test_docs_name_every_layer_and_package_in_order():
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = []
    for name, _ in LAYERS:
        assert f"| **{name}** |" in text, f"docs/architecture.md's layer table has no row for {name}"
        rows.append(text.index(f"| **{name}** |"))
    assert rows == sorted(rows), "docs/architecture.md lists the layers in another order than LAYERS"
    for name in top_level():
        dotted = "verl" if name == "__init__" else f"verl.{name}"
        assert f"`{dotted}`" in text, f"docs/architecture.md does not name {dotted}"


def test_no_file_over_the_limit():
    long = {
        str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"files over {MAX_LINES} lines (split them by what they do): {long}"


def test_controller_loop_stays_small():
    text = (PACKAGE / "trainer" / "ppo" / "ray_trainer.py").read_text()
    assert len(text.splitlines()) < 400
    tree = ast.parse(text)
    step = next(f for c in tree.body if isinstance(c, ast.ClassDef) for f in c.body if getattr(f, "name", "") == "step")
    assert step.end_lineno - step.lineno + 1 <= 40, "RayPPOTrainer.step should fit on one screen"
