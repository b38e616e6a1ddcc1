"""A request's choices from the real HF rollout: n choices, seeds, and stop strings cut as early stopping would."""

from __future__ import annotations

import asyncio

import pytest

from verl.experimental.openai_server.errors import RequestError
from verl.experimental.openai_server.generation import generate_choices
from verl.experimental.openai_server.sampling import read_sampling
from verl.experimental.openai_server.served_model import load_served_model


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    return load_served_model(tiny_model_dir, "hf", device="cpu")


def _run(served, prompt, body, max_tokens=24):
    sampling = read_sampling(body, served.vocab_size)
    return asyncio.run(generate_choices(served.rollout, served.tokenizer, prompt, sampling, max_tokens, "req"))


def test_n_seeded_choices_are_reproducible_and_distinct(served):
    prompt = served.tokenizer("12+34=", add_special_tokens=False)["input_ids"]
    a = _run(served, prompt, {"seed": 3, "n": 3, "ignore_eos": True})
    b = _run(served, prompt, {"seed": 3, "n": 3, "ignore_eos": True})
    assert [c.index for c in a] == [0, 1, 2]
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    assert len({tuple(c.token_ids) for c in a}) == 3
    assert all(len(c.token_ids) == len(c.log_probs) == 24 and c.finish_reason == "length" for c in a)


def test_a_stop_string_cuts_the_text_and_counts_the_tokens_up_to_it(served):
    tok = served.tokenizer
    prompt = tok("12+34=", add_special_tokens=False)["input_ids"]
    full = _run(served, prompt, {"temperature": 0, "ignore_eos": True})[0]
    stop = full.text[5:7]
    at = full.text.find(stop)
    cut = _run(served, prompt, {"temperature": 0, "ignore_eos": True, "stop": ["never there", stop]})[0]
    assert cut.text == full.text[:at] and cut.finish_reason == "stop"
    assert (
        cut.token_ids == full.token_ids[: len(cut.token_ids)] and cut.log_probs == full.log_probs[: len(cut.token_ids)]
    )
    assert len(tok.decode(cut.token_ids)) >= at + len(stop) > len(tok.decode(cut.token_ids[:-1]))


def test_the_rollouts_own_request_check_is_a_400(served):
    with pytest.raises(RequestError, match="outside the vocabulary"):
        _run(served, [1, 10_000], {})
