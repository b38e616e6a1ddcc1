"""Split rows into groups of similar total length (verl's ``seqlen_balancing``): data-parallel workers that get
similar token counts finish their slices at the same time."""

from __future__ import annotations

import heapq


def get_seqlen_balanced_partitions(seqlens: list[int], k_partitions: int, equal_size: bool) -> list[list[int]]:
    """Row indices in ``k_partitions`` groups whose length sums are close (longest-processing-time greedy: the
    longest remaining row goes to the lightest group). ``equal_size``: every group gets ``len(seqlens) / k`` rows
    (needs divisibility). Each group's indices are sorted, so rows keep their relative order."""
    n = len(seqlens)
    if k_partitions < 1:
        raise ValueError(f"k_partitions must be >= 1, got {k_partitions}")
    if equal_size and n % k_partitions:
        raise ValueError(f"{n} rows do not split into {k_partitions} equal-size partitions")
    cap = n // k_partitions if equal_size else n
    parts: list[list[int]] = [[] for _ in range(k_partitions)]
    heap = [(0, p) for p in range(k_partitions)]  # (load, partition)
    order = sorted(range(n), key=lambda i: (-seqlens[i], i))
    full: list[tuple[int, int]] = []
    for i in order:
        load, p = heapq.heappop(heap)
        while len(parts[p]) >= cap:  # full partitions leave the heap
            full.append((load, p))
            load, p = heapq.heappop(heap)
        parts[p].append(i)
        heapq.heappush(heap, (load + seqlens[i], p))
    return [sorted(part) for part in parts]
