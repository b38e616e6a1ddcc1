"""The calculator through the agent loop's entry (call_tool): hand-computed values, integer printing, refusals as
error observations."""

import asyncio

import pytest

from verl.tools import CalculatorTool, call_tool


def _calc(expression, **config):
    return asyncio.run(call_tool(CalculatorTool(config), {"expression": expression}, timeout_s=5))


@pytest.mark.parametrize(
    "expression, answer",
    [
        ("4821*37", "178377"),  # 4821*37 = 144630 + 33747
        ("  12 + 30 ", "42"),
        ("6/3", "2"),  # true division, integral result printed as an integer
        ("7/2", "3.5"),
        ("-7//2", "-4"),  # floor division rounds down
        ("-7 % 3", "2"),  # Python's modulo has the sign of the divisor
        ("2**10", "1024"),
        ("-3**2", "-9"),  # ** binds tighter than unary minus
        ("(-3)**2", "9"),
        ("2**-2", "0.25"),
        ("(1+2)*(3+4)", "21"),
        ("0.1+0.2", "0.3"),  # 15 significant digits
        ("1/3", "0.333333333333333"),
        ("123456789*987654321", "121932631112635269"),  # exact beyond float precision
        ("1.5e3", "1500"),
    ],
)
def test_values(expression, answer):
    result = _calc(expression)
    assert result.error is None and result.response.text == answer


@pytest.mark.parametrize(
    "expression, why",
    [
        ("1/0", "division by zero"),
        ("5 % 0", "division by zero"),
        (
            "__import__('os').system('true')",
            "only numbers, + - * / // % ** and parentheses are allowed, found a function call",
        ),
        ("x + 1", "found the name 'x'"),
        ("(1).real", "found an attribute"),
        ("2^3", "found ^ (write powers as **)"),
        ("1 < 2", "found a comparison"),
        ("'a' * 3", "only numbers are allowed, found the str literal 'a'"),
        ("True + 1", "only numbers are allowed, found the bool literal True"),
        ("2**101", "the exponent 101 is larger than 100"),
        ("9**99**99", "the result of 99**99 would have more than 100 digits"),
        ("10**60 * 10**60", "a result has more than 100 digits"),
        ("(-8)**(1/3)", "the result is not a real number"),
        ("1e308 * 10", "the result is too large for a floating-point number"),
        ("3 +", "cannot parse '3 +' as arithmetic"),
        ("", "the expression is empty"),
        ("1+" * 120 + "1", "the expression is 241 characters long; the limit is 200"),
    ],
)
def test_refusals_are_error_observations(expression, why):
    result = _calc(expression)
    assert result.error_kind == "tool_error" and result.response.text.startswith("Error: ")
    assert why in result.response.text


def test_limits_come_from_the_tool_config():
    assert _calc("2**20", max_exponent=10).response.text == "Error: the exponent 20 is larger than 10"
    assert _calc("12345", max_result_digits=4).response.text == "Error: a result has more than 4 digits"
    assert _calc("1+1", max_expression_length=2).error_kind == "tool_error"


def test_a_wrongly_typed_expression_is_a_bad_argument():
    result = asyncio.run(call_tool(CalculatorTool(), {"expression": 12}, timeout_s=5))
    assert (
        result.response.text
        == "Error: bad arguments for calculator: parameter 'expression' must be a string, got integer 12"
    )


def test_latency_is_seeded_per_call_and_waited():
    """``latency_s``: each call waits a uniform share of [low, high] seconds, the same for the same call and seed,
    before it answers (the slow-environment stand-in of the asynchronous-training benchmark)."""
    slow = CalculatorTool({"latency_s": [0.05, 0.15], "latency_seed": 3})
    waits = [slow.call_latency(e) for e in ("1+1", "2+2", "1+1")]
    assert waits[0] == waits[2] and waits[0] != waits[1] and all(0.05 <= w <= 0.15 for w in waits)
    assert CalculatorTool({"latency_s": [0.05, 0.15], "latency_seed": 4}).call_latency("1+1") != waits[0]
    result = asyncio.run(call_tool(slow, {"expression": "1+1"}, timeout_s=5))
    assert result.response.text == "2" and result.latency_s >= waits[0]
    assert CalculatorTool().call_latency("1+1") == 0.0
    with pytest.raises(ValueError, match=r"latency_s=\[3, 1\]: give \[low, high\]"):
        CalculatorTool({"latency_s": [3, 1]})


def test_the_slow_calculator_yaml_loads_with_its_latency():
    import os

    from verl.tools import initialize_tools

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tools = initialize_tools(os.path.join(root, "examples/agent_loop/tool_configs/slow_calculator.yaml"))
    assert list(tools) == ["calculator"] and tools["calculator"].latency_s == (0.2, 3.0)
