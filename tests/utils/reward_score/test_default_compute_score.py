import numpy as np
import pytest

import verl.utils.reward_score as rs
from verl.utils.reward_score import (
    _default_compute_score,
    arithmetic,
    countdown,
    default_compute_score,
    get_scorer,
    gsm8k,
    register_scorer,
    registered_data_sources,
    unregister_scorer,
)


@pytest.fixture
def clean_registry():
    """Restore the registry after a test that registers scorers."""
    saved = dict(rs._REGISTRY)
    yield
    rs._REGISTRY.clear()
    rs._REGISTRY.update(saved)


@pytest.mark.parametrize(
    ("data_source", "solution", "ground_truth", "expected"),
    [
        ("openai/gsm8k", "so 72\n#### 72", "72", 1.0),
        ("openai/gsm8k", "#### 71", "72", 0.0),
        ("gsm8k", "#### 1,234", "1234", 1.0),
        ("gsm8k", "the answer is 72", "72", 0.0),  # strict by default
        ("arithmetic", "37 + 48 = 85\n#### 85", "85", 1.0),
        ("arithmetic", "#### 84", "85", 0.0),
        ("countdown", "#### (25 - 5) * 3", {"target": 60, "numbers": [25, 5, 3]}, 1.0),
        ("countdown", "#### (25 - 5) * 3", '{"target": 60, "numbers": [25, 5, 3]}', 1.0),
        ("countdown", "#### (25 - 5) * 3", {"target": 60, "numbers": np.array([3, 5, 25])}, 1.0),
        ("countdown", "#### 25 + 5 + 3", {"target": 60, "numbers": [25, 5, 3]}, 0.0),
    ],
)
def test_dispatch(data_source, solution, ground_truth, expected):
    assert default_compute_score(data_source, solution, ground_truth) == expected


def test_builtin_scorers():
    assert get_scorer("openai/gsm8k") is gsm8k.compute_score
    assert get_scorer("gsm8k") is gsm8k.compute_score
    assert get_scorer("arithmetic") is arithmetic.compute_score
    assert get_scorer("countdown") is countdown.compute_score
    assert {"openai/gsm8k", "gsm8k", "arithmetic", "countdown"} <= set(registered_data_sources())


def test_alias():
    assert _default_compute_score is default_compute_score


def test_keyword_call_and_extra_info_dropped_for_builtins():
    result = default_compute_score(
        data_source="gsm8k", solution_str="#### 72", ground_truth="72", extra_info={"split": "train", "index": 3}
    )
    assert result == 1.0


def test_kwargs_forwarded_when_accepted_and_dropped_otherwise():
    assert default_compute_score("gsm8k", "#### 71", "72", format_score=0.1) == 0.1
    assert default_compute_score("gsm8k", "answer: 72", "72", method="flexible") == 1.0
    assert default_compute_score("countdown", "#### 60", {"target": 60, "numbers": [25, 5, 3]}, format_score=0.2) == 0.2
    # infrastructure kwargs that verl passes (e.g. sandbox settings) do not break built-in scorers
    assert default_compute_score("arithmetic", "#### 85", "85", sandbox_fusion_url=None, memory_limit_mb=1024) == 1.0


@pytest.mark.parametrize(
    ("data_source", "solution"),
    [("gsm8k", None), ("gsm8k", ""), ("arithmetic", None), ("countdown", None), ("countdown", "#### 2**99999")],
)
def test_builtins_never_raise(data_source, solution):
    gt = {"target": 60, "numbers": [25, 5, 3]} if data_source == "countdown" else "72"
    assert default_compute_score(data_source, solution, gt) == 0.0


@pytest.mark.parametrize("data_source", ["unknown/source", "", "GSM8K", None, ["gsm8k"]])
def test_unknown_data_source(data_source):
    with pytest.raises(NotImplementedError) as exc_info:
        default_compute_score(data_source, "#### 1", "1")
    message = str(exc_info.value)
    assert repr(data_source) in message
    for name in ("'openai/gsm8k'", "'gsm8k'", "'arithmetic'", "'countdown'"):
        assert name in message
    assert "custom_reward_function.path" in message
    assert "custom_reward_function.name" in message
    assert "register_scorer" in message
    with pytest.raises(NotImplementedError):
        get_scorer(data_source)


def test_register_decorator_dict_result(clean_registry):
    @register_scorer("my_source")
    def my_score(solution_str, ground_truth, extra_info=None):
        return {"score": float(solution_str == ground_truth), "split": extra_info["split"]}

    assert get_scorer("my_source") is my_score
    result = default_compute_score("my_source", "a", "a", extra_info={"split": "val"})
    assert result == {"score": 1.0, "split": "val"}  # passed through unchanged
    assert "my_source" in registered_data_sources()


def test_register_function_form_and_aliases(clean_registry):
    def exact(solution_str, ground_truth):
        return 1.0 if solution_str == ground_truth else 0.0

    assert register_scorer(["alias_a", "alias_b"], exact) is exact
    assert default_compute_score("alias_a", "x", "x", extra_info={"ignored": True}) == 1.0
    assert default_compute_score("alias_b", "x", "y") == 0.0
    assert register_scorer("alias_c")(exact) is exact
    assert get_scorer("alias_c") is exact


def test_register_var_kwargs_receives_everything(clean_registry):
    seen = {}

    def spy(solution_str, ground_truth, **kwargs):
        seen.update(kwargs)
        return 0.5

    register_scorer("spy", spy)
    assert default_compute_score("spy", "s", "g", extra_info={"k": 1}, foo="bar") == 0.5
    assert seen == {"extra_info": {"k": 1}, "foo": "bar"}


def test_register_duplicate_and_overwrite(clean_registry):
    def first(solution_str, ground_truth):
        return 0.0

    def second(solution_str, ground_truth):
        return 1.0

    with pytest.raises(ValueError, match="already registered"):
        register_scorer("gsm8k", first)
    assert get_scorer("gsm8k") is gsm8k.compute_score
    register_scorer("gsm8k", second, overwrite=True)
    assert default_compute_score("gsm8k", "#### 1", "2") == 1.0


def test_register_invalid(clean_registry):
    with pytest.raises(TypeError):
        register_scorer("bad", 42)
    with pytest.raises(ValueError):
        register_scorer("")
    with pytest.raises(ValueError):
        register_scorer([])
    assert "bad" not in registered_data_sources()


def test_unregister(clean_registry):
    def fn(solution_str, ground_truth):
        return 1.0

    register_scorer("temp", fn)
    assert unregister_scorer("temp") is fn
    with pytest.raises(NotImplementedError):
        default_compute_score("temp", "", "")
    with pytest.raises(KeyError):
        unregister_scorer("temp")


def test_registry_restored_by_fixture():
    assert "my_source" not in registered_data_sources()
    assert get_scorer("gsm8k") is gsm8k.compute_score
