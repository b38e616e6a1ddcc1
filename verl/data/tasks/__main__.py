"""Write a built-in task's train/test parquet files.

Examples::

    python -m verl.data.tasks arithmetic --out-dir data/arith --ops +,- --max-digits 3
    python -m verl.data.tasks countdown --out-dir data/countdown --train-size 2000 --max-number 30
"""

from __future__ import annotations

import argparse
import sys

from verl.data.tasks import (
    DEFAULT_SEED,
    DEFAULT_TEST_FRACTION,
    DEFAULT_TEST_SIZE,
    DEFAULT_TRAIN_SIZE,
    TASKS,
    make_task_dataset,
)


def build_parser() -> argparse.ArgumentParser:
    """One sub-command per task, each with the common options plus the task's own."""
    parser = argparse.ArgumentParser(
        prog="python -m verl.data.tasks", description="Generate verl-format parquet for a built-in task."
    )
    sub = parser.add_subparsers(dest="task", required=True, metavar="TASK")
    for spec in TASKS.values():
        p = sub.add_parser(spec.name, help=spec.description, description=spec.description)
        p.add_argument("--out-dir", required=True, help="folder to write train.parquet and test.parquet into")
        p.add_argument("--train-size", type=int, default=DEFAULT_TRAIN_SIZE, help="train rows (%(default)s)")
        p.add_argument("--test-size", type=int, default=DEFAULT_TEST_SIZE, help="test rows (%(default)s)")
        p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed (%(default)s)")
        p.add_argument(
            "--test-fraction",
            type=float,
            default=DEFAULT_TEST_FRACTION,
            help="share of the problem space held out for test (%(default)s)",
        )
        for param in spec.params:
            default = ",".join(param.default) if isinstance(param.default, tuple) else param.default
            p.add_argument(
                param.cli_flag,
                dest=param.name,
                type=_argparse_type(param.parse),
                default=param.default,
                help=f"{param.help} ({default})",
            )
    return parser


def _argparse_type(parse):
    """``parse`` whose ValueError reaches the user: argparse replaces a ValueError's text with "invalid value"."""

    def convert(text: str):
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    spec = TASKS[args.task]
    options = {param.name: getattr(args, param.name) for param in spec.params}
    try:
        paths = make_task_dataset(
            spec.name,
            args.out_dir,
            train_size=args.train_size,
            test_size=args.test_size,
            seed=args.seed,
            test_fraction=args.test_fraction,
            **options,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sizes = {"train": args.train_size, "test": args.test_size}
    for split, path in paths.items():
        print(f"{split}: {path} ({sizes[split]} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
