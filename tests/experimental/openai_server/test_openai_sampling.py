"""OpenAI sampling fields -> the rollout's sampling_params: defaults, the context budget, and a 400 naming any field
the engines cannot honour."""

from __future__ import annotations

import pytest

from verl.experimental.openai_server.errors import RequestError
from verl.experimental.openai_server.fields import check_known
from verl.experimental.openai_server.sampling import SAMPLING_FIELDS, read_sampling


def test_defaults_are_openais_and_the_budget_is_what_fits():
    s = read_sampling({}, vocab_size=259)
    assert (s.temperature, s.top_p, s.top_k, s.n, s.seed, s.stop) == (1.0, 1.0, -1, 1, None, ())
    assert s.budget(prompt_tokens=100, max_model_len=512) == 412
    assert s.params(0, 412) == {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "max_tokens": 412}


def test_given_fields_reach_the_engine_and_seeded_choices_differ():
    s = read_sampling(
        {
            "temperature": 0,
            "top_p": 0.9,
            "top_k": 0,
            "max_completion_tokens": 7,
            "seed": 5,
            "n": 2,
            "stop": "\n",
            "stop_token_ids": [2],
            "ignore_eos": True,
        },
        vocab_size=259,
    )
    assert s.stop == ("\n",) and s.top_k == -1  # 0 and -1 both mean "off"
    assert s.budget(10, 512) == 7
    assert s.params(1, 7) == {
        "temperature": 0.0,
        "top_p": 0.9,
        "top_k": -1,
        "max_tokens": 7,
        "seed": 6,
        "stop_token_ids": [2],
        "ignore_eos": True,
    }


@pytest.mark.parametrize(
    "body,param,message",
    [
        ({"temperature": 3}, "temperature", "must be in [0.0, 2.0]"),
        ({"top_p": 0}, "top_p", "must be in (0.0, 1.0]"),
        ({"n": 65}, "n", "must be in [1, 64]"),
        ({"max_tokens": 0}, "max_tokens", "must be in [1, inf]"),
        ({"max_tokens": 3, "max_completion_tokens": 3}, "max_completion_tokens", "not both"),
        ({"seed": -1}, "seed", "must be in [0"),
        ({"stop": [1]}, "stop", "a string or a list of strings"),
        ({"stop": ""}, "stop", "empty string"),
        ({"stop_token_ids": [300]}, "stop_token_ids", "outside the vocabulary"),
        ({"presence_penalty": 1.0}, "presence_penalty", "not supported: only 0"),
        ({"repetition_penalty": 1.2}, "repetition_penalty", "not supported: only 1"),
        ({"logit_bias": {"5": 10}}, "logit_bias", "not supported"),
        ({"ignore_eos": 1}, "ignore_eos", "true or false"),
    ],
)
def test_a_bad_or_unsupported_field_is_named(body, param, message):
    with pytest.raises(RequestError) as e:
        read_sampling(body, vocab_size=259)
    assert e.value.param == param and e.value.status == 400
    assert message in e.value.message


def test_neutral_values_are_accepted():
    read_sampling({"presence_penalty": 0, "frequency_penalty": 0.0, "repetition_penalty": 1.0, "logit_bias": {}}, 259)


def test_the_context_bounds_prompt_and_max_tokens():
    with pytest.raises(RequestError, match="ask for at most 12") as e:
        read_sampling({"max_tokens": 13}, 259).budget(500, 512)
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(RequestError, match="leaves no room"):
        read_sampling({}, 259).budget(512, 512)


def test_unknown_fields_are_refused_with_the_supported_list():
    with pytest.raises(RequestError, match="field 'best_of' is not supported by this server; supported: .*temperature"):
        check_known({"best_of": 2, "temperature": 1}, SAMPLING_FIELDS, "chat/completions")
