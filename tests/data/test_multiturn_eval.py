"""first_turn_token_probability: the first assistant token's probability, from the same context the replay uses."""

import pytest
import torch

from verl.data.multiturn_eval import first_turn_token_probability
from verl.utils.dataset.parquet import read_parquet_rows
from verl.utils.model import load_causal_lm, load_tokenizer


@pytest.mark.slow
def test_call_probability_equals_softmax_on_the_rendered_prompt():
    tok = load_tokenizer("builtin://tiny-qwen2?tools=true")
    model = load_causal_lm("builtin://tiny-qwen2?tools=true")
    rows = read_parquet_rows("builtin://calc_multiply/test?size=4")
    probs = first_turn_token_probability(model, tok, rows, "<tool_call>")
    assert len(probs) == 4
    for row, prob in zip(rows, probs, strict=True):
        text = tok.apply_chat_template(
            row.data["prompt"], tools=row.data["tools"], add_generation_prompt=True, tokenize=False
        )
        ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            expected = torch.softmax(model(ids).logits[0, -1].float(), -1)[tok.convert_tokens_to_ids("<tool_call>")]
        assert prob == pytest.approx(expected.item(), rel=1e-6) and 0 < prob < 1
    with pytest.raises(ValueError, match="is not one token"):
        first_turn_token_probability(model, tok, rows, "not-a-token")
