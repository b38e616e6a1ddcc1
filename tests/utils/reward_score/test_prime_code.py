"""verl's prime_code interface over the local sandbox, and the code data sources' registered scorer."""

import json

import pytest

from verl.sandbox import bwrap_status
from verl.utils.reward_score import default_compute_score, prime_code

pytestmark = pytest.mark.skipif(bwrap_status() is not None, reason=f"no bubblewrap here: {bwrap_status()}")

CASES = json.dumps({"inputs": ["1 2\n", "5 5\n", "0 0\n"], "outputs": ["3", "10", "0"]})
RESPONSE = "The sum:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```\nDone."


def test_extract_code_takes_the_last_fenced_block():
    assert prime_code.extract_code("x\n```python\nprint(1)\n```\n```python\nprint(2)\n```") == "print(2)\n"
    assert prime_code.extract_code("print(3)") == "print(3)"


def test_compute_score_all_or_fraction_as_verl():
    assert prime_code.compute_score(RESPONSE, CASES)[0] is True
    score, meta = prime_code.compute_score("```python\nprint(3)\n```", CASES, continuous=True)
    assert score == pytest.approx(1 / 3) and [m["status"] for m in meta] == ["passed", "failed", "failed"]
    assert prime_code.compute_score("```python\nprint(3)\n```", CASES)[0] is False


@pytest.mark.parametrize("source", prime_code.CODE_DATA_SOURCES)
def test_code_data_sources_score_the_share_of_cases_passed(source):
    assert default_compute_score(source, RESPONSE, CASES) == {"score": 1.0, "all_passed": 1.0, "compile_error": 0.0}
    assert default_compute_score(source, "```python\ndef f(:\n```", CASES)["compile_error"] == 1.0
