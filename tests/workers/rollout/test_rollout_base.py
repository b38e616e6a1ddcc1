"""The rollout interface: verl's names, the (name, mode) registry, TokenOutput at verl's import paths."""

from __future__ import annotations

import asyncio

import pytest

from verl.workers.rollout import BaseRollout, HFRollout, TokenOutput, get_rollout_class
from verl.workers.rollout.base import registered_rollouts
from verl.workers.rollout.replica import TokenOutput as ReplicaTokenOutput


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_registry_resolves_hf_in_both_modes(mode):
    assert get_rollout_class("hf", mode) is HFRollout
    assert issubclass(HFRollout, BaseRollout)
    assert ("hf", mode) in registered_rollouts()


def test_unknown_engine_and_mode_name_the_key_and_the_choices():
    with pytest.raises(
        ValueError, match=r"rollout\.name='sglang' with rollout\.mode='async' .*hf/async.*rollout\.name=hf"
    ):
        get_rollout_class("sglang", "async")
    with pytest.raises(ValueError, match=r"rollout\.mode='server': the modes are sync, async"):
        get_rollout_class("hf", "server")


def test_token_output_has_verls_fields_and_import_path():
    out = TokenOutput(token_ids=[5, 2], log_probs=[-0.1, -0.2], stop_reason="completed", finish_reason="stop")
    assert ReplicaTokenOutput is TokenOutput
    assert out.model_dump() == {
        "token_ids": [5, 2],
        "log_probs": [-0.1, -0.2],
        "routed_experts": None,
        "stop_reason": "completed",
        "num_preempted": None,
        "finish_reason": "stop",
    }


class _BatchOnly(BaseRollout):
    """An engine ported from verl with the batch call and the hooks only."""

    def generate_sequences(self, prompts):
        return prompts

    async def resume(self, tags):
        pass

    async def update_weights(self, weights, **kwargs):
        pass

    async def release(self):
        pass


def test_an_engine_without_per_request_generate_says_which_engines_have_it():
    engine = _BatchOnly(config={"name": "mine"})
    assert engine.config == {"name": "mine"}
    with pytest.raises(NotImplementedError, match=r"_BatchOnly has no per-request async generate.*\bhf\b"):
        asyncio.run(engine.generate([1, 2], {}, "r0"))
    with pytest.raises(NotImplementedError, match="build_hybrid"):
        _BatchOnly.build_hybrid(module=None, config=None, tokenizer=None, eos_token_ids=[2], seed=0)
