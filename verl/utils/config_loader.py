"""Loading a job's typed config: the schema's defaults < ``--config file.yaml`` < ``key=value`` overrides.

    python -m verl.trainer.main_sft optim.lr=3e-3 trainer.total_training_steps=100 --config my.yaml

Each job's schema is a tree of dataclasses (``verl.trainer.config.<job>``, built from ``verl.workers.config`` and
``verl.trainer.config`` sections): the type, default and meaning of every key live there. ``load_config`` returns an
instance of the job's schema class (``PPOTrainerConfig``, ...): a tree of frozen `verl.base_config.BaseConfig`
sections that code reads as attributes (``cfg.get("k")``, ``cfg["k"]`` and ``dict(cfg)`` work too, for ported code).

How it is built: OmegaConf is the merge stage only. ``merge_config`` makes an OmegaConf structured config of the
schema, merges YAML files and overrides onto it and resolves ``${...}`` interpolations; a key the schema lacks is an
error naming the closest valid key; a value OmegaConf cannot convert to the key's type is an error naming the key and
the type. ``+key=value`` adds a key the schema does not have (as in Hydra); under free-form groups (``dict`` fields,
e.g. ``reward_model.reward_kwargs``) any key is accepted. A list key given one scalar takes it as a one-item list. ``load_config`` then runs the job's ``PREPARE`` step on that merged
``DictConfig`` (for ``ppo_trainer``: `verl.utils.ported_keys.apply_ported_keys`, which maps verl's deprecated keys
onto the ones that run) and converts it once (``OmegaConf.to_object``). Nothing changes the config after that: code
that needs another value builds a changed copy (`replace_keys`, ``dataclasses.replace``). A key added with ``+`` is
an attribute of its section (not a field). `to_yaml` and `to_container` serialise the tree (what ``config.yaml`` in a
run directory holds: the same text the merged ``DictConfig`` gave), `select` reads a dotted key; they live in
`verl.utils.config_tree` with `ConfigError`.

Functions verl's users call with a Hydra-composed ``DictConfig`` or a dict (``run_ppo``, the trainer's constructor)
convert it at their boundary with ``as_section(config, <schema>)``: a job schema's mapping is loaded as overrides, so
its ported keys are translated the same way. ``omega_conf_to_dataclass`` turns a section into its dataclass (what
workers receive; a section of the loaded tree is one already). ``default_config`` is the unresolved structured
``DictConfig`` the merge starts from (derived keys hold their ``${...}``), for the merge and the reference docs.

verl's import path for these names is ``verl.utils.config``, which also re-exports the PPO config's dict view
(``verl.utils.config_dict``, built on this module).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import importlib
import os
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError, InterpolationValidationError, OmegaConfBaseException

from verl.utils.config_tree import ConfigError, UnknownConfigKeyError, select, to_container, to_yaml

__all__ = [
    "JOBS",
    "ConfigError",
    "UnknownConfigKeyError",
    "as_section",
    "default_config",
    "job_schema",
    "load_config",
    "load_yaml",
    "merge_config",
    "choose_recipe",
    "recipe_names",
    "recipe_path",
    "omega_conf_to_dataclass",
    "parse_overrides",
    "replace_keys",
    "schema_keys",
    "select",
    "to_container",
    "to_yaml",
]


# job name -> (module of its schema, the schema dataclass); the module's DERIVED_DEFAULTS lists interpolated defaults
JOBS: dict[str, tuple[str, str]] = {
    "ppo_trainer": ("verl.trainer.config.ppo_trainer", "PPOTrainerConfig"),
    "sft_trainer": ("verl.trainer.config.sft_trainer", "SFTTrainerConfig"),
    "evaluation": ("verl.trainer.config.evaluation", "EvaluationConfig"),
    "generation": ("verl.trainer.config.generation", "GenerationJobConfig"),
}
# job name -> "module.function" run on the merged, resolved DictConfig before it becomes the dataclass (in place)
PREPARE: dict[str, str] = {"ppo_trainer": "verl.utils.ported_keys.apply_ported_keys"}


def job_schema(name: str) -> type:
    """The root dataclass of job ``name``."""
    if name not in JOBS:
        raise ConfigError(f"unknown job config {name!r}: one of {sorted(JOBS)}")
    module, cls = JOBS[name]
    return getattr(importlib.import_module(module), cls)


def default_config(name: str) -> DictConfig:
    """Job ``name``'s defaults as a typed, unresolved ``DictConfig`` (derived keys hold their ``${...}``)."""
    return _defaults(name).copy()


