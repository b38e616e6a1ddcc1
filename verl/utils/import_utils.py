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


PKG_PREFIX = "pkg://"
FILE_PREFIX = "file://"


def load_module(module_path: str, module_name: str | None = None) -> ModuleType | None:
    """The module at ``module_path`` (verl's forms): ``pkg://a.b.c`` (or ``pkg://a/b/c``) imports an installed
    module; a file path (optionally ``file://``) runs that file as a module. ``module_name``: also register it in
    ``sys.modules`` under that name (so it can be imported and pickled by name). None for an empty path."""
    import importlib.util
    import os
    import sys

    if not module_path:
        return None
    if module_path.startswith(PKG_PREFIX):
        return importlib.import_module(module_path[len(PKG_PREFIX) :].replace("/", "."))
    path = module_path[len(FILE_PREFIX) :] if module_path.startswith(FILE_PREFIX) else module_path
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"module file {path!r} does not exist (from {module_path!r})")
    spec = importlib.util.spec_from_file_location(module_name or f"verl_external_{abs(hash(path)):x}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise RuntimeError(f"running {path!r} failed: {type(e).__name__}: {e}") from e
    if module_name is not None:
        if sys.modules.get(module_name, module) is not module:
            raise RuntimeError(f"module name {module_name!r} is already taken by another module in sys.modules")
        sys.modules[module_name] = module
    return module


def load_extern_object(module_path: str, object_name: str):
    """``object_name`` from the module at ``module_path`` (see `load_module`): how verl loads a user's class or
    function named in a config (``custom_reward_function``, ``reward_manager.module``)."""
    module = load_module(module_path)
    if module is None:
        raise AttributeError(f"cannot load {object_name!r}: no module path was given (got {module_path!r})")
    if not hasattr(module, object_name):
        defined = sorted(n for n in dir(module) if not n.startswith("_"))
        raise AttributeError(f"{object_name!r} is not defined in {module_path!r}; it defines {defined}")
    return getattr(module, object_name)


def load_class_by_name(class_name: str, where: str) -> type:
    """The class at the dotted path ``class_name`` (``package.module.Class``, how verl's tool and interaction YAML
    files name classes). Errors start with ``where`` (the file and entry that named it) and say what to fix: a
    missing module is a ``ModuleNotFoundError``, a name the module lacks an ``ImportError``."""
    module_name, _, attr = class_name.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"{where}: class_name {class_name!r} must be a dotted path 'package.module.ClassName'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise ModuleNotFoundError(
                f"{where}: class_name {class_name!r}: there is no module {e.name!r}; check the spelling, or install "
                f"or put on PYTHONPATH the package that defines it",
                name=e.name,
            ) from e
        raise ModuleNotFoundError(
            f"{where}: module {module_name!r} (for {class_name!r}) imports {e.name!r}, which is not installed",
            name=e.name,
        ) from e
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        defined = sorted(n for n, v in vars(module).items() if isinstance(v, type) and not n.startswith("_"))
        raise ImportError(f"{where}: module {module_name!r} defines no class {attr!r}; its classes: {defined}")
    return cls


def load_entry_list(path: str, list_key: str, kind: str, config_key: str, entry_fields: str) -> list:
    """The top-level ``list_key:`` list of a YAML (or JSON) config file of ``kind`` ("tool config", "interaction
    config"); a missing file or a missing list is one error naming the file, the config key that points to it and the
    entry fields expected."""
    import os

    from omegaconf import OmegaConf

    if not os.path.isfile(path):
        raise FileNotFoundError(f"{kind} {path!r} does not exist ({config_key})")
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    if not isinstance(raw, dict) or not isinstance(raw.get(list_key), list):
        raise ValueError(f"{kind} {path}: needs a top-level '{list_key}:' list of entries ({entry_fields})")
    return raw[list_key]
