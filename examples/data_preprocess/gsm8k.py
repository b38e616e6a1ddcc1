"""Convert locally downloaded GSM8K files to verl-format parquet.

Usage::

    python examples/data_preprocess/gsm8k.py --input_dir path/to/gsm8k --local_dir ~/data/gsm8k

``--input_dir`` holds GSM8K's own files: ``train.jsonl`` and ``test.jsonl`` (github.com/openai/
grade-school-math), or the Hugging Face layout ``main/train-00000-of-00001.parquet`` and
``main/test-00000-of-00001.parquet``. Writes ``train.parquet`` and ``test.parquet`` into
``--local_dir``. The conversion itself lives in :mod:`verl.data.tasks.gsm8k`.
"""

import argparse
import os
import sys

from verl.data.tasks.gsm8k import convert_gsm8k_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input_dir", required=True, help="folder with GSM8K's train/test files")
    parser.add_argument("--local_dir", default="~/data/gsm8k", help="output folder (%(default)s)")
    args = parser.parse_args(argv)
    try:
        written = convert_gsm8k_dir(os.path.expanduser(args.input_dir), os.path.expanduser(args.local_dir))
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for split, (path, count) in written.items():
        print(f"{split}: {path} ({count} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
