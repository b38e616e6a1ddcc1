"""The fast-tier rule of tests/tiers.py: a test without the ``slow`` mark that runs over its time budget fails, with
a message that says to mark it; heavy tests are grouped for pytest-xdist."""

from __future__ import annotations

import textwrap

import tiers

pytest_plugins = ["pytester"]


def test_budget_scales_with_the_machine_and_can_be_turned_off(monkeypatch):
    monkeypatch.delenv(tiers.BUDGET_ENV, raising=False)
    assert tiers.budget_s(speed=1.0) == tiers.DEFAULT_BUDGET_S
    assert tiers.budget_s(speed=3.0) == 3 * tiers.DEFAULT_BUDGET_S  # an AVX2-only or busy machine
    assert tiers.budget_s(speed=50.0) == tiers.MAX_SLOWDOWN * tiers.DEFAULT_BUDGET_S  # clamped
    assert tiers.budget_s(speed=0.5) == tiers.DEFAULT_BUDGET_S  # a faster machine keeps the budget
    monkeypatch.setenv(tiers.BUDGET_ENV, "0")
    assert tiers.budget_s(speed=1.0) is None
    monkeypatch.setenv(tiers.BUDGET_ENV, "7.5")
    assert tiers.budget_s(speed=2.0) == 15.0


def test_heavy_tests_are_found_by_what_they_name():
    assert tiers.heavy_group("def test_x():\n    ray.init()\n") == "ray-vllm"
    assert tiers.heavy_group("cfg = 'actor_rollout_ref.rollout.name=vllm'\n") == "ray-vllm"
    assert tiers.heavy_group("def test_y(ray_cluster): ...") == "ray-vllm"  # a fixture that starts Ray
    assert tiers.heavy_group("def test_math():\n    assert array_sum([1]) == 1\n") is None
    assert tiers.NEEDS_HEAVY.search('ray = pytest.importorskip("ray")\n')  # the whole module needs Ray
    assert tiers.NEEDS_HEAVY.search("import vllm\n") and not tiers.NEEDS_HEAVY.search("    import ray\n")


CONFTEST = "from tiers import pytest_runtest_call, pytest_runtest_setup  # noqa: F401\n"


def test_a_slow_test_without_the_mark_fails_with_the_fix(pytester, monkeypatch):
    monkeypatch.syspath_prepend(str(tiers.HERE))
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    slow: long")
    pytester.makepyfile(
        test_x=textwrap.dedent(
            """
            import time
            import pytest

            def test_quick():
                assert True

            def test_sleeps():
                time.sleep(0.15)

            @pytest.mark.slow
            def test_marked():
                time.sleep(0.15)

            def test_sleeps_and_fails():
                time.sleep(0.15)
                assert 1 == 2
            """
        )
    )
    with monkeypatch.context() as inner:  # the inner run's budget only: this test keeps the real one
        inner.setenv(tiers.BUDGET_ENV, "0.05")
        inner.setenv(tiers.SPEED_ENV, "1")
        result = pytester.runpytest(*(f"-pno:{p}" for p in ("cacheprovider", "hypothesispytest", "benchmark", "anyio")))
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*test_sleeps took*over the fast tier's budget*@pytest.mark.slow*"])
    result.stdout.fnmatch_lines(["*assert 1 == 2*"])  # a failing slow test keeps its own error
