"""`load_extern_object` / `load_class_by_name`: a user's class or function from a file or an installed module, with
clear errors."""

import pytest

from verl.utils.import_utils import load_class_by_name, load_extern_object, load_module


def test_loads_from_a_file_and_from_a_package(tmp_path):
    path = tmp_path / "my_rm.py"
    path.write_text("class Scorer:\n    pass\n\nLIMIT = 3\n")
    assert load_extern_object(str(path), "LIMIT") == 3
    assert load_extern_object(f"file://{path}", "Scorer").__name__ == "Scorer"
    assert load_extern_object("pkg://verl.utils.metric", "reduce_metrics").__module__ == "verl.utils.metric.utils"
    module = load_module(str(path), module_name="verl_test_my_rm")
    import sys

    assert sys.modules["verl_test_my_rm"] is module


def test_errors_name_the_file_and_what_it_defines(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def score():\n    return 1\n")
    with pytest.raises(AttributeError, match=r"'Scorer' is not defined in .*it defines \['score'\]"):
        load_extern_object(str(path), "Scorer")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_extern_object(str(tmp_path / "none.py"), "x")
    with pytest.raises(AttributeError, match="no module path"):
        load_extern_object(None, "x")
    bad = tmp_path / "bad.py"
    bad.write_text("1 +\n")
    with pytest.raises(RuntimeError, match="SyntaxError"):
        load_extern_object(str(bad), "x")


def test_load_class_by_name_tells_a_missing_module_from_a_missing_dependency(tmp_path, monkeypatch):
    from collections import OrderedDict

    assert load_class_by_name("collections.OrderedDict", "here") is OrderedDict
    (tmp_path / "needs_dep.py").write_text("import not_installed_dep_xyz\n\nclass T:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="here: module 'needs_dep' .* imports 'not_installed_dep_xyz', which"):
        load_class_by_name("needs_dep.T", "here")
    with pytest.raises(ModuleNotFoundError, match="here: class_name 'no_pkg_xyz.T': there is no module 'no_pkg_xyz'"):
        load_class_by_name("no_pkg_xyz.T", "here")
    with pytest.raises(ValueError, match="must be a dotted path"):
        load_class_by_name("OrderedDict", "here")
