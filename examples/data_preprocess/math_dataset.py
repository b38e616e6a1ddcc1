"""Convert locally downloaded MATH files to verl-format parquet.

Usage::

    python examples/data_preprocess/math_dataset.py --input_dir path/to/MATH --local_dir ~/data/math

``--input_dir`` holds MATH's own files: the original release (``train/<subject>/<id>.json``,
``test/<subject>/<id>.json``), or one file per split with ``problem`` and ``solution`` columns
(``train.jsonl`` / ``test-00000-of-00001.parquet``, as DigitalLearningGmbH/MATH-lighteval ships), or MATH-500's
``test.jsonl`` (``problem`` and ``answer``). Writes ``train.parquet`` (when there is a train split) and
``test.parquet`` into ``--local_dir``; their ``data_source`` is scored by the boxed-answer rule
(``verl.utils.reward_score.math``). The conversion itself lives in :mod:`verl.data.tasks.math_dataset`.
"""

import sys

from verl.data.tasks import run_converter
from verl.data.tasks.math_dataset import convert_math_dir


def main(argv: list[str] | None = None) -> int:
    return run_converter(convert_math_dir, argv, __doc__, "~/data/math", "folder with MATH's train/test files")


if __name__ == "__main__":
    sys.exit(main())