@functools.cache
def _defaults(name: str) -> DictConfig:
    cfg = OmegaConf.structured(job_schema(name))
    for key, source in getattr(importlib.import_module(JOBS[name][0]), "DERIVED_DEFAULTS", {}).items():
        OmegaConf.update(cfg, key, "${" + source + "}", merge=False)
    return cfg


# ------------------------------------------------------------------------------------------------ the schema tree
def _strip_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return hint


@functools.cache
def _field_hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: _strip_optional(hints[f.name]) for f in dataclasses.fields(cls)}


def _is_group(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _is_free_form(hint: Any) -> bool:
    return hint is Any or hint is dict or typing.get_origin(hint) is dict


def _is_list(hint: Any) -> bool:
    return hint is list or typing.get_origin(hint) in (list, tuple)


@functools.cache
def schema_keys(root: type) -> tuple[str, ...]:
    """Every dotted key of a schema tree (groups and leaves), in field order."""
    keys: list[str] = []
    for name, hint in _field_hints(root).items():
        keys.append(name)
        if _is_group(hint):
            keys.extend(f"{name}.{k}" for k in schema_keys(hint))
    return tuple(keys)


def _type_name(hint: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    if hint in names:
        return names[hint]
    if _is_list(hint):
        args = typing.get_args(hint)
        plural = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}
        return f"a list of {plural[args[0]]}" if args and args[0] in plural else "a list"
    if _is_free_form(hint) or _is_group(hint):
        return "a mapping"
    return getattr(hint, "__name__", str(hint))


def _closest(key: str, candidates: Iterable[str]) -> str:
    candidates = list(candidates)
    leaf = key.rsplit(".", 1)[-1]
    # The right leaf under the wrong group (trainer.lr -> optim.lr) beats a spelling neighbour.
    match = [c for c in candidates if c.rsplit(".", 1)[-1] == leaf]
    match = match or difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    match = match or difflib.get_close_matches(key, candidates, n=1, cutoff=0.3)
    return f" Did you mean {match[0]!r}?" if match else ""


# ------------------------------------------------------------------------------------------------ inputs
def load_yaml(path: str) -> dict:
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path!r} is not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r} must hold a mapping at the top level, got {type(data).__name__}")
    return data


def parse_overrides(args: Iterable[str]) -> tuple[list[str], list[tuple[str, Any, bool]]]:
    """Split argv into ``--config`` files and ``(key, value, is_new)`` overrides; values are parsed as YAML.
    ``+key=value`` and Hydra's ``++key=value`` may add a key the schema lacks."""
    files: list[str] = []
    overrides: list[tuple[str, Any, bool]] = []
    args = list(args)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--config", "--config-file", "-c"):
            if i + 1 >= len(args):
                raise ConfigError(f"{arg} needs a YAML file path after it")
            files.append(args[i + 1])
            i += 2
            continue
        if arg.startswith("--config="):
            files.append(arg.split("=", 1)[1])
        elif "=" in arg and not arg.startswith("-"):
            key, raw = arg.split("=", 1)
            is_new = key.startswith("+")
            key = key.lstrip("+")
            if not key:
                raise ConfigError(f"override {arg!r} has no key: write key.path=value")
            overrides.append((key, _parse_value(raw), is_new))
        else:
            raise ConfigError(
                f"cannot read the argument {arg!r}: write overrides as key.path=value (e.g. trainer.seed=1) "
                "or pass a YAML file with --config FILE (--help: the job's usage)"
            )
        i += 1
    return files, overrides


