"""KV-cache sampling that retires finished sequences, against keeping them in the batch: rollout time, A B A B.

    python benchmarks/rollout_retire.py                       # shipped warm start (short answers) + random-init model
    python benchmarks/rollout_retire.py --reps 5

``HFRollout(retire_finished=True)`` (the default) drops a row from the decode batch (and its KV cache) once it has
emitted EOS; ``retire_finished=False`` is the plain path that keeps decoding finished rows as padding until the
longest one ends. Both produce the same tokens (tests/workers/rollout). The gain depends on how early responses end:
the shipped warm start answers in ~20 tokens of a 64-token budget, a random-init model rarely emits EOS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def main(argv: list[str] | None = None) -> None:
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_prompts
    from verl.utils.model import load_causal_lm, load_tokenizer
    from verl.workers.rollout.hf_rollout import HFRollout

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--models", nargs="+", default=["builtin://tiny-qwen2-arith-sft", "outputs/bench/tiny-qwen2-h256-l4-s1"]
    )
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--max-response-length", type=int, default=64)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args(argv)
    print("| model | mean response length | keep finished rows (s) | retire them (s) | speed-up |")
    print("|---|---|---|---|---|")
    for path in a.models:
        if not path.startswith("builtin://") and not os.path.isdir(path):
            print(f"| {path} | (missing: run benchmarks/trl_vs_verl.py first) | | | |")
            continue
        tok = load_tokenizer(path)
        model = load_causal_lm(path)
        ds = RLHFDataset("builtin://arithmetic/train", tok, max_prompt_length=64)
        prompts = collate_prompts([ds[i] for i in range(a.prompts)], tok.pad_token_id)
        gen = DataProto.from_dict(dict(prompts.batch)).repeat(a.n, interleave=True)
        cfg = {"response_length": a.max_response_length, "temperature": 1.0}
        times: dict[bool, list[float]] = {False: [], True: []}
        lengths = []
        for _ in range(a.reps):
            for retire in (False, True):
                rollout = HFRollout(model, cfg, tok.pad_token_id, tok.eos_token_id, seed=1, retire_finished=retire)
                t = time.perf_counter()
                out = rollout.generate_sequences(gen)
                times[retire].append(time.perf_counter() - t)
                lengths.append(out.batch["response_mask"].sum(-1).float().mean().item())
        keep, ret = statistics.median(times[False]), statistics.median(times[True])
        print(f"| {path} | {statistics.fmean(lengths):.1f} | {keep:.2f} | {ret:.2f} | {keep / ret:.2f}x |")


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
