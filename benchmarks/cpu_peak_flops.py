"""The machine's matmul peak, the denominator of MFU: ``torch.matmul`` on large square matrices.

    python benchmarks/cpu_peak_flops.py                    # fp32 and bf16, all torch threads
    python benchmarks/cpu_peak_flops.py --threads 1

Reports the best of several timed runs at a few sizes (the largest usually wins), in FLOP/s (2 n^3 per product).
Works on a GPU too (``--device cuda``).
"""

from __future__ import annotations

import argparse
import time

import torch

from verl.utils.torch_dtypes import cpu_has_native

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def measure_peak(
    dtype: str = "fp32", threads: int = 0, seconds: float = 3.0, device: str = "cpu", sizes=(1024, 2048)
) -> float:
    """Best observed matmul FLOP/s for ``dtype`` over ``sizes`` within about ``seconds``."""
    if threads > 0:
        torch.set_num_threads(threads)
    if device == "cpu" and not cpu_has_native(DTYPES[dtype]):
        sizes = (256, 512)  # an emulated dtype (~1 GFLOP/s): a 2048^3 product would take tens of seconds
    best = 0.0
    budget = seconds / len(sizes)
    for n in sizes:
        a = torch.randn(n, n, device=device).to(DTYPES[dtype])
        b = torch.randn(n, n, device=device).to(DTYPES[dtype])
        a @ b  # warm up
        _sync(device)
        end = time.perf_counter() + budget
        while True:
            t = time.perf_counter()
            a @ b
            _sync(device)
            dt = time.perf_counter() - t
            best = max(best, 2 * n**3 / dt)
            if time.perf_counter() > end:
                break
    return best


def matmul_params(model) -> int:
    """Parameters that take part in matmuls: all but the input embedding, plus the lm_head (tied or not)."""
    total = sum(p.numel() for p in model.parameters())
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    return total - emb.numel() + (head.numel() if head is emb else 0)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"])
    a = p.parse_args()
    for dt in a.dtypes:
        peak = measure_peak(dt, a.threads, a.seconds, a.device)
        print(f"{dt}: {peak / 1e9:.1f} GFLOP/s ({torch.get_num_threads()} threads, {a.device})")


if __name__ == "__main__":
    main()
