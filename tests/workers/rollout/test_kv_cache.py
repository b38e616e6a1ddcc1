"""The preallocated KV cache (``rollout.preallocate_kv_cache``, default on) gives the same samples as transformers'
concatenating ``DynamicLayer``, grows past its planned capacity, and selects rows. Same seed, same samples on CPU."""

from __future__ import annotations

import torch
from rollout_helpers import make_prompts
from transformers.cache_utils import DynamicCache

from verl.utils.model import ASSETS_DIR, load_causal_lm, load_tokenizer
from verl.workers.rollout import HFRollout
from verl.workers.rollout.kv_cache import PreallocatedLayer, preallocate

SHIPPED = f"{ASSETS_DIR}/tiny-qwen2-arith-sft"
QUESTIONS = ["What is 37 + 48?", "What is 5 + 7?", "Please, what is 12 + 99?", "What is 8 + 83?"]


def test_preallocated_cache_gives_the_same_samples_and_log_probs():
    model, tokenizer = load_causal_lm(SHIPPED), load_tokenizer(SHIPPED)
    prompts = make_prompts(tokenizer, QUESTIONS).repeat(3, interleave=True)
    results = {}
    for pre in (True, False):
        config = dict(response_length=24, do_sample=True, temperature=1.0, preallocate_kv_cache=pre)
        rollout = HFRollout(model, config, tokenizer.pad_token_id, tokenizer.eos_token_id, seed=7)
        results[pre] = rollout.generate_sequences(prompts).batch
    assert torch.equal(results[True]["responses"], results[False]["responses"])
    # the same math over a differently laid-out key buffer: attention sums in another float32 order, so log-probs
    # agree to rounding, not bit for bit (up to 1.9e-5 apart with transformers 5.19, within 1e-5 with 5.24)
    torch.testing.assert_close(
        results[True]["rollout_log_probs"], results[False]["rollout_log_probs"], atol=1e-4, rtol=1e-5
    )
    lengths = results[True]["response_mask"].sum(-1)
    assert (lengths < 24).any() and (lengths > 2).any()  # rows finished at different steps: retiring was exercised


def test_layer_writes_in_place_grows_and_selects_rows():
    g = torch.Generator().manual_seed(0)
    k0, v0 = torch.randn(3, 2, 4, 8, generator=g), torch.randn(3, 2, 4, 8, generator=g)
    cache = DynamicCache(ddp_cache_data=[(k0, v0)])
    assert preallocate(cache, capacity=6)
    layer = cache.layers[0]
    assert isinstance(layer, PreallocatedLayer) and layer.get_seq_length() == 4
    buffer = layer._key_buf
    steps = [(torch.randn(3, 2, 1, 8, generator=g), torch.randn(3, 2, 1, 8, generator=g)) for _ in range(4)]
    keys, values = k0, v0
    for i, (k, v) in enumerate(steps):
        got_k, got_v = cache.update(k, v, 0)
        keys, values = torch.cat([keys, k], -2), torch.cat([values, v], -2)
        assert torch.equal(got_k, keys) and torch.equal(got_v, values)
        if i < 2:
            assert layer._key_buf is buffer  # within capacity: written in place, no new buffer
    assert layer.capacity >= 8 and cache.get_seq_length() == 8  # grew past the planned 6 positions
    cache.batch_select_indices(torch.tensor([2, 0]))
    assert torch.equal(layer.keys, keys[[2, 0]]) and torch.equal(layer.values, values[[2, 0]])
    layer.crop(-3)
    assert torch.equal(layer.keys, keys[[2, 0], :, :5])


def test_only_plain_dynamic_caches_are_converted():
    from transformers.cache_utils import DynamicSlidingWindowLayer

    sliding = DynamicCache()
    sliding.layers = [DynamicSlidingWindowLayer(sliding_window=4)]
    assert not preallocate(sliding, 8)
    assert not preallocate(((torch.zeros(1, 1, 1, 1), torch.zeros(1, 1, 1, 1)),), 8)


def test_beam_reorder_moves_the_buffers_not_just_the_views():
    layer = PreallocatedLayer(capacity=8)
    keys = torch.arange(2 * 3, dtype=torch.float32).view(2, 1, 3, 1)
    layer.update(keys, keys.clone())
    layer.reorder_cache(torch.tensor([1, 0]))
    new = torch.full((2, 1, 1, 1), 9.0)
    k, _ = layer.update(new, new.clone())
    assert k[:, 0, :, 0].tolist() == [[3, 4, 5, 9], [0, 1, 2, 9]]
