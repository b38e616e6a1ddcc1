"""verl.core_algos is a leaf package: it imports torch, numpy and the standard library, nothing of verl. The old
module path verl.trainer.ppo.core_algos and verl.utils.torch_functional re-export the same objects (one registry,
one definition of each helper)."""

import ast
import pathlib
import subprocess
import sys

import pytest

import verl.core_algos as leaf
import verl.utils.torch_functional as torch_functional
from verl.trainer.ppo import core_algos as old_path

PACKAGE_DIR = pathlib.Path(leaf.__file__).parent
MODULES = sorted(PACKAGE_DIR.glob("*.py"))
ALLOWED_TOP_LEVEL = {"torch", "numpy"} | set(sys.stdlib_module_names)


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(level, module) of every import statement anywhere in the file (function bodies and TYPE_CHECKING too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


def test_package_has_the_topic_modules():
    names = {p.stem for p in MODULES}
    assert {"__init__", "advantage", "policy_loss", "kl", "aggregation", "value_loss", "functional"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_module_imports_nothing_of_verl(path):
    for level, module in _imports(path):
        if level == 0:
            top = module.split(".")[0]
            assert top != "verl", f"{path.name} imports {module}: verl.core_algos must not import verl"
            assert top in ALLOWED_TOP_LEVEL, f"{path.name} imports {module}: only torch, numpy and the stdlib"
        else:
            assert level == 1, f"{path.name}: a relative import of level {level} leaves the package"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_module_stays_small(path):
    assert len(path.read_text().splitlines()) < 600


@pytest.mark.slow
def test_importing_the_leaf_loads_no_other_verl_module():
    # ``import verl`` itself: the version and the CPU thread policy it applies (standard library only)
    code = (
        "import sys, verl.core_algos\n"
        "ALLOWED = ('verl', 'verl.version', 'verl.utils', 'verl.utils.cpu_threads')\n"
        "extra = sorted(m for m in sys.modules if (m == 'verl' or m.startswith('verl.'))"
        " and m not in ALLOWED and not m.startswith('verl.core_algos'))\n"
        "print(extra)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_old_paths_reexport_the_same_objects():
    # the functions that read a config convert it first on verl's path (verl.core_algos takes typed sections only),
    # and the look-ups by name return those
    converting = {name for name in leaf.__all__ if name.startswith("compute_policy_loss_")} | {
        "compute_gdpo_outcome_advantage",
        "compute_grpo_passk_outcome_advantage",
        "compute_reinforce_plus_plus_outcome_advantage",
        "get_kl_controller",
    }
    for name in leaf.__all__:
        if name in converting:
            assert getattr(old_path, name).__wrapped__ is getattr(leaf, name), name
        elif name not in ("get_adv_estimator_fn", "get_policy_loss_fn"):
            assert getattr(old_path, name) is getattr(leaf, name), name
    for name in ("masked_mean", "masked_sum", "masked_var", "masked_whiten", "entropy_from_logits"):
        assert getattr(torch_functional, name) is getattr(leaf, name), name
    # private helpers the old module defined stay importable from it
    from verl.trainer.ppo.core_algos import _group_stats, _kl_estimate  # noqa: F401


def test_one_advantage_registry_through_both_paths():
    def via_old(**kwargs):
        return None

    def via_leaf(**kwargs):
        return None

    try:
        old_path.register_adv_est("test_leaf_via_old")(via_old)
        assert leaf.get_adv_estimator_fn("test_leaf_via_old") is via_old
        leaf.register_adv_est("test_leaf_via_leaf")(via_leaf)
        assert old_path.get_adv_estimator_fn("test_leaf_via_leaf") is via_leaf
        with pytest.raises(ValueError, match="already registered"):
            leaf.register_adv_est("test_leaf_via_old")(via_leaf)
    finally:
        leaf.ADV_ESTIMATOR_REGISTRY.pop("test_leaf_via_old", None)
        leaf.ADV_ESTIMATOR_REGISTRY.pop("test_leaf_via_leaf", None)
    with pytest.raises(ValueError):
        old_path.get_adv_estimator_fn("test_leaf_via_old")


def test_one_policy_loss_registry_through_both_paths():
    def via_old(**kwargs):
        return None

    def via_leaf(**kwargs):
        return None

    try:
        old_path.register_policy_loss("test_leaf_via_old")(via_old)
        assert leaf.get_policy_loss_fn("test_leaf_via_old") is via_old
        leaf.register_policy_loss("test_leaf_via_leaf")(via_leaf)
        assert old_path.get_policy_loss_fn("test_leaf_via_leaf") is via_leaf
    finally:
        leaf.POLICY_LOSS_REGISTRY.pop("test_leaf_via_old", None)
        leaf.POLICY_LOSS_REGISTRY.pop("test_leaf_via_leaf", None)
    with pytest.raises(ValueError):
        leaf.get_policy_loss_fn("test_leaf_via_leaf")


@pytest.mark.parametrize(
    "name,register,get",
    [
        ("ADV_ESTIMATOR_REGISTRY", "register_adv_est", "get_adv_estimator_fn"),
        ("POLICY_LOSS_REGISTRY", "register_policy_loss", "get_policy_loss_fn"),
    ],
)
def test_assigning_a_registry_on_the_old_path_swaps_it_everywhere(monkeypatch, name, register, get):
    """verl's tests isolate a registry with ``core_algos.ADV_ESTIMATOR_REGISTRY = {...}``; in verl the functions live
    in that module, so they then use the new dict. The same holds here, through both paths."""
    original = getattr(leaf, name)
    swapped = {"gae": "stand-in"}
    monkeypatch.setattr(old_path, name, swapped)  # undone after the test (the setattr goes through the same path)
    assert getattr(leaf, name) is swapped
    assert getattr(old_path, get)("gae") == "stand-in"

    def fn(**kwargs):
        return None

    getattr(leaf, register)("test_swapped")(fn)
    assert swapped["test_swapped"] is fn and "test_swapped" not in original
    monkeypatch.undo()
    assert getattr(leaf, name) is original and getattr(old_path, name) is original
