"""A KV cache for sampling that writes each step's keys/values in place instead of re-concatenating the cache.

transformers' ``DynamicLayer.update`` does ``keys = torch.cat([keys, new])`` at every decode step, copying the whole
cache per token: O(T^2) memory traffic over a response of T tokens. On the 2-core CPU that concatenation was 24% of the
fp32 rollout time of the benchmark workload (``torch.profiler``: ``aten::cat`` 498 ms of 2.06 s, 128 rows x 64 tokens,
hidden 256, 4 layers). `PreallocatedLayer` keeps one buffer of ``capacity`` positions per layer (the prompt plus the
response length, known before decoding starts), copies each step's new key/value into the next free slot and hands
attention a view of the filled part. Dropping finished rows (`batch_select_indices`) copies the filled part only.

The values attention sees are the same tensors in the same order as with ``DynamicLayer``, so the samples are
identical (tested in ``tests/workers/rollout/test_kv_cache.py``).

`can_select_rows`/`select_rows` drop finished rows from a cache (the sampler's retiring) where that is exact.
"""

from __future__ import annotations

from typing import Any

import torch

try:
    from transformers.cache_utils import DynamicLayer
except ImportError:  # transformers without layered caches: the rollout keeps whatever cache the model returns
    DynamicLayer = None  # type: ignore[assignment,misc]


if DynamicLayer is not None:

    class PreallocatedLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys/values live in a buffer of ``capacity`` positions, filled in place."""

        def __init__(self, capacity: int):
            super().__init__()
            self.capacity = int(capacity)
            self.length = 0
            self._key_buf: torch.Tensor | None = None
            self._value_buf: torch.Tensor | None = None

        @classmethod
        def from_layer(cls, layer: Any, capacity: int) -> PreallocatedLayer:
            """Copy an initialised ``DynamicLayer``'s keys/values into a new preallocated layer."""
            new = cls(capacity)
            if layer.is_initialized and layer.keys is not None and layer.keys.numel() > 0:
                new.update(layer.keys, layer.values)
            return new

        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            self.device = key_states.device
            b, h, _, d = key_states.shape
            self._key_buf = key_states.new_empty((b, h, self.capacity, d))
            self._value_buf = value_states.new_empty((b, value_states.shape[1], self.capacity, value_states.shape[3]))
            self.length = 0
            self.is_initialized = True

        def _grow(self, needed: int) -> None:
            """More positions than planned (a caller decoding past ``capacity``): double the buffers."""
            capacity = max(needed, 2 * self.capacity)
            for name in ("_key_buf", "_value_buf"):
                old = getattr(self, name)
                new = old.new_empty((*old.shape[:2], capacity, old.shape[3]))
                new[:, :, : self.length].copy_(old[:, :, : self.length])
                setattr(self, name, new)
            self.capacity = capacity

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
        ) -> tuple[torch.Tensor, torch.Tensor]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n = key_states.shape[-2]
            end = self.length + n
            if end > self.capacity:
                self._grow(end)
            self._key_buf[:, :, self.length : end].copy_(key_states)
            self._value_buf[:, :, self.length : end].copy_(value_states)
            self.length = end
            self.keys = self._key_buf[:, :, :end]
            self.values = self._value_buf[:, :, :end]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.length if self.is_initialized else 0

        def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
            """Beam search's reorder, applied to the buffers (the inherited one would reorder views that the next
            ``update`` replaces)."""
            self.batch_select_indices(beam_idx)

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            if not self.is_initialized:
                return
            indices = indices.to(self._key_buf.device)
            for name in ("_key_buf", "_value_buf"):
                old = getattr(self, name)
                new = old.new_empty((indices.shape[0], *old.shape[1:]))
                torch.index_select(old[:, :, : self.length], 0, indices, out=new[:, :, : self.length])
                setattr(self, name, new)
            self.keys = self._key_buf[:, :, : self.length]
            self.values = self._value_buf[:, :, : self.length]

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self.is_initialized:
                rows = self._key_buf.shape[0]
                self.batch_select_indices(torch.arange(rows, device=self._key_buf.device).repeat_interleave(repeats))

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove > 0:
                raise ValueError("PreallocatedLayer.crop takes a negative number of tokens to remove")
            if tokens_to_remove == 0 or not self.is_initialized:
                return
            self.length = max(0, self.length + tokens_to_remove)
            self.keys = self._key_buf[:, :, : self.length]
            self.values = self._value_buf[:, :, : self.length]

        def reset(self) -> None:
            self.length = 0
            self._key_buf = self._value_buf = None
            super().reset()

else:  # pragma: no cover - only with transformers < 5
    PreallocatedLayer = None  # type: ignore[assignment,misc]


def preallocate(cache: Any, capacity: int) -> bool:
    """Replace ``cache``'s plain ``DynamicLayer`` layers in place by `PreallocatedLayer` copies holding ``capacity``
    positions. Returns whether the cache was converted (only a ``DynamicCache`` whose layers are all plain
    ``DynamicLayer``; sliding-window, quantized or offloaded caches are left as they are)."""
    if PreallocatedLayer is None:
        return False
    from transformers.cache_utils import DynamicCache

    if type(cache) is not DynamicCache or getattr(cache, "offloading", False):
        return False
    layers = getattr(cache, "layers", None)
    if not layers or not all(type(layer) is DynamicLayer for layer in layers):
        return False
    cache.layers = [PreallocatedLayer.from_layer(layer, capacity) for layer in layers]
    return True


def can_select_rows(cache: Any) -> bool:
    """Whether finished rows can be dropped from ``cache`` exactly (only layer types whose whole state is keys/values)."""
    if isinstance(cache, tuple):  # legacy tuple-of-(key, value) caches
        return all(isinstance(layer, tuple) and len(layer) == 2 for layer in cache)
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer
    except ImportError:  # transformers without layered caches
        return False
    if type(cache) is not DynamicCache or getattr(cache, "offloading", False):
        return False
    layers = getattr(cache, "layers", None)
    if not layers or not hasattr(cache, "batch_select_indices"):
        return False
    return all(type(layer) in (DynamicLayer, DynamicSlidingWindowLayer, PreallocatedLayer) for layer in layers)


def is_preallocated(cache: Any) -> bool:
    """Whether every layer of ``cache`` is a `PreallocatedLayer` (what the fused decode step writes into)."""
    layers = getattr(cache, "layers", None)
    return PreallocatedLayer is not None and bool(layers) and all(type(x) is PreallocatedLayer for x in layers)


def select_rows(cache: Any, keep: torch.Tensor) -> Any:
    """Keep only rows ``keep`` (1-D long tensor) of a cache accepted by `can_select_rows`."""
    if isinstance(cache, tuple):
        return tuple((k.index_select(0, keep.to(k.device)), v.index_select(0, keep.to(v.device))) for k, v in cache)
    cache.batch_select_indices(keep)
    return cache