def _parse_value(raw: str) -> Any:
    try:
        return yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        if raw.startswith("[") and raw.endswith("]"):  # [a?x=1,b]: YAML reads "?" as a key marker; a list was meant
            return [part.strip() for part in raw[1:-1].split(",") if part.strip()]
        return raw


def _is_interpolation(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("${") and value.endswith("}")


# ------------------------------------------------------------------------------------------------ merging
class _Loader:
    """Applies overrides to one job's config, checking each key against the schema tree."""

    def __init__(self, name: str):
        self.root = job_schema(name)
        self.defaults = _defaults(name)
        self.cfg = default_config(name)
        self.interpolated: list[tuple[str, Any, str]] = []  # (key, type hint, source): checked once resolved

    def target(self, key: str, source: str, allow_new: bool) -> tuple[Any, bool]:
        """The type hint at ``key`` (None: unknown, added with ``+``) and whether it lies under a free-form group."""
        parts = key.split(".")
        hint: Any = self.root
        for depth, part in enumerate(parts):
            if _is_free_form(hint):
                return Any, True
            if not _is_group(hint):
                parent = ".".join(parts[:depth])
                raise ConfigError(f"{source}: {parent!r} is a value, not a group, so {key!r} cannot be set.")
            hints = _field_hints(hint)
            if part not in hints:
                if allow_new:
                    return None, True
                path = ".".join(parts[: depth + 1])
                raise ConfigError(f"{source}: unknown config key {path!r}.{_closest(path, schema_keys(self.root))}")
            hint = hints[part]
        return hint, False

    def set(self, key: str, value: Any, source: str, allow_new: bool = False) -> None:
        if key == "_target_" or key.endswith("._target_"):
            return  # verl's hydra class paths: the schema already says which dataclass each section is
        if value == "???":
            return  # OmegaConf's "must be set" marker in verl's YAML (e.g. reward_model.rollout.name): keep the default
        hint, free = self.target(key, source, allow_new)
        if _is_group(hint) and isinstance(value, Mapping):
            for k, v in value.items():  # a nested mapping from a YAML file: each leaf by its full path
                self.set(f"{key}.{k}", v, source, allow_new)
            return
        if _is_group(hint) and value is None:
            if source.startswith("config file"):  # a group whose keys are all commented out: no change
                return
            raise ConfigError(f"{source}: {key!r} is a group of keys; null would delete it. Set its keys instead.")
        if _is_interpolation(value):
            self.interpolated.append((key, hint, source))
        elif hint is not None and not free:
            value = _coerce(hint, value)
        try:
            OmegaConf.update(self.cfg, key, value, merge=False, force_add=free)
        except OmegaConfBaseException:
            default = OmegaConf.select(self.defaults, key, default=None, throw_on_resolution_failure=False)
            if value is None:
                raise ConfigError(
                    f"{source}: config key {key!r} cannot be null (default {default!r}): give {_type_name(hint)}"
                ) from None
            what = f"default {default!r}" if default is not None else "default null: off/automatic"
            raise ConfigError(
                f"{source}: config key {key!r} expects {_type_name(hint)} ({what}), got {type(value).__name__} "
                f"{value!r}"
            ) from None

    def resolve(self) -> DictConfig:
        try:
            OmegaConf.resolve(self.cfg)
        except InterpolationResolutionError as e:
            key = getattr(e, "full_key", None) if isinstance(e, InterpolationValidationError) else None
            for path, hint, source in self.interpolated:
                if path == key:
                    raise ConfigError(
                        f"{source}: config key {path!r} expects {_type_name(hint)}, but its interpolation resolves "
                        f"to {_resolved_type(self.cfg, path)}"
                    ) from None
            raise ConfigError(f"a ${{...}} interpolation does not resolve: {str(e).splitlines()[0]}") from None
        return self.cfg


def _resolved_type(cfg: DictConfig, path: str) -> str:
    """``str 'verl-ppo'``: what a one-key interpolation at ``path`` points at (for error messages)."""
    raw = OmegaConf.to_container(OmegaConf.select(cfg, path.rsplit(".", 1)[0]) if "." in path else cfg)
    source = raw[path.rsplit(".", 1)[-1]][2:-1]
    value = OmegaConf.select(cfg, source, default=None, throw_on_resolution_failure=False)
    return f"{type(value).__name__} {value!r}"


def _coerce(hint: Any, value: Any) -> Any:
    # A list key given one scalar takes it as a one-item list (data.train_files=x.parquet, trainer.logger=console).
    if _is_list(hint) and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return [value]
    # A string key given a number (experiment_name=2024, which YAML reads as an int): the text that was typed.
    if hint is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def merge_config(
    name: str, argv: Iterable[str] | None = None, overrides: Mapping[str, Any] | None = None
) -> DictConfig:
    """The merge stage of `load_config`: the job's structured ``DictConfig`` with schema defaults < recipe <
    ``--config`` files < ``key=value`` args < ``overrides``, checked and resolved; the job's ``PREPARE`` step has not
    run. The recipe (``recipe=<name or file.yaml>``) is a named set of tuned overrides; a job with a
    ``DEFAULT_RECIPE`` gets it when the run names none and sets none of ``USER_TASK_KEYS`` to a path of its own."""
    loader = _Loader(name)
    files, arg_overrides = parse_overrides(argv or [])
    sources = [(f"config file {path!r}", list(load_yaml(path).items())) for path in files]
    sources.append(("command line", [(key, value) for key, value, _ in arg_overrides]))
    sources.append(("overrides", list((overrides or {}).items())))
    recipe = choose_recipe(name, {k: v for _, items in sources for k, v in _flatten(items)})
    if recipe is not None:
        for key, value in load_yaml(recipe_path(recipe, name)).items():
            loader.set(str(key), value, source=f"recipe {recipe!r}")
    if "recipe" in _field_hints(loader.root):
        loader.set("recipe", recipe or "none", source="recipe")
    for path in files:
        for key, value in load_yaml(path).items():
            loader.set(str(key), value, source=f"config file {path!r}")
    for key, value, is_new in arg_overrides:
        loader.set(key, value, source="command line", allow_new=is_new)
    for key, value in (overrides or {}).items():
        if key != "recipe":
            loader.set(key, value, source="overrides")
    return loader.resolve()


def load_config(name: str, argv: Iterable[str] | None = None, overrides: Mapping[str, Any] | None = None) -> Any:
    """Job ``name``'s validated config, an instance of its schema class (`job_schema`): `merge_config`'s
    ``DictConfig`` (defaults < recipe < ``--config`` files < ``key=value`` args < ``overrides``), the job's
    ``PREPARE`` step applied to it, converted once."""
    cfg = merge_config(name, argv, overrides)
    if name in PREPARE:
        module, _, function = PREPARE[name].rpartition(".")
        getattr(importlib.import_module(module), function)(cfg)
    return _to_object(cfg)


def _to_object(cfg: DictConfig) -> Any:
    """A structured ``DictConfig`` as its dataclass; a section's own check (``__post_init__``) failing is a
    `ConfigError` naming the section."""
    try:
        return OmegaConf.to_object(cfg)
    except (OmegaConfBaseException, ValueError) as e:
        path = _failing_section(cfg)
        raise ConfigError(f"{path + ': ' if path else ''}{str(e).splitlines()[0]}") from None


def _failing_section(cfg: DictConfig, prefix: str = "") -> str:
    """The dotted path of the deepest section under ``cfg`` whose dataclass cannot be built ('' when none)."""
    for key in cfg:
        node = cfg._get_node(key)
        if not isinstance(node, DictConfig) or not dataclasses.is_dataclass(OmegaConf.get_type(node)):
            continue
        deeper = _failing_section(node, f"{prefix}{key}.")
        if deeper:
            return deeper
        try:
            OmegaConf.to_object(node)
        except (OmegaConfBaseException, ValueError):
            return f"{prefix}{key}"
    return ""


# ------------------------------------------------------------------------------------------------ recipes
RECIPE_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "trainer", "config", "recipes")


