"""The key reference of each job's YAML tree, generated from the YAML itself (keys, defaults and the comments beside
them), so the docs cannot lag the code: ``tests/utils/test_config_reference.py`` checks that
``docs/config_reference.md`` is what this module writes.

    python -m verl.utils.config_reference > docs/config_reference.md
"""

from __future__ import annotations

import os
import re

from verl.utils.config import CONFIG_DIR, load_yaml

JOBS = (
    ("ppo_trainer", "`python -m verl.trainer.main_ppo`, the tuner's trials and the Python API"),
    (
        "ported_verl_keys",
        "merged into `ppo_trainer.yaml`: keys of public verl accepted so that ported scripts run (most change nothing "
        'here; docs/config.md, "Porting a verl script")',
    ),
    ("sft_trainer", "`python -m verl.trainer.main_sft`"),
    (
        "ported_verl_sft_keys",
        "merged into `sft_trainer.yaml`: keys of public verl's SFT trainer accepted so that ported scripts run "
        '(docs/sft.md, "Porting a verl SFT script")',
    ),
    ("evaluation", "`python -m verl.trainer.main_eval`"),
    ("generation", "`python -m verl.trainer.main_generation`"),
)

_KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w]*):(?P<rest>.*)$")


def yaml_key_comments(path: str) -> list[tuple[str, str, str]]:
    """``(dotted key, default as written, comment)`` for every key of a block-style YAML file, in file order.
    Mapping keys (``section:``) are listed too, with an empty default."""
    rows: list[tuple[str, str, str]] = []
    stack: list[tuple[int, str]] = []
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            match = _KEY_LINE.match(line)
            if not match:
                continue
            indent, key, rest = len(match["indent"]), match["key"], match["rest"]
            while stack and stack[-1][0] >= indent:
                stack.pop()
            value, _, comment = rest.partition(" #")
            dotted = ".".join([*(k for _, k in stack), key])
            rows.append((dotted, value.strip(), comment.strip()))
            if not value.strip():
                stack.append((indent, key))
    return rows


def leaf_keys(tree: dict, prefix: str = "") -> list[str]:
    """Dotted keys of the leaves of a parsed YAML mapping (an empty mapping counts as a leaf)."""
    keys = []
    for k, v in tree.items():
        if isinstance(v, dict) and v:
            keys.extend(leaf_keys(v, f"{prefix}{k}."))
        else:
            keys.append(f"{prefix}{k}")
    return keys


def _cell(text: str) -> str:
    """A comment as a Markdown table cell: pipes and angle brackets escaped."""
    return text.replace("|", "&#124;").replace("<", "&lt;").replace(">", "&gt;")


def render(job: str, command: str) -> str:
    path = os.path.join(CONFIG_DIR, f"{job}.yaml")
    rows = yaml_key_comments(path)
    leaves = set(leaf_keys(load_yaml(path)))
    out = [f"## `{job}.yaml`", "", f"{command}; the file: `verl/trainer/config/{job}.yaml`.", ""]
    out += ["| key | default | meaning |", "|---|---|---|"]
    for key, default, comment in rows:
        if key in leaves:
            shown = f"`{default}`" if default else ""
            out.append(f"| `{key}` | {shown} | {_cell(comment)} |")
        elif comment:  # a section with a comment: a row of its own
            out.append(f"| `{key}.*` | | {_cell(comment)} |")
    return "\n".join(out) + "\n"


def reference() -> str:
    head = [
        "# Configuration reference",
        "",
        "Generated from the YAML trees by `python -m verl.utils.config_reference > docs/config_reference.md` (a test",
        "checks it is current). How to set keys: [config.md](config.md). `${a.b}` is a default taken from key `a.b`.",
        "",
    ]
    return "\n".join(head) + "\n" + "\n".join(render(job, command) for job, command in JOBS)


if __name__ == "__main__":
    print(reference(), end="")
