"""The layers of docs/architecture.md point one way: a module imports only from its own layer or the layers below it.

Every ``import`` and ``from ... import`` in ``verl/`` counts, also those inside functions (a lazy import is still a
dependency). A new upward import fails here with the importing module, the imported one and the rule; a new module
must belong to a layer (the longest matching prefix decides). The test also keeps files under 600 lines.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "verl"

# bottom to top; each layer may import from itself and from the layers before it
LAYERS: list[tuple[str, list[str]]] = [
    ("core_algos", ["verl.core_algos"]),
    (
        "utils",
        ["verl.version", "verl.utils", "verl.protocol", "verl.protocol_utils", "verl.protocol_ops", "verl.sandbox"],
    ),
    (
        "config",
        [
            "verl.base_config",
            "verl.utils.config",
            "verl.utils.config_dict",
            "verl.utils.config_reference",
            "verl.utils.ported_keys",
            "verl.utils.cli",
            "verl.utils.profiler",
            "verl.workers.config",
            "verl.trainer.config",
        ],
    ),
    (
        "data",
        [
            "verl.data",
            "verl.models",
            "verl.utils.dataset",
            "verl.utils.reward_score",
            "verl.utils.data",
            "verl.utils.model",
            "verl.utils.lora",
            "verl.utils.tokenizer",
            "verl.utils.evaluation",
            "verl.tools",
            "verl.interactions",
        ],
    ),
    ("single_controller", ["verl.single_controller"]),
    ("workers", ["verl.workers", "verl.experimental"]),
    ("controller", ["verl.trainer.ppo", "verl.engine", "verl.planner"]),
    ("tune", ["verl.tune"]),
    ("entry", ["verl", "verl.trainer", "verl.cli", "verl.model_merger", "verl.diagnose"]),
]
# package __init__ modules that re-export a higher layer's names at verl's import paths: the facade sits in that layer
FACADES = {
    "verl.utils": "data",  # from verl.utils import hf_tokenizer
    "verl.trainer.ppo": "entry",  # from verl.trainer.ppo import PPOTrainer (the path the Python API docs use)
}
MAX_LINES = 600


def layer_of(module: str) -> int:
    if module in FACADES:
        return [name for name, _ in LAYERS].index(FACADES[module])
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS here and to docs/architecture.md"
    return best


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The ``verl`` modules ``module`` imports (a ``from pkg import name`` counts as ``pkg.name`` when that is a
    module, else as ``pkg``)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "verl"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source.split(".")[0] == "verl":
                found |= {f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names}
    return found


def test_every_import_points_down_the_layers():
    known = modules()
    upward = []
    for module, path in sorted(known.items()):
        mine = layer_of(module)
        for target in sorted(imports_of(module, path, known)):
            if layer_of(target) > mine:
                upward.append(
                    f"{module} ({LAYERS[mine][0]}) imports {target} ({LAYERS[layer_of(target)][0]}): "
                    f"a {LAYERS[mine][0]} module may import only {[n for n, _ in LAYERS[: mine + 1]]}"
                )
    assert not upward, "upward imports (docs/architecture.md):\n" + "\n".join(upward)


def test_the_guard_sees_an_upward_import(tmp_path):
    fake = tmp_path / "x.py"
    fake.write_text("def f():\n    from verl.trainer.ppo.ray_trainer import RayPPOTrainer\n")
    targets = imports_of("verl.workers.fake", fake, modules())
    assert "verl.trainer.ppo.ray_trainer" in targets
    assert layer_of("verl.trainer.ppo.ray_trainer") > layer_of("verl.workers.fake")


def test_docs_name_every_layer():
    text = (ROOT / "docs" / "architecture.md").read_text()
    for name, prefixes in LAYERS:
        assert f"**{name}**" in text, f"docs/architecture.md does not describe layer {name}"
        for prefix in prefixes:
            assert f"`{prefix}`" in text, f"docs/architecture.md does not list {prefix} in layer {name}"


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


if __name__ == "__main__":  # a quick listing: python tests/architecture/test_layers.py
    for name, path in sorted(modules().items()):
        print(f"{LAYERS[layer_of(name)][0]:18s} {name}  ({os.path.getsize(path)} bytes)")
