import time

import pytest

from verl.utils.reward_score import gsm8k
from verl.utils.reward_score.gsm8k import compute_score, extract_solution, normalize_digits, to_decimal


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72"),
        ("#### 1,234", "1234"),
        ("#### -12", "-12"),
        ("#### +12", "+12"),
        ("#### 3.5", "3.5"),
        ("#### 72.", "72"),
        ("#### $18", "18"),
        ("####72", "72"),
        ("#### 85 apples", "85"),
        ("#### 1 then #### 2", "2"),
        ("#### 1\n#### 2\n#### 3", "3"),
        ("text\n##### 9", "9"),
    ],
)
def test_extract_strict(text, expected):
    assert extract_solution(text, method="strict") == expected


@pytest.mark.parametrize(
    "text",
    ["", "no marker 72", "#### ", "####", "#### abc", "#### .", "#### -", "#### 1.2.3", "#### 5\n#### none"],
)
def test_extract_strict_none(text):
    assert extract_solution(text, method="strict") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 72.", "72"),
        ("12 apples and 1,234 pears", "1234"),
        ("x = -3", "-3"),
        ("pages 5-3", "3"),
        ("it is 3.14.", "3.14"),
        ("first 7, then version 1.2.3", "7"),
        ("#### 5 and afterwards 6", "6"),
        ("area 5 m²", "5"),
    ],
)
def test_extract_flexible(text, expected):
    assert extract_solution(text, method="flexible") == expected


@pytest.mark.parametrize("text", ["", "no numbers", "...", ",,,", "- -"])
def test_extract_flexible_none(text):
    assert extract_solution(text, method="flexible") is None


def test_bad_method_raises():
    with pytest.raises(ValueError, match="method"):
        extract_solution("#### 1", method="loose")
    with pytest.raises(ValueError, match="method"):
        compute_score("#### 1", "1", method="loose")


def test_strict_vs_flexible():
    text = "We get 72 clips in total."
    assert compute_score(text, "72", method="strict") == 0.0
    assert compute_score(text, "72", method="flexible") == 1.0
    text = "#### 72\nJust kidding, 73."
    assert compute_score(text, "72", method="strict") == 1.0
    assert compute_score(text, "72", method="flexible", format_score=0.1) == 0.1


def test_strict_searches_whole_text_not_last_300_chars():
    text = "#### 72\n" + "Some long trailing explanation. " * 50
    assert compute_score(text, "72") == 1.0


@pytest.mark.parametrize(
    ("text", "ground_truth", "expected"),
    [
        ("#### 72", "72", 1.0),
        ("#### 72", "73", 0.1),
        ("#### 1,234", "1234", 1.0),
        ("#### 1234", "1,234", 1.0),
        ("#### 85.0", "85", 1.0),
        ("#### 085", "85", 1.0),
        ("#### 85.5", "85", 0.1),
        ("#### 0.50", ".5", 1.0),
        ("#### -0", "0", 1.0),
        ("#### -12", "-12", 1.0),
        ("#### 12", "-12", 0.1),
        ("#### 72", 72, 1.0),
        ("#### 72", 72.0, 1.0),
        ("#### 72", " $72 ", 1.0),
        ("#### 72", "She earns 72.\n#### 72", 1.0),
        ("#### 72", "seventy-two", 0.1),
        ("#### 72", None, 0.1),
        ("no answer", "72", 0.0),
    ],
)
def test_compute_score(text, ground_truth, expected):
    assert compute_score(text, ground_truth, format_score=0.1) == expected


def test_default_format_score_and_custom_score():
    assert compute_score("#### 1", "2") == 0.0
    assert compute_score("#### 2", "2", score=5) == 5.0
    assert isinstance(compute_score("#### 2", "2"), float)


def test_big_integers_compare_exactly():
    big = "123456789012345678901234567890"
    assert float(big) == float(big[:-1] + "1")  # a float comparison would be fooled
    assert compute_score(f"#### {big}", big) == 1.0
    assert compute_score(f"#### {big[:-1]}1", big, format_score=0.1) == 0.1
    assert compute_score(f"#### {big}", int(big)) == 1.0
    assert compute_score(f"#### {big}.000", big) == 1.0
    assert compute_score(f"#### {big}.0000000000000000001", big, format_score=0.1) == 0.1


def test_numbers_longer_than_int_str_limit():
    nines = "9" * 5000  # above Python's default 4300-digit int/str conversion limit
    assert compute_score(f"#### {nines}", nines) == 1.0
    assert compute_score(f"#### {nines}8", nines, format_score=0.1) == 0.1
    assert compute_score(nines, nines, method="flexible") == 1.0
    assert compute_score(f"#### {nines}", 10**5000 - 1) == 1.0  # int too long for str()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#### ٨٥", 1.0),  # Arabic-Indic
        ("#### ۸۵", 1.0),  # Extended Arabic-Indic
        ("#### ८५", 1.0),  # Devanagari
        ("#### ８５", 1.0),  # fullwidth digits
        ("＃＃＃＃ ８５", 1.0),  # fullwidth marker too
        ("#### 𝟖𝟓", 1.0),  # mathematical bold digits
        ("#### ⁸⁵", 0.0),  # superscripts are not decimal digits
        ("#### ½", 0.0),
    ],
)
def test_unicode_digits(text, expected):
    assert compute_score(text, "85") == expected


def test_unicode_minus_and_ground_truth():
    assert compute_score("#### \u221212", "-12") == 1.0
    assert compute_score("#### -12", "－１２") == 1.0


def test_normalize_digits_preserves_length():
    text = "a٨b８c\u2212d²"
    out = normalize_digits(text)
    assert out == "a8b8c-d²"
    assert len(out) == len(text)
    assert normalize_digits("plain ascii 12") == "plain ascii 12"


def test_to_decimal():
    assert to_decimal("1,234") == 1234
    assert to_decimal(True) is None
    assert to_decimal("nan") is None
    assert to_decimal("inf") is None
    assert to_decimal(object()) is None
    assert to_decimal(float("nan")) != to_decimal("1")


class _Unprintable:
    def __str__(self):
        raise RuntimeError("boom")


ROBUSTNESS_INPUTS = [
    "",
    None,
    "   \n\t",
    "####",
    "#### ",
    "#### \n",
    "####" * 1000,
    "#" * 100000,
    "garbage \x00 \ufffd \U0001f600 ####\x00",
    "9" * 5000,
    "#### " + "9" * 5000,
    "#### " + "1" * 200000,
    "." * 100000,
    "," * 100000 + "5",
    "-" * 100000,
    "٨" * 10000,
    "#### 1e400",
    "#### -1.5e-10",
    "#### 1 #### 2 #### 3 ####",
    b"#### 72",
    12345,
    _Unprintable(),
]


@pytest.mark.parametrize("method", ["strict", "flexible"])
@pytest.mark.parametrize("text", ROBUSTNESS_INPUTS, ids=range(len(ROBUSTNESS_INPUTS)))
def test_never_raises(text, method):
    start = time.perf_counter()
    answer = extract_solution(text, method=method)
    assert answer is None or isinstance(answer, str)
    result = compute_score(text, "72", method=method, format_score=0.1)
    assert result in (0.0, 0.1, 1.0)
    assert time.perf_counter() - start < 2.0


def test_none_and_bytes():
    assert compute_score(None, "72") == 0.0
    assert compute_score(b"#### 72", "72") == 1.0


def test_module_exports():
    assert set(gsm8k.__all__) >= {"compute_score", "extract_solution"}