def recipe_names(job: str | None = None) -> list[str]:
    """The recipes shipped with verl (``verl/trainer/config/recipes/<name>.yaml``); with ``job``, those its schema
    module lists in ``RECIPES`` (all of them where it lists none)."""
    names = sorted(f[: -len(".yaml")] for f in os.listdir(RECIPE_DIR) if f.endswith(".yaml"))
    own = getattr(importlib.import_module(JOBS[job][0]), "RECIPES", None) if job is not None else None
    return names if own is None else [n for n in names if n in own]


def recipe_path(recipe: str, job: str | None = None) -> str:
    """The YAML file of a recipe: a shipped recipe's name (with ``job``: one of that job's), or a path to a YAML file
    of overrides."""
    if recipe.endswith((".yaml", ".yml")) or os.sep in recipe:
        return recipe
    if recipe not in recipe_names(job):
        raise ConfigError(f"unknown recipe {recipe!r}: one of {recipe_names(job)}, a YAML file, or none")
    return os.path.join(RECIPE_DIR, f"{recipe}.yaml")


def choose_recipe(name: str, given: Mapping[str, Any]) -> str | None:
    """The recipe a run of job ``name`` gets from its flattened settings ``given``: the one it names (``none``: no
    recipe), else the job's default recipe when it sets none of the job's user-task keys to a path of its own."""
    named = given.get("recipe")
    if named is not None:
        return None if str(named).lower() == "none" else str(named)
    module = importlib.import_module(JOBS[name][0])
    default = getattr(module, "DEFAULT_RECIPE", None)
    user_task = [k for k in getattr(module, "USER_TASK_KEYS", ()) if k in given and not _is_builtin(given[k])]
    return default if default and not user_task else None


