import pytest

from verl.utils.reward_score import default_compute_score
from verl.utils.reward_score.calc_multiply import compute_score, digit_match_fraction, final_turn

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


@pytest.mark.parametrize(
    "answer, expected, share",
    [
        ("178377", "178377", 1.0),
        ("178307", "178377", 5 / 6),  # one digit wrong
        ("78377", "178377", 5 / 6),  # the leading digit dropped: aligned at the last digit
        ("1783770", "178377", 1 / 7),  # shifted by one place: only a coincidental match
        ("-42", "42", 1.0),  # the sign is not a digit
        ("", "42", 0.0),
    ],
)
def test_digit_match_fraction_by_hand(answer, expected, share):
    assert digit_match_fraction(answer, expected) == pytest.approx(share, abs=0)


def test_digit_credit_shapes_only_wrong_answers_and_is_off_by_default():
    near = f"{CALL}user\n<tool_response>178377</tool_response>assistant\n#### 178307"
    assert compute_score(near, TRUTH) == 0.0  # off: exact match only
    assert compute_score(near, TRUTH, digit_credit=0.5) == pytest.approx(0.5 * 5 / 6)
    assert compute_score("#### 178377", TRUTH, digit_credit=0.5) == 1.0
    assert compute_score("#### 9", TRUTH, format_score=0.1, digit_credit=0.5) == 0.1  # never below format_score
    assert compute_score("#### 17837.5", TRUTH, digit_credit=0.5) == 0.0  # not an integer: no digit credit
    assert compute_score("no answer", TRUTH, digit_credit=0.5) == 0.0
