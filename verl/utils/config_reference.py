"""The key reference of every job, generated from the schemas themselves (each dataclass field's type, default and the
``#`` comment beside it), so the docs cannot lag the code: ``tests/utils/test_config_reference.py`` checks that
``docs/config_reference.md`` is what this module writes.

    python -m verl.utils.config_reference > docs/config_reference.md
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import io
import os
import textwrap
import tokenize

import yaml
from omegaconf import OmegaConf

from verl.utils.config_dict import schema_api_names
from verl.utils.config_loader import _field_hints, _is_free_form, _is_group, default_config, job_schema

JOBS = (
    ("ppo_trainer", "`python -m verl.trainer.main_ppo` (`verl ppo`), the tuner's trials and the Python API"),
    ("sft_trainer", "`python -m verl.trainer.main_sft` (`verl sft`); also `verl.trainer.fsdp_sft_trainer`"),
    ("evaluation", "`python -m verl.trainer.main_eval` (`verl eval`)"),
    ("generation", "`python -m verl.trainer.main_generation` (`verl generate`)"),
)


@functools.cache
def field_comments(cls: type) -> dict[str, str]:
    """``{field name: the comment on its line}`` of a dataclass, read from its source (inherited fields included)."""
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
        by_line = {t.start[0]: t.string[1:].strip() for t in tokens}
        own_line = {t.start[0]: t.string[1:].strip() for t in tokens if not t.line[: t.start[1]].strip()}
        body = ast.parse(source).body[0].body  # the class body
        for node in body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                comments[node.target.id] = _comment_of(node, by_line, own_line)
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in comments.items() if k in names}


def _comment_of(node: ast.AST, by_line: dict[int, str], own_line: dict[int, str]) -> str:
    """A field's comment: at the end of its line, or (for a long field) the comment lines right above it."""
    if node.end_lineno in by_line:
        return by_line[node.end_lineno]
    above, line = [], node.lineno - 1
    while line in own_line:
        above.insert(0, own_line[line])
        line -= 1
    return " ".join(above)


def key_rows(root: type, prefix: str = "") -> list[tuple[str, str, bool]]:
    """``(dotted key, comment, is_group)`` for every key of a schema tree, in field order."""
    rows: list[tuple[str, str, bool]] = []
    comments = field_comments(root)
    for name, hint in _field_hints(root).items():
        key = f"{prefix}{name}"
        group = _is_group(hint)
        rows.append((key, comments.get(name, ""), group))
        if group:
            rows.extend(key_rows(hint, key + "."))
    return rows