def _is_builtin(value: Any) -> bool:
    values = value if isinstance(value, (list, tuple, ListConfig)) else [value]
    return all(isinstance(v, str) and v.startswith("builtin://") for v in values)


def _flatten(items: Iterable[tuple[Any, Any]], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in items:
        path = f"{prefix}{str(key).lstrip('+')}"
        if isinstance(value, Mapping) and value:
            yield from _flatten(value.items(), f"{path}.")
        else:
            yield path, value


# ------------------------------------------------------------------------------------------------ changed copies
def replace_keys(cfg: Any, updates: Mapping[str, Any]) -> Any:
    """A copy of the schema dataclass ``cfg`` with each dotted key of ``updates`` set (``dataclasses.replace`` along
    the path: the sections on it are rebuilt and checked, the others shared). The loaded config is never changed.
    A ``DictConfig`` (from ported code) gives a changed deep copy of itself."""
    if isinstance(cfg, DictConfig):
        cfg = copy.deepcopy(cfg)
        for key, value in updates.items():
            OmegaConf.update(cfg, key, value, merge=False)
        return cfg
    for key, value in updates.items():
        cfg = _replace_one(cfg, key.split("."), value)
    return cfg


def _replace_one(node: Any, parts: list[str], value: Any) -> Any:
    head = parts[0]
    new = value if len(parts) == 1 else _replace_one(node[head], parts[1:], value)
    if isinstance(node, Mapping) and not dataclasses.is_dataclass(node):  # a free-form dict group
        return {**node, head: new}
    if head not in {f.name for f in dataclasses.fields(node)}:
        raise ConfigError(f"{type(node).__name__} has no field {head!r}")
    copy = dataclasses.replace(node, **{head: new})
    names = {f.name for f in dataclasses.fields(node)}
    for extra, v in vars(node).items():  # keys added with +key=value: attributes, not fields
        if extra not in names and not extra.startswith("_"):
            object.__setattr__(copy, extra, v)
    return copy


# ------------------------------------------------------------------------------------------------ dataclasses
def omega_conf_to_dataclass(config: DictConfig | Mapping | Any, dataclass_type: type | None = None) -> Any:
    """A config section as its dataclass (verl's function): ``dataclass_type``'s defaults merged with ``config``.

    Without ``dataclass_type`` the section names its class in ``_target_`` (``"verl.trainer.config.AlgoConfig"``),
    as verl's YAML does. An object that is not a mapping (e.g. already a dataclass) is returned as it is."""
    instance = dataclasses.is_dataclass(config) and not isinstance(config, type)
    if instance and (dataclass_type is None or isinstance(config, dataclass_type)):
        return config  # a section of a loaded config (or another dataclass): as it is
    if dataclass_type is None and isinstance(config, Mapping | DictConfig) and "_target_" not in config:
        raise ConfigError("omega_conf_to_dataclass: give dataclass_type, or a config with a _target_ class path")
    if not isinstance(config, Mapping | DictConfig | ListConfig):
        return config
    if instance:
        data = to_container(config)
    else:
        data = OmegaConf.to_container(OmegaConf.create(config), resolve=True) if config else {}
    if dataclass_type is None:
        module, _, cls = str(data["_target_"]).rpartition(".")
        dataclass_type = getattr(importlib.import_module(module), cls)
    if not dataclasses.is_dataclass(dataclass_type):
        raise ConfigError(f"omega_conf_to_dataclass: {dataclass_type} is not a dataclass")
    merged = OmegaConf.merge(_structured(dataclass_type), _drop_targets(data))
    return OmegaConf.to_object(merged)


@functools.cache
def _structured(dataclass_type: type) -> DictConfig:
    # the defaults of a section, built once: merge copies them, so the cached config is never changed
    return OmegaConf.structured(dataclass_type)


def as_section(config: Any, section_type: type) -> Any:
    """``config`` as the schema section ``section_type`` (a `verl.base_config.BaseConfig` dataclass or a job's root
    schema), converted once where a function receives it; past this call the function reads attributes.

    - a ``section_type`` (or a subclass), or a ``DictConfig`` built from a section's class: returned as it is;
    - None: the section's defaults (a job schema: ``load_config(job)``);
    - a dict or an untyped ``DictConfig`` (ported user code that builds configs by hand): its keys over the schema's
      defaults, checked like a loaded config (an unknown key is a `ConfigError`). A null for a key that cannot be
      null means "not set" (the default). ``section_type.ported_layout`` first moves keys that older code wrote
      elsewhere. A job schema's mapping (a Hydra-composed ``DictConfig`` too, typed or not) is loaded as overrides
      (``load_config``): its ported keys are translated and its derived keys follow their sources, and the result
      is the job's dataclass;
    - anything else (an object with the section's attributes): returned as it is.
    """
    if isinstance(config, section_type):
        return config
    job = next((name for name in JOBS if job_schema(name) is section_type), None)
    if _typed_as(config, section_type) and job is None:
        return config
    if config is not None and not isinstance(config, Mapping):
        return config
    if job is not None:
        return load_config(job, overrides=config)
    if config is None:
        return section_type()
    data = OmegaConf.to_container(config, resolve=True) if isinstance(config, DictConfig) else dict(config)
    data = _drop_unset(section_type.ported_layout(data), section_type)
    try:
        return omega_conf_to_dataclass(data, section_type)
    except OmegaConfBaseException as e:
        raise ConfigError(f"{section_type.__name__}: {str(e).splitlines()[0]}") from None


def _typed_as(config: Any, section_type: type) -> bool:
    """Whether ``config`` is a structured ``DictConfig`` of ``section_type`` (or of a subclass)."""
    if not isinstance(config, DictConfig):
        return False
    object_type = OmegaConf.get_type(config)
    return isinstance(object_type, type) and issubclass(object_type, section_type)


def _drop_unset(data: dict, section_type: type) -> dict:
    """``data`` without the nulls of keys the schema types as not nullable, in nested sections too."""
    hints = typing.get_type_hints(section_type)
    out = {}
    for key, value in data.items():
        hint = hints.get(key, Any)
        if value is None and hint is not Any and type(None) not in typing.get_args(hint):
            continue
        nested = _strip_optional(hint)
        if isinstance(value, Mapping) and _is_group(nested):
            value = _drop_unset(dict(value), nested)
        out[key] = value
    return out


def _drop_targets(tree: Any) -> Any:
    if isinstance(tree, Mapping):
        return {k: _drop_targets(v) for k, v in tree.items() if k != "_target_"}
    return tree
