"""Convert locally downloaded GSM8K files to verl-format parquet.

Usage::

    python examples/data_preprocess/gsm8k.py --input_dir path/to/gsm8k --local_dir ~/data/gsm8k

``--input_dir`` holds GSM8K's own files: ``train.jsonl`` and ``test.jsonl`` (github.com/openai/
grade-school-math), or the Hugging Face layout ``main/train-00000-of-00001.parquet`` and
``main/test-00000-of-00001.parquet``. Writes ``train.parquet`` and ``test.parquet`` into
``--local_dir``. The conversion itself lives in :mod:`verl.data.tasks.gsm8k`.
"""

import sys

from verl.data.tasks import run_converter
from verl.data.tasks.gsm8k import convert_gsm8k_dir


def main(argv: list[str] | None = None) -> int:
    return run_converter(convert_gsm8k_dir, argv, __doc__, "~/data/gsm8k", "folder with GSM8K's train/test files")


if __name__ == "__main__":
    sys.exit(main())