def _shown(value) -> str:
    """A default as YAML would write it inline."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in value.items()) + "}"
    return str(value)


def _cell(text: str) -> str:
    """A comment as a Markdown table cell: pipes and angle brackets escaped."""
    return text.replace("|", "&#124;").replace("<", "&lt;").replace(">", "&gt;")


def _verl_key_lists(job: str) -> list[str]:
    """verl's key lists shipped beside job ``job``'s schema: ``verl_<job>_keys.yaml`` (verl's current config) and,
    where verl also has an older layout of the job, ``verl_<job>_legacy_keys.yaml``; the ones that exist."""
    module = importlib.import_module(job_schema(job).__module__)
    folder = os.path.dirname(module.__file__)
    paths = [os.path.join(folder, f"verl_{job}{kind}_keys.yaml") for kind in ("", "_legacy")]
    return [path for path in paths if os.path.exists(path)]


def _resolved_defaults(path: str) -> dict:
    """``{dotted key: verl's default}`` of one key list, interpolations resolved within verl's own tree."""
    with open(path) as f:
        flat = yaml.safe_load(f)
    tree = OmegaConf.create({})
    for key, value in flat.items():
        OmegaConf.update(tree, key, value, force_add=True)
    resolved = OmegaConf.create(OmegaConf.to_container(tree, resolve=True, throw_on_missing=False))
    return {key: _plain(OmegaConf.select(resolved, key, throw_on_missing=False)) for key in flat}


def _plain(value):
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def verl_defaults(job: str) -> dict | None:
    """``{dotted key: verl's default}`` from the key lists shipped beside job ``job``'s schema (None: it ships none):
    verl's current config, and for a key only the legacy layout has, the legacy one's."""
    paths = _verl_key_lists(job)
    if not paths:
        return None
    out: dict = {}
    for path in reversed(paths):  # the current list last: its default wins where both have a key
        out.update(_resolved_defaults(path))
    return out


def _schema_has(root: type, key: str) -> bool:
    """Whether the schema tree ``root`` has ``key``: a field, or any key under a free-form (``dict``) field."""
    hint = root
    for part in key.split("."):
        if _is_free_form(hint):
            return True
        if not _is_group(hint) or part not in _field_hints(hint):
            return False
        hint = _field_hints(hint)[part]
    return True


def verl_default_differences(job: str) -> dict[str, tuple]:
    """``{key: (our default, verl's default)}`` for each key of job ``job`` whose schema default differs from verl's
    (a list of one item equals its item; verl's ``???``, "must be set", equals any value; a key under a free-form
    group that ours leaves empty is null). Keys of verl's that the schema lacks are left out."""
    ours = OmegaConf.create(OmegaConf.to_container(default_config(job), resolve=True))
    out = {}
    for key, theirs in (verl_defaults(job) or {}).items():
        if not _schema_has(job_schema(job), key):
            continue
        mine = _plain(OmegaConf.select(ours, key))
        if mine != theirs and mine != [theirs] and not (theirs == "???" and mine is not None):
            out[key] = (mine, theirs)
    return out


def verl_marks(job: str) -> dict[str, str] | None:
    """``{key: "verl" | "ours" | "exception: why"}`` for a job whose module ships verl's key list beside it."""
    defaults = verl_defaults(job)
    if defaults is None:
        return None
    exceptions = getattr(importlib.import_module(job_schema(job).__module__), "VERL_DEFAULT_EXCEPTIONS", {})
    return {
        key: f"exception: {exceptions[key]}" if key in exceptions else "verl" if key in defaults else "ours"
        for key, _, group in key_rows(job_schema(job))
        if not group
    }


def _with_api_names(comment: str, names: tuple[str, ...]) -> str:
    """A key's comment with its Python API names after it (``"api"`` field metadata, verl.utils.config_dict)."""
    if not names:
        return comment
    return f"{comment}; API: " + ", ".join(f"`{name}`" for name in names)


def render(job: str, command: str) -> str:
    root = job_schema(job)
    api_names = schema_api_names(root)
    defaults = OmegaConf.to_container(default_config(job), resolve=False)
    marks = verl_marks(job)
    out = [f"## `{job}`", "", f"{command}; the schema: `{root.__module__}.{root.__name__}`.", ""]
    if marks is None:
        out += ["| key | default | meaning |", "|---|---|---|"]
    else:
        out += [
            "Default column: *verl*: verl's default; *ours*: a key verl lacks; *exception*: differs from verl's, why.",
            "",
            "| key | default | default is | meaning |",
            "|---|---|---|---|",
        ]
    for key, comment, group in key_rows(root):
        if group:
            out.append(f"| `{key}.*` | |{' |' if marks is not None else ''} {_cell(comment)} |")
            continue
        value = defaults
        for part in key.split("."):
            value = value[part]
        mark = f" {_cell(marks[key])} |" if marks is not None else ""
        out.append(f"| `{key}` | `{_shown(value)}` |{mark} {_cell(_with_api_names(comment, api_names.get(key, ())))} |")
    return "\n".join(out) + "\n"


def reference() -> str:
    head = [
        "# Configuration reference",
        "",
        "Generated from the schemas (`verl/trainer/config/`, `verl/workers/config/`) by",
        "`python -m verl.utils.config_reference > docs/config_reference.md` (a test checks it is current). How to set",
        "keys: [config.md](config.md). `${a.b}` is a default taken from key `a.b`. The defaults are verl's for verl's",
        "keys; the built-in task's tuned values are the `quickstart` recipe (`sft_quickstart` for SFT,",
        "[recipes.md](recipes.md)). *API*: the key's names in the Python API ([python_api.md](python_api.md)):",
        "`DataConfig.*`, `EngineConfig.*` and `OptimConfig.*` are `PPOTrainer`'s argument groups, `model.*` and",
        "`train.*` the dict config's aliases; a name on several keys sets them all. They are the `api` metadata of",
        "the schema's fields.",
        "",
    ]
    return "\n".join(head) + "\n" + "\n".join(render(job, command) for job, command in JOBS)


if __name__ == "__main__":
    print(reference(), end="")
