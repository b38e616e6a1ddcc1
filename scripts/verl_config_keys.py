"""Which of public verl's PPO config keys does ``load_config("ppo_trainer")`` accept? Measured, not claimed.

    # 1. the key list of one verl YAML file (every leaf key path with its default), written as a fixture
    git -C <verl clone> show <commit>:verl/trainer/config/ppo_trainer.yaml \\
        | python scripts/verl_config_keys.py extract --source "volcengine/verl@<commit>:<path>" - > FIXTURE.yaml
    # 2. the share of those keys that load, each given alone as ``key=value`` with verl's default
    python scripts/verl_config_keys.py check FIXTURE.yaml [FIXTURE2.yaml ...] [--verbose]

A leaf is a key whose value is not a non-empty mapping (a list, a scalar, null, ``{}``). Hydra's ``_target_`` class
paths are left out: ``load_config`` accepts and ignores them (the schema already says which dataclass a section is).
The fixtures of ``tests/trainer/config/test_ppo_trainer_verl_keys.py`` are made with step 1; ``check`` exits 1 when a
key is rejected, printing it and the error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from typing import Any

import yaml


def leaf_keys(tree: dict, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted key, value)`` for every leaf of a nested mapping, in file order; ``_target_`` entries skipped."""
    for key, value in tree.items():
        if key == "_target_":
            continue
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from leaf_keys(value, path + ".")
        else:
            yield path, value


def read_yaml(text: str) -> dict:
    """A YAML file's mapping as hydra reads it (OmegaConf's loader: ``1e-5`` is a number, not a string), with its
    ``${...}`` interpolations left as text."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.create(text or "{}"), resolve=False)


def compose(text: str, groups: dict[str, str]) -> dict:
    """A config file with its hydra defaults list applied: each ``groups`` entry (section name -> that group's YAML
    text) placed under its section, the file's own keys merged over them (``_self_`` last), ``defaults`` dropped."""
    from omegaconf import OmegaConf

    own = read_yaml(text)
    own.pop("defaults", None)
    sections = OmegaConf.create({name: read_yaml(group) for name, group in groups.items()})
    return OmegaConf.to_container(OmegaConf.merge(sections, OmegaConf.create(own)), resolve=False)


def extract(text: str, source: str, groups: dict[str, str] | None = None) -> str:
    """A fixture: a header naming the source and the command, then ``key: default`` per leaf (a flat YAML mapping).
    ``groups`` (section -> YAML text of the group its defaults list names) composes the file first."""
    flat = dict(leaf_keys(compose(text, groups or {})))
    composed = f", its defaults list ({', '.join(groups)}) composed," if groups else ""
    option = " --group <section>=<group file> ..." if groups else ""
    head = [
        f"# Every leaf key of {source}{composed} with its default ({len(flat)} keys; hydra's _target_ class paths "
        "left out).",
        f"# Generated, do not edit: git show <commit>:<path> | python scripts/verl_config_keys.py extract --source "
        f"'<source>'{option} -",
    ]
    body = yaml.safe_dump(flat, sort_keys=False, default_flow_style=None, width=1000, allow_unicode=True)
    return "\n".join(head) + "\n" + body


def as_override(key: str, value: Any) -> str:
    """``key=value`` as on a command line, the value written so that it parses back to itself (``'true'`` stays a
    string, ``[]`` a list, ``null`` null)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    return f"{key}={text}"


def rejected(fixture: dict[str, Any]) -> list[tuple[str, str]]:
    """``(key, error)`` for each key that ``load_config("ppo_trainer", ["key=value"])`` rejects."""
    from verl.utils.config import ConfigError, load_config

    out = []
    for key, value in fixture.items():
        try:
            load_config("ppo_trainer", [as_override(key, value)])
        except ConfigError as e:
            out.append((key, str(e)))
    return out


def load_fixture(path: str) -> dict[str, Any]:
    with open(path) as f:
        return yaml.safe_load(f)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract", help="print a fixture of a verl YAML file's leaf keys")
    ex.add_argument("yaml", help="the YAML file, or - for stdin")
    ex.add_argument("--source", required=True, help="where the file comes from (named in the fixture's header)")
    ex.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="SECTION=FILE",
        help="a group of the file's defaults list (e.g. optim=optim/fsdp.yaml), composed under SECTION; repeatable",
    )
    ch = sub.add_parser("check", help="the share of a fixture's keys that load_config('ppo_trainer') accepts")
    ch.add_argument("fixtures", nargs="+")
    ch.add_argument("--verbose", action="store_true", help="print every rejected key with its error")
    args = parser.parse_args(argv)
    if args.command == "extract":
        text = sys.stdin.read() if args.yaml == "-" else open(args.yaml).read()
        groups = {}
        for spec in args.group:
            section, _, path = spec.partition("=")
            with open(path) as f:
                groups[section] = f.read()
        sys.stdout.write(extract(text, args.source, groups))
        return 0
    logging.disable(logging.WARNING)  # a ported key's warning is not a rejection
    failed = False
    for path in args.fixtures:
        fixture = load_fixture(path)
        bad = rejected(fixture)
        ok = len(fixture) - len(bad)
        print(f"{path}: {ok}/{len(fixture)} keys accepted ({100 * ok / len(fixture):.1f}%)")
        for key, error in bad if args.verbose else bad[:5]:
            print(f"  rejected {key}: {error.splitlines()[0]}")
        if len(bad) > 5 and not args.verbose:
            print(f"  ... and {len(bad) - 5} more (--verbose lists them)")
        failed = failed or bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
