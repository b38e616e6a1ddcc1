"""How much can RL gain on each learning-suite task? The warm start's greedy accuracy against its sampled pass@k.

    python benchmarks/learning_headroom.py                         # every task's warm start (made by the suite)
    python benchmarks/learning_headroom.py --tasks sub2-30 --k 16   # one task

Outcome-reward RL with a group of ``rollout.n`` samples learns only from prompts where some sample is right and some
is wrong, and in a short budget it mostly sharpens the policy toward answers it can already sample: the greedy
accuracy climbs toward the sampled pass@k (Yue et al. 2025, "Does Reinforcement Learning Really Incentivize
Reasoning Capacity in LLMs Beyond the Base Model?"). So per task this prints, on the suite's held-out rows:

- greedy: the held-out accuracy the suite reports (the runs' baseline);
- train greedy: the same on the first 400 training prompts, which the warm start's SFT saw and RL samples from (a
  larger model remembers more of them; its reward then scores memorized answers more than held-out skill);
- sampled: the mean accuracy of single samples at temperature 1 (what the training reward measures);
- pass@1, 4, 8, 16: the share of problems with at least one right answer among the first k samples;
- mixed@8: the share of problems whose first 8 samples are neither all right nor all wrong: the groups that carry a
  GRPO signal at ``rollout.n=8``.

Sampling is the HF sampler's (temperature 1, full vocabulary), seeded: the same seed gives the same table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (ROOT, os.path.join(ROOT, "benchmarks")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import learning_suite as suite  # noqa: E402

PASS_KS = (1, 4, 8, 16)


def task_headroom(task: suite.SuiteTask, model_dir: str, k: int, seed: int, batch: int = 50) -> dict:
    """Greedy accuracy, sampled accuracy, pass@k and mixed@8 of ``model_dir`` on the task's held-out rows."""
    import torch

    from verl.utils.dataset.parquet import get_nested, prompt_to_messages, render_prompt
    from verl.utils.evaluation import score_to_float
    from verl.utils.model import load_causal_lm, load_tokenizer
    from verl.utils.reward_score import default_compute_score

    model, tokenizer = load_causal_lm(model_dir), load_tokenizer(model_dir)
    model.eval()
    rows = suite.held_out_rows(task)
    greedy = suite.held_out_accuracy(model, tokenizer, rows, task)
    train_greedy = suite.held_out_accuracy(model, tokenizer, suite.train_rows(task)[: len(rows)], task)
    prompts = [render_prompt(tokenizer, prompt_to_messages(get_nested(r, "prompt"), r), r.where) for r in rows]
    tokenizer.padding_side = "left"
    torch.manual_seed(seed)
    right: list[list[bool]] = []
    with torch.no_grad():
        for start in range(0, len(rows), batch):
            enc = tokenizer(prompts[start : start + batch], return_tensors="pt", padding=True, add_special_tokens=False)
            out = model.generate(
                **enc,
                max_new_tokens=task.response_length,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                num_return_sequences=k,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            for i, row in enumerate(rows[start : start + batch]):
                truth, source = get_nested(row, "reward_model.ground_truth"), row.data.get("data_source")
                samples = texts[i * k : (i + 1) * k]
                scores = [default_compute_score(source, t, truth, row.data.get("extra_info")) for t in samples]
                right.append([score_to_float(s) >= 1.0 for s in scores])
    n = len(right)
    return {
        "task": task.name,
        "greedy": greedy,
        "train_greedy": train_greedy,
        "sampled": sum(map(sum, right)) / (n * k),
        "pass": {j: sum(any(r[:j]) for r in right) / n for j in PASS_KS if j <= k},
        "mixed@8": sum(0 < sum(r[:8]) < len(r[:8]) for r in right) / n,
        "rows": n,
        "k": k,
    }


def report(results: list[dict]) -> str:
    ks = [j for j in PASS_KS if j <= min(r["k"] for r in results)]
    lines = ["| task | greedy | train greedy | sampled | " + " | ".join(f"pass@{j}" for j in ks) + " | mixed@8 |"]
    lines.append("|" + "---|" * (5 + len(ks)))
    for r in results:
        cells = [
            f"{100 * r['greedy']:.1f}",
            f"{100 * r['train_greedy']:.1f}",
            f"{100 * r['sampled']:.1f}",
            *(f"{100 * r['pass'][j]:.1f}" for j in ks),
        ]
        lines.append(f"| {r['task']} | " + " | ".join(cells) + f" | {100 * r['mixed@8']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default=None, help="comma-separated suite tasks (default: all)")
    p.add_argument("--k", type=int, default=16, help="samples per problem (pass@k up to k)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--work-dir", default=os.path.join(ROOT, "outputs", "learning_suite"))
    p.add_argument("--model", default=None, help="score this model directory instead of the task's warm start")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from verl.utils.model import resolve_model_path

    results = []
    for task in suite.get_tasks(args.tasks):
        model = (
            resolve_model_path(args.model)
            if args.model
            else suite.warm_start(task, os.path.abspath(args.work_dir), args.threads)["model"]
        )
        results.append(task_headroom(task, model, args.k, args.seed))
        print(json.dumps(results[-1]), flush=True)
    print(report(results))
    return results


if __name__ == "__main__":
    main()
