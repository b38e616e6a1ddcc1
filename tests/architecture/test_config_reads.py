"""The job config is read as attributes of typed sections, never dict-style (docs/architecture.md).

The job config is a tree of typed dataclasses (``verl/trainer/config``, ``verl/workers/config``). A function that
may receive a section from ported user code (a dict, an untyped ``DictConfig``, None) converts it once, at its
boundary, with ``verl.utils.config.as_section``, and reads attributes after that; the defaults are the schema's. A
``.get(key, default)`` on a section duplicates a default the schema already has, and the two drift apart (DPPO's
cap once read 20 where the schema says 3).

This test parses every module of ``verl/`` and fails on:

1. any mention of ``_cfg_get`` (the dict-or-object reader the algorithm core used);
2. a ``.get(...)`` call whose receiver looks like job config.

How it tells job config from other mappings: by the receiver's name, the expression ``.get`` is called on. A
receiver is job config when its name, or any name in its attribute chain, is ``config``, ``cfg``, ``conf`` or
``section``, or ends in ``_config``, ``_cfg`` or ``_conf`` (``config``, ``self.config``, ``config.data``,
``self.actor_config.optim``, ``section``). Code here names sections that way, and names other mappings for what
they hold (``row.data``, ``kwargs``, ``info``, ``extra``). A free-form ``dict[str, Any]`` field of the schema (e.g.
``fsdp_config.wrap_policy``, ``reward_kwargs``) is a mapping by the schema's own type: convert it to a dict once and
read it under a name that says so (``policy = dict(config)``). ``BaseConfig.get`` itself is a definition, not a
call, and is not matched.

``ALLOWED`` lists the receivers that are not job config, each with its reason. Keep it short: a new entry needs a
receiver that really holds something else.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "verl"

JOB_CONFIG_NAME = re.compile(r"^(config|cfg|conf|section)$|_(config|cfg|conf)$")

# (path under verl/ or a folder ending in "/", receiver) -> why it is not job config
ALLOWED: dict[tuple[str, str], str] = {
    ("planner/shapes.py", "config"): "a model's HF config.json, as a dict",
    ("experimental/openai_server/served_model.py", "config"): "a model's HF config.json, as a dict",
    ("model_merger/__init__.py", "config"): "a checkpoint's HF config.json, as a dict",
    ("tools/", "self.config"): "a tool's own keys from the tools YAML (verl's tool_config), free-form per tool",
    ("tools/utils/tool_registry.py", "config"): "one entry of the tools YAML, before a tool class is chosen",
    ("interactions/base.py", "config"): "an interaction's own keys from the interactions YAML, free-form",
    ("protocol_utils.py", "cls._config"): "DataProto's class-level switches (auto-padding), not a config section",
    (
        "utils/dataset/multiturn_sft_dataset.py",
        "config",
    ): "verl's dataset settings (pad_mode, ignore_input_ids_mismatch, seed; max_length 1024) that the SFT job's "
    "data section does not type yet: typing them means new SFT schema keys and main_sft changes",
}


def _chain(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name; None for anything else (a call, a subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _allowed(path: str, receiver: str) -> bool:
    return any(
        receiver == allowed_receiver and (path == place or (place.endswith("/") and path.startswith(place)))
        for place, allowed_receiver in ALLOWED
    )


def _mentions_cfg_get(node: ast.AST) -> bool:
    """A definition, an import or a use of ``_cfg_get``."""
    if isinstance(node, ast.Name):
        return node.id == "_cfg_get"
    if isinstance(node, ast.alias):
        return "_cfg_get" in (node.name.rsplit(".", 1)[-1], node.asname)
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "_cfg_get"


def config_reads(source: str, path: str) -> list[str]:
    """``path:line: what`` for each ``_cfg_get`` and each ``.get(`` on a job-config receiver not in ``ALLOWED``,
    in line order."""
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if _mentions_cfg_get(node):
            found.append((node.lineno, f"{path}:{node.lineno}: _cfg_get: read the typed section's attribute"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            receiver = _chain(node.func.value)
            if receiver is None or not any(JOB_CONFIG_NAME.search(part) for part in receiver.split(".")):
                continue
            if not _allowed(path, receiver):
                message = f"{receiver}.get(...) on job config: read the typed section's attribute"
                found.append((node.lineno, f"{path}:{node.lineno}: {message}"))
    return [text for _, text in sorted(found)]


def test_job_config_is_read_as_attributes():
    found = []
    for module in sorted(PACKAGE.rglob("*.py")):
        found += config_reads(module.read_text(), module.relative_to(PACKAGE).as_posix())
    assert not found, "\n".join(found)


def test_the_allowlist_has_no_stale_entry():
    """Each entry still matches a read (a fixed file leaves the list)."""
    used = set()
    for module in sorted(PACKAGE.rglob("*.py")):
        path = module.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                receiver = _chain(node.func.value)
                used |= {
                    (place, allowed)
                    for place, allowed in ALLOWED
                    if receiver == allowed and (path == place or (place.endswith("/") and path.startswith(place)))
                }
    assert used == set(ALLOWED), f"stale entries: {set(ALLOWED) - used}"


def test_the_guard_catches_a_synthetic_offender():
    offender = """
from verl.core_algos._config import _cfg_get

def loss(config, section, self_like, kwargs, row):
    cap = _cfg_get(config, "clip_ratio_c", 20.0)
    a = config.get("clip_ratio", 0.2)
    b = config.actor_rollout_ref.get("rollout")
    c = self_like.actor_config.get("optim")
    d = section.get("name")
    fine = kwargs.get("x"), row.data.get("y"), {"k": 1}.get("k")
    return cap, a, b, c, d, fine
"""
    found = config_reads(offender, "trainer/offender.py")
    assert [line.split(": ")[1].split("(")[0] for line in found] == [
        "_cfg_get",  # the import
        "_cfg_get",  # the call
        "config.get",
        "config.actor_rollout_ref.get",
        "self_like.actor_config.get",
        "section.get",
    ], found
    # an allowlisted receiver in its own file passes, the same receiver elsewhere does not
    hf = "def shapes(config):\n    return config.get('text_config')\n"
    assert config_reads(hf, "planner/shapes.py") == []
    assert len(config_reads(hf, "planner/other.py")) == 1
