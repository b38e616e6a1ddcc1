"""The shipped tool-task warm start: loads like any HF directory, calls the calculator in the hermes format in about
half of its samples and copies its answer, but greedily answers without it (held-out success 0% with and without the
tool), as its warmstart.json says. Greedy on CPU with one thread is deterministic: the numbers are exact."""

import json
import os

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from verl.data.multiturn_eval import evaluate_replay_success, first_turn_token_probability
from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.utils.dataset.parquet import read_parquet_rows
from verl.utils.evaluation import evaluate_greedy_accuracy
from verl.utils.model import ASSETS_DIR, load_causal_lm, load_tokenizer, resolve_model_path
from verl.utils.reward_score import default_compute_score

CKPT = os.path.join(ASSETS_DIR, "tiny-qwen2-calc-sft")
CARD = json.load(open(os.path.join(CKPT, "warmstart.json")))


@pytest.fixture(scope="module")
def policy():
    return load_tokenizer(CKPT), load_causal_lm(CKPT)


def test_loads_with_auto_classes_and_is_small():
    model = AutoModelForCausalLM.from_pretrained(CKPT)
    tok = AutoTokenizer.from_pretrained(CKPT)
    assert model.config.model_type == "qwen2" and model.config.vocab_size == len(tok) == 263
    assert (model.config.hidden_size, model.config.num_hidden_layers) == (128, 4)
    assert tok.convert_tokens_to_ids("<tool_call>") == 259 and "<tools>" in tok.chat_template
    size = sum(os.path.getsize(os.path.join(CKPT, f)) for f in os.listdir(CKPT))
    assert size < 5 * 2**20
    assert resolve_model_path("builtin://tiny-qwen2-calc-sft") == CKPT


@pytest.mark.slow
def test_heldout_numbers_as_stated(policy):
    """Freshly generated held-out problems (this test's own cache dir)."""
    tok, model = policy
    torch.set_num_threads(1)
    rows = read_parquet_rows(CARD["held_out"])
    with_tool = evaluate_replay_success(model, tok, rows, max_new_tokens=16)
    assert with_tool["num_samples"] == 200
    assert abs(with_tool["acc"] - CARD["held_out_success_with_tool"]) < 1e-3
    assert abs(with_tool["turn_acc"] - CARD["held_out_call_accuracy"]) < 1e-3
    copy = with_tool["final_acc"]
    assert abs(copy - CARD["held_out_answer_accuracy_given_tool_response"]) < 1e-3 and copy >= 0.45
    p_call = first_turn_token_probability(model, tok, rows, "<tool_call>")
    mean_p_call = sum(p_call) / len(p_call)
    assert abs(mean_p_call - CARD["held_out_first_turn_call_probability"]) < 1e-3 and 0.3 <= mean_p_call <= 0.7
    without = evaluate_greedy_accuracy(model, tok, read_parquet_rows(CARD["held_out_no_tool"]), 16, 64)
    assert abs(without["acc"] - CARD["held_out_success_without_tool"]) < 1e-3 and without["acc"] < 0.05
    # the tool is what makes the difference: given the calculator's answer, it is right far more often than without
    assert copy - without["acc"] >= 0.4


@pytest.mark.slow
def test_replay_equals_turn_by_turn_generation_from_text(policy):
    """The replay's verdicts per row (the whole row, the answer turn alone) equal generating each turn alone from the
    rendered text and parsing the call with the hermes parser, the way the agent loop does."""
    tok, model = policy
    rows = read_parquet_rows("builtin://calc_multiply/test?size=8")
    replay = evaluate_replay_success(model, tok, rows, max_new_tokens=16)
    assert any(replay["final_success"]) and not all(replay["final_success"])  # both verdicts are checked below
    parser = ToolParser.get_tool_parser("hermes", tok)

    def greedy(text: str, n: int) -> list[int]:
        ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        out = model.generate(ids, max_new_tokens=n, do_sample=False, pad_token_id=tok.pad_token_id)
        return out[0, ids.shape[1] :].tolist()

    for row, success, final in zip(rows, replay["row_success"], replay["final_success"], strict=True):
        messages, tools = row.data["messages"], row.data["tools"]
        prompt = tok.apply_chat_template(messages[:1], tools=tools, add_generation_prompt=True, tokenize=False)
        calls = parser.parse_ids(greedy(prompt, 80)).calls
        a, b = row.data["extra_info"]["question"].removeprefix("What is ").removesuffix("?").split(" * ")
        right_call = [(c.name, json.loads(c.arguments)) for c in calls] == [("calculator", {"expression": f"{a}*{b}"})]
        context = tok.apply_chat_template(messages[:3], tools=tools, add_generation_prompt=True, tokenize=False)
        answer = tok.decode(greedy(context, 16), skip_special_tokens=True)
        truth = row.data["reward_model"]["ground_truth"]
        right_answer = default_compute_score("calc_multiply", answer, truth) == 1.0
        assert final == right_answer and success == (right_call and right_answer), row.where
