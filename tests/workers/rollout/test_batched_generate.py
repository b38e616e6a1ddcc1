"""`BatchedGenerate`, the per-request call both engines share, with an engine whose batched decode echoes what it
was given: requests numbered in call order, checked before batching, batched up to the engine's limit, and the
``(seed, calls, requests)`` rng state."""

from __future__ import annotations

import asyncio

import pytest
import torch

from verl.workers.config import RolloutConfig
from verl.workers.rollout.base import TokenOutput
from verl.workers.rollout.batched_generate import BatchedGenerate
from verl.workers.rollout.request_params import RequestSpec


class EchoEngine(BatchedGenerate):
    """A batched decode that answers each request with its prompt's first ``max_tokens`` ids (and keeps the specs)."""

    def __init__(self, limit: int):
        self.config = RolloutConfig(response_length=8, prompt_length=8, max_num_seqs=limit)
        self.eos_token_ids, self.seed, self.calls = [2], 5, 0
        self.decoded: list[list[RequestSpec]] = []

    def _decode_requests(self, requests: list[RequestSpec]) -> list[TokenOutput]:
        self.decoded.append(requests)
        return [TokenOutput(token_ids=list(r.prompt_ids[: r.max_tokens]), finish_reason="length") for r in requests]

    def _vocab_size(self) -> int | None:
        return 100

    def _max_model_len(self) -> int | None:
        return 16

    def _request_batch_limit(self) -> int:
        return int(self.config.max_num_seqs)


def _gather(engine, prompts, params):
    async def main():
        calls = [engine.generate(p, dict(sp), f"r{i}") for i, (p, sp) in enumerate(zip(prompts, params))]
        return await asyncio.gather(*calls, return_exceptions=True)

    return asyncio.run(main())


def test_requests_are_numbered_checked_and_batched_up_to_the_engines_limit():
    engine = EchoEngine(limit=2)
    prompts = [[3, 4, 5], [6, 7], [8, 9, 10], [11], [12, 13]]
    params = [{"max_tokens": 2}, {"top_p": 2.0}, {"max_tokens": 0}, {}, {"seed": 4}]
    outs = _gather(engine, prompts, params)
    assert isinstance(outs[1], ValueError) and "'r1'" in str(outs[1])  # failed before batching
    assert outs[2].token_ids == [] and outs[2].finish_reason == "length"  # max_tokens=0: no decode
    assert [o.token_ids for o in (outs[0], outs[3], outs[4])] == [[3, 4], [11], [12, 13]]
    assert engine._batcher.batch_sizes == [2, 1]
    specs = [s for batch in engine.decoded for s in batch]
    assert [s.request_id for s in specs] == ["r0", "r3", "r4"]
    assert [s.sample_key & 0xFF for s in specs[:2]] == [0, 3]  # the number of the call, not the place in a batch
    assert specs[1].max_tokens == 8 + 8 - 1 and specs[2].seed == 4  # verl's budget; a request's own seed
    assert engine.get_rng_state().tolist() == [5, 0, 5]


def test_rng_state_restores_the_request_count_and_names_the_engine_on_a_bad_state():
    engine = EchoEngine(limit=4)
    engine.set_rng_state(torch.tensor([9, 3, 11]))
    assert (engine.seed, engine.calls, engine.requests) == (9, 3, 11)
    engine.set_rng_state(torch.tensor([9, 3]))  # written before per-request generation: requests from 0
    assert engine.requests == 0
    with pytest.raises(ValueError, match=r"EchoEngine\.set_rng_state: expected the \(seed, calls, requests\)"):
        engine.set_rng_state(torch.tensor([1.0, 2.0]))
