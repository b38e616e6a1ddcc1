"""torch.compile (inductor, CPU) of the training forward/backward against eager, side by side: is it a lever?

    python benchmarks/torch_compile_train.py                   # the TRL benchmark's model shape, 2 threads
    python benchmarks/torch_compile_train.py --reps 8 --threads 1

The workload is one policy forward + backward of the benchmark model (random-init Qwen2, hidden 256, 4 layers) on
``--rows`` responses whose length varies from pass to pass (as the real update's does: ``dynamic=True`` compiles one
graph for all of them). Eager and compiled passes alternate (A B A B); the report gives the one-off compile time,
the median pass of each and their ratio. The model and inputs are the same for both (same seed), and the test
(`tests/benchmarks/test_benchmarks.py`) checks the compiled loss equals the eager one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def build_model(hidden: int, layers: int, seed: int) -> torch.nn.Module:
    from verl.models.tiny import TinyModelConfig, save_tiny_model
    from verl.utils.model import load_causal_lm

    path = save_tiny_model(
        tempfile.mkdtemp(prefix="compile-bench-"),
        TinyModelConfig(hidden_size=hidden, num_layers=layers, intermediate_size=4 * hidden, seed=seed),
    )
    return load_causal_lm(path)


def one_pass(module: torch.nn.Module, ids: torch.Tensor) -> float:
    """Forward + backward of the mean next-token log-likelihood; returns the loss."""
    logits = module(input_ids=ids).logits.float()
    loss = -torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).mean()
    loss.backward()
    return float(loss.detach())


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--rows", type=int, default=115)
    p.add_argument("--lengths", default="63,61,64,58,63,62", help="sequence length of each pass, cycled")
    p.add_argument("--reps", type=int, default=6, help="timed passes of each side")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    from verl.utils.cpu_malloc import retain_freed_memory

    retain_freed_memory()
    eager = build_model(args.hidden, args.layers, args.seed)
    compiled_module = build_model(args.hidden, args.layers, args.seed)
    compiled = torch.compile(compiled_module, dynamic=True)
    lengths = [int(x) for x in args.lengths.split(",")]
    gen = torch.Generator().manual_seed(args.seed)
    batches = [torch.randint(3, 259, (args.rows, n), generator=gen) for n in lengths]

    t = time.perf_counter()
    loss_c = one_pass(compiled, batches[0])
    compile_s = time.perf_counter() - t
    loss_e = one_pass(eager, batches[0])
    one_pass(compiled, batches[1])  # a second length: the dynamic graph must not recompile
    times: dict[str, list[float]] = {"eager": [], "compiled": []}
    for i in range(args.reps):
        ids = batches[i % len(batches)]
        for name, module in (("eager", eager), ("compiled", compiled)):
            module.zero_grad(set_to_none=True)
            t = time.perf_counter()
            one_pass(module, ids)
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "compile_s": compile_s,
        "eager_s": med["eager"],
        "compiled_s": med["compiled"],
        "speedup": med["eager"] / med["compiled"],
        "break_even_passes": compile_s / max(med["eager"] - med["compiled"], 1e-9),
        "loss_eager": loss_e,
        "loss_compiled": loss_c,
    }
    print(
        f"compile {compile_s:.1f} s (first pass); median pass eager {med['eager'] * 1e3:.0f} ms, compiled "
        f"{med['compiled'] * 1e3:.0f} ms: {result['speedup']:.2f}x; the compile pays back after "
        f"{result['break_even_passes']:.0f} passes (loss eager {loss_e:.6f}, compiled {loss_c:.6f})"
    )
    return result


if __name__ == "__main__":
    main()
