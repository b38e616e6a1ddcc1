import pytest

from verl.utils.reward_score import default_compute_score
from verl.utils.reward_score.calc_multiply import compute_score, final_turn

CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "4821*37"}}</tool_call>'
# 4821 * 37 = 4821 * 30 + 4821 * 7 = 144630 + 33747 = 178377
TRUTH = "178377"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the agent loop's transcript decoded without special tokens: call, tool response, final answer
        (f"{CALL}user\n<tool_response>178377</tool_response>assistant\n#### 178377", 1.0),
        # decoded with the special tokens
        (
            f"{CALL}<|im_end|><|im_start|>user\n<tool_response>178377</tool_response><|im_end|>"
            "<|im_start|>assistant\n#### 178377<|im_end|>",
            1.0,
        ),
        ("#### 178377", 1.0),  # single turn, no tool
        ("#### 178,377", 1.0),
        ("#### 178378", 0.5),  # one digit off
        (f"{CALL}user\n<tool_response>178377</tool_response>assistant\n#### 17837", 0.5),
        # the right number in the tool response alone earns nothing: the trajectory ended on the tool's turn
        (f"{CALL}user\n<tool_response>178377</tool_response>assistant\n", 0.0),
        # an answer before the tool answered does not count: only the last turn does
        (f"#### 178377{CALL}user\n<tool_response>178377</tool_response>assistant\nThe result is 178377", 0.0),
        # a second call instead of an answer
        (f"{CALL}user\n<tool_response>178377</tool_response>assistant\n{CALL}", 0.0),
        # Qwen2.5's layout (newlines inside the tags) reads the same
        ("<tool_response>\n178377\n</tool_response><|im_end|>\n<|im_start|>assistant\n#### 178377", 1.0),
        ("", 0.0),
        (None, 0.0),
    ],
)
def test_final_turn_answer(text, expected):
    assert compute_score(text, TRUTH, format_score=0.5) == expected


def test_registered_for_the_data_source_and_final_turn():
    assert default_compute_score("calc_multiply", "#### 178377", TRUTH) == 1.0
    assert default_compute_score("calc_multiply", "#### 178376", 178377) == 0.0
    assert final_turn("a</tool_response>b</tool_response>c") == "c" and final_turn("abc") == "abc"
