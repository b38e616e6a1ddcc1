"""Evaluate a code-generation model: syntax rate, execution success, test pass rate, pass@1 and pass@k, as JSON.

    python examples/evaluation/code_generation_eval.py --model_path outputs/verl-ppo/code/global_step_100/actor/huggingface \
        --test_set data/processed_code_data/test.parquet --output results/code_gen_eval.json
    python examples/evaluation/code_generation_eval.py --model_path DIR --test_set data/code_test_cases.jsonl \
        --n 10 --k 1,5,10 --temperature 0.8 --output results/code_gen_eval.json

``--test_set``: a verl parquet of code rows (``examples/data_preprocess/code_cleaner.py``'s output), a built-in task
spec such as ``builtin://code_functions/test?size=100``, or JSON Lines in any format it reads (converted the same way). ``--n 1`` (the default) decodes greedily, as the trainer's validation does,
so its pass@1 is the trainer's held-out score for the same rows and lengths; ``--n`` > 1 samples at
``--temperature``. Generation is ``python -m verl.trainer.main_generation``'s; the programs run in the sandbox
(docs/code_rl.md). The metrics: ``verl.utils.reward_score.code_eval``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from verl.sandbox.local import ISOLATIONS, resolve_isolation, set_default_isolation
from verl.trainer.main_generation import generate_responses
from verl.utils.config import load_config
from verl.utils.reward_score.code_eval import evaluate_code_responses


def as_parquet(test_set: str, workdir: str) -> str:
    """The test set as a verl parquet: a parquet is used as it is, a built-in task spec (``builtin://code_functions/test``,
    as the trainer's ``data.val_files`` takes it) is generated; JSON Lines go through CodeFeedbackDataset."""
    if test_set.endswith(".parquet"):
        return test_set
    if test_set.startswith("builtin://"):
        from verl.data.tasks import resolve_data_files

        return resolve_data_files(test_set)
    from verl.utils.data import CodeFeedbackDataset

    processed = CodeFeedbackDataset.load_from_json(test_set).process(split="test")
    print(f"test set: {json.dumps({k: v for k, v in processed.stats.items() if k != 'examples'})}")
    return processed.save(workdir)["train"]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_path", required=True)
    p.add_argument("--test_set", required=True, help="verl parquet or JSON Lines of code problems with tests")
    p.add_argument("--output", required=True, help="JSON file for the metrics")
    p.add_argument("--n", type=int, default=1, help="samples per problem (1: greedy)")
    p.add_argument("--k", default="1", help="comma-separated k of pass@k (each <= n)")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--max_new_tokens", type=int, default=512)
    p.add_argument("--max_prompt_length", type=int, default=2048)
    p.add_argument("--case_timeout", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--isolation",
        default=None,
        choices=ISOLATIONS,
        help="bwrap (default): the programs run in bubblewrap, or the script stops at start where it cannot; "
        "rlimit: resource limits only (the programs can read this machine's files and reach its network)",
    )
    args = p.parse_args(argv)
    # resolved before any model loads: no bubblewrap and no --isolation rlimit stops here, with the fixes
    set_default_isolation(args.isolation, "--isolation")
    resolve_isolation(opt_in="--isolation rlimit")
    ks = sorted({int(k) for k in args.k.split(",")})
    with tempfile.TemporaryDirectory() as work:
        data = as_parquet(args.test_set, os.path.join(work, "data"))
        sampling = (
            ["rollout.do_sample=false"]
            if args.n == 1
            else ["rollout.do_sample=true", f"rollout.temperature={args.temperature}"]
        )
        config = load_config("generation", [
            f"model.path={args.model_path}", f"data.path={data}", f"data.n_samples={args.n}",
            f"data.output_path={os.path.join(work, 'responses.parquet')}", f"rollout.response_length={args.max_new_tokens}",
            f"rollout.prompt_length={args.max_prompt_length}", f"seed={args.seed}", *sampling,
        ])  # fmt: skip
        summary = generate_responses(config)
        import pyarrow.parquet as pq

        rows = pq.read_table(summary["output_path"]).to_pylist()
    result = evaluate_code_responses(rows, [r["responses"] for r in rows], ks, args.case_timeout)
    result.update(model_path=args.model_path, test_set=args.test_set, n=args.n, k=ks)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)
    shown = {k: v for k, v in result.items() if k != "per_problem"}
    print(json.dumps(shown, indent=1))
    return result


if __name__ == "__main__":
    from verl.sandbox import SandboxUnavailable
    from verl.utils.cli import run_cli

    run_cli(main, extra_errors=(SandboxUnavailable,))
