"""The cost of the fixed-order gather in the shared-prompt training pass (``verl/utils/shared_prefix.py``).

    python benchmarks/deterministic_gather.py            # the default job's shapes, 2 threads

Each training micro-batch gathers every distinct prompt's keys/values per layer to its rows, and the prompts' last
logits to their rows; the backward adds the rows' gradients back. Advanced indexing (``k[rows]``) does that with
atomic adds over the intra-op threads, in a varying order (different bits from run to run); ``index_select`` adds
them in index order. Side by side in one run, interleaved: forward + backward time of each (median of repeats), and
how many of the repeats gave gradient bits different from the first.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def gather_case(kind: str, source: torch.Tensor, index: torch.Tensor, grad: torch.Tensor) -> tuple[float, torch.Tensor]:
    source.grad = None
    start = time.perf_counter()
    out = source[index] if kind == "advanced index" else source.index_select(0, index)
    out.backward(grad)
    return time.perf_counter() - start, source.grad.clone()


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=200)
    # the default job: 16 prompts x 8 samples per mini-batch, 2 kv heads of 32, ~35 prompt tokens, 259 tokens
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=35)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    rows = args.prompts * args.n
    index = torch.arange(args.prompts).repeat_interleave(args.n)[torch.randperm(rows, generator=g)]
    cases = {
        "keys/values of a layer": (args.prompts, 2, args.prompt_len, 32),
        "first-token logits": (args.prompts, 259),
    }
    report = {}
    for label, shape in cases.items():
        source = torch.randn(shape, generator=g).requires_grad_(True)
        grad = torch.randn((rows, *shape[1:]), generator=g)
        times: dict[str, list[float]] = {"advanced index": [], "index_select": []}
        firsts: dict[str, torch.Tensor] = {}
        differing = dict.fromkeys(times, 0)
        for _ in range(args.repeats):
            for kind in times:  # interleaved: both see the same machine state
                seconds, grad_out = gather_case(kind, source, index, grad)
                times[kind].append(seconds)
                first = firsts.setdefault(kind, grad_out)
                differing[kind] += int(not torch.equal(first, grad_out))
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        report[label] = {"median_us": med, "differing": differing}
        print(
            f"{label} {tuple(shape)} gathered to {rows} rows, {args.threads} threads, {args.repeats} repeats: "
            f"advanced index {med['advanced index']:.0f} us ({differing['advanced index']} differing), "
            f"index_select {med['index_select']:.0f} us ({differing['index_select']} differing), "
            f"ratio {med['index_select'] / med['advanced index']:.2f}"
        )
    return report


if __name__ == "__main__":
    main()
