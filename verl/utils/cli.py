"""Command lines of the config-driven jobs (``main_ppo``, ``main_sft``, ``main_eval``, ``main_generation``).

Every job takes ``key=value`` overrides and ``--config FILE.yaml``; ``--help`` prints its usage and config sections
(``--help SECTION`` lists a section's keys with defaults and meanings), and ``--cfg job`` (Hydra's flag; also
``--print-config``) prints the resolved config as YAML without running. A user's input error ends the program with
one clear line (``error: ...``), not a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from verl.utils.config import job_schema, load_config, select, to_yaml

USER_ERRORS: tuple[type[BaseException], ...] = (FileNotFoundError, KeyError, ValueError)
PRINT_CONFIG = ("--cfg", "--print-config")
REFERENCE = "docs/config_reference.md"
COMMAND_NAME: str | None = None  # set by the ``verl`` command to the subcommand it runs ("verl ppo"), for usage lines


def run_cli(main: Callable[[], Any], extra_errors: tuple[type[BaseException], ...] = ()) -> None:
    """Run ``main()``; bad input (a bad key, value, file or row: ConfigError is a ValueError) exits with ``error: ...``."""
    try:
        main()
    except BrokenPipeError:  # output piped into a reader that stopped (e.g. --help | head)
        sys.stderr.close()
    except USER_ERRORS + extra_errors as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e  # KeyError's str() adds quotes
        sys.exit(f"error: {message}")


def job_config(job: str, argv: Sequence[str] | None, module: str, summary: str) -> Any:
    """The job's loaded config (an instance of its schema class) from ``argv`` (``sys.argv[1:]`` when None); None after printing help or the config
    (``--help [SECTION]``, ``--cfg job``), when there is nothing to run. ``module``: the job's ``python -m`` name."""
    args = list(sys.argv[1:] if argv is None else argv)
    prog = COMMAND_NAME or f"python -m {module}"
    if args and args[0] in ("-h", "--help"):
        print(job_help(job, prog, summary, section=args[1] if len(args) > 1 else None))
        return None
    rest, show = [], False
    for i, arg in enumerate(args):
        if arg in PRINT_CONFIG or arg.startswith(tuple(f"{p}=" for p in PRINT_CONFIG)):
            show = True
        elif not (arg in ("job", "all") and i and args[i - 1] == "--cfg"):  # Hydra's --cfg job / --cfg all
            rest.append(arg)
    if show:
        print(to_yaml(load_config(job, rest)), end="")
        return None
    return load_config(job, rest)


def job_help(job: str, prog: str, summary: str, section: str | None = None) -> str:
    """Usage and config sections of ``job``; with ``section``, that section's keys, defaults and meanings."""
    from verl.utils.config_reference import field_comments, key_rows

    root = job_schema(job)
    rows = key_rows(root)
    if section is not None:
        keys = [r for r in rows if r[0] == section or r[0].startswith(section + ".")]
        if not keys:
            sections = ", ".join(k for k, _, group in rows if group and "." not in k)
            return f"{prog}: no config section or key {section!r}; sections: {sections}"
        defaults = load_config(job)
        lines = [f"{prog}: keys under {section} (default, meaning)", ""]
        for key, comment, group in keys:
            if not group:
                value = select(defaults, key)
                lines.append(f"  {key}={_inline(value)}\n      {comment}")
        return "\n".join(lines)
    comments = field_comments(root)
    lines = [
        f"usage: {prog} [key=value ...] [--config FILE.yaml ...] [--cfg job] [--help [SECTION]]",
        "",
        summary.strip(),
        "",
        f"Config sections (override any key as section.key=value; every key, default and meaning: {REFERENCE}):",
    ]
    for key, comment, group in rows:
        if "." not in key:
            lines.append(f"  {key + ('.*' if group else ''):28s} {comments.get(key, comment)}")
    lines += [
        "",
        f"  --help SECTION    the keys of one section, e.g. {prog} --help {next(k for k, _, g in rows if g)}",
        "  --cfg job         print the resolved config (defaults, --config files and overrides) and exit",
        "  --config FILE     a YAML file of overrides (repeatable; key=value arguments win over it)",
    ]
    return "\n".join(lines)


def _inline(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value
