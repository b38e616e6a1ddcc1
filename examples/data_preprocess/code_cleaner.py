"""Clean a code data set and save it as verl parquet (the guide's code_cleaner step).

    python examples/data_preprocess/code_cleaner.py --input data/code_feedback.jsonl --output data/processed_code_data \
        --tokenizer builtin://tiny-qwen2 --max_seq_length 2048 --validate --test_fraction 0.1

Reads JSON Lines in APPS/TACO, HumanEval, MBPP or LeetCode style (or verl rows), converts each row, drops duplicates,
rows too long for ``--max_seq_length`` tokens and, with ``--validate``, rows whose reference solution does not parse
or fails its own tests in the sandbox; prints what was kept and dropped (by reason, with an example each) and writes
``train.parquet`` / ``test.parquet`` / ``stats.json``. Train on the result with
``data.train_files=<output>/train.parquet``.
"""

from __future__ import annotations

import argparse
import json

from verl.utils.data import CodeFeedbackDataset


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", required=True, help="JSON Lines (or a JSON list) of code problems")
    p.add_argument("--output", required=True, help="directory for train.parquet, test.parquet, stats.json")
    p.add_argument("--tokenizer", default=None, help="model directory whose tokenizer measures lengths")
    p.add_argument("--max_seq_length", type=int, default=2048)
    p.add_argument("--validate", action="store_true", help="run each reference solution against its tests")
    p.add_argument("--reward_scaling", action="store_true", help="scale a 'score' field to [-1, 1]")
    p.add_argument("--test_fraction", type=float, default=0.0)
    args = p.parse_args(argv)
    dataset = CodeFeedbackDataset.load_from_json(args.input)
    processed = dataset.process(
        max_seq_length=args.max_seq_length,
        tokenizer_path=args.tokenizer,
        reward_scaling=args.reward_scaling,
        validate=args.validate,
    )
    written = processed.save(args.output, test_fraction=args.test_fraction)
    print(json.dumps(processed.stats, indent=1))
    print("wrote " + ", ".join(f"{name}: {path}" for name, path in written.items()))
    return processed.stats


if __name__ == "__main__":
    main()
