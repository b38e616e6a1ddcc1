"""A generate request's sampling_params resolved against the rollout config: defaults, greedy, stops, keys."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verl.workers.config import RolloutConfig
from verl.workers.rollout.request_params import resolve_request

CONFIG = RolloutConfig(temperature=0.8, top_k=20, top_p=0.9, response_length=16, prompt_length=10)


def resolve(params, prompt=(4, 5, 6), number=0, **kw):
    kw = {
        "config": CONFIG,
        "eos_token_ids": [2],
        "number": number,
        "seed": 7,
        "vocab_size": 100,
        "max_model_len": 64,
        **kw,
    }
    return resolve_request("r", prompt, params, **kw)


def test_missing_keys_take_the_config_and_max_tokens_the_verl_budget():
    spec = resolve({})
    assert (spec.temperature, spec.top_k, spec.top_p, spec.greedy) == (0.8, 20, 0.9, False)
    assert spec.max_tokens == 16 + 10 - 3 and spec.stop_token_ids == (2,)
    assert resolve({"max_tokens": 100}).max_tokens == 64 - 3  # the model's room
    assert resolve({"max_new_tokens": 5}).max_tokens == 5


def test_greedy_and_stops():
    assert resolve({"temperature": 0}).greedy and resolve({"temperature": 0}).temperature == 1.0
    assert resolve({"do_sample": False, "temperature": 0.5}).greedy
    assert resolve({"stop_token_ids": [9, 2]}).stop_token_ids == (2, 9)
    assert resolve({"ignore_eos": True, "stop_token_ids": [9]}).stop_token_ids == (9,)


def test_draw_keys_come_from_the_request_number_or_its_own_seed():
    a, b = resolve({}, number=0), resolve({}, number=1)
    assert a.seed == b.seed == 7 and a.sample_key != b.sample_key and a.sample_key >= 2**62
    seeded = [resolve({"seed": 11}, number=n) for n in (0, 5)]
    assert seeded[0].seed == 11 and seeded[0].sample_key == seeded[1].sample_key


def test_token_ids_may_be_lists_tuples_tensors_or_numpy_ints():
    for prompt in ([4, 5], (4, 5), torch.tensor([4, 5]), np.array([4, 5])):
        assert resolve({}, prompt=prompt).prompt_ids == (4, 5)
    with pytest.raises(ValueError, match="'r': prompt_ids must hold integer token ids, got 4.5"):
        resolve({}, prompt=[4.5])


@pytest.mark.parametrize(
    "params, match",
    [
        ({"max_tokens": 4, "max_new_tokens": 4}, "not both"),
        ({"temperature": "hot"}, r"sampling_params\['temperature'\] must be a number"),
        ({"max_tokens": 2.5}, r"sampling_params\['max_tokens'\] must be an integer"),
        ({"do_sample": 1}, "do_sample must be true or false"),
        ({"repetition_penalty": 1.2}, r"sampling_params\['repetition_penalty'\]=1.2 is not supported: only 1.0"),
        ({"seed": -1}, r"seed must be in \[0, 2\*\*63\)"),
    ],
)
def test_bad_values_name_the_request_and_the_key(params, match):
    with pytest.raises(ValueError, match=match):
        resolve(params)


def test_text_only_keys_and_neutral_values_are_accepted():
    spec = resolve({"skip_special_tokens": False, "n": 1, "repetition_penalty": 1.0, "stop": [], "logprobs": 1})
    assert spec.max_tokens == 23
