"""Built-in task generators: row format, determinism, split hygiene, builtin:// specs, CLI."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verl.data import TASKS, make_task_dataset, resolve_data_files
from verl.data.tasks import (
    DEFAULT_TEST_SIZE,
    DEFAULT_TRAIN_SIZE,
    generate_task_rows,
    problem_key,
    write_rows_to_parquet,
)
from verl.data.tasks.countdown import format_expr

REPO_ROOT = Path(__file__).resolve().parents[2]


def _default_compute_score():
    module = pytest.importorskip("verl.utils.reward_score")
    if not hasattr(module, "default_compute_score"):
        pytest.skip("default_compute_score not available yet")
    return module.default_compute_score


def _eval_countdown(expression: str) -> tuple[Fraction, list[int]]:
    """Exact value and the literals of a + - * / expression (no eval)."""
    literals: list[int] = []

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            literals.append(node.value)
            return Fraction(node.value)
        if isinstance(node, ast.BinOp):
            left, right = walk(node.left), walk(node.right)
            ops = {ast.Add: left.__add__, ast.Sub: left.__sub__, ast.Mult: left.__mul__, ast.Div: left.__truediv__}
            return ops[type(node.op)](right)
        raise AssertionError(f"unexpected syntax in {expression!r}: {ast.dump(node)}")

    return walk(ast.parse(expression, mode="eval")), literals


# ---- row format -------------------------------------------------------------------------------


def test_arithmetic_row_schema_exact():
    rows = generate_task_rows("arithmetic", "train", 50, seed=3)
    assert len(rows) == 50
    for index, row in enumerate(rows):
        assert list(row) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
        assert row["data_source"] == "arithmetic" and row["ability"] == "math"
        assert row["reward_model"] == {"style": "rule", "ground_truth": row["reward_model"]["ground_truth"]}
        assert row["extra_info"].keys() == {"split", "index", "question", "answer"}
        assert row["extra_info"]["split"] == "train" and row["extra_info"]["index"] == index
        question = row["extra_info"]["question"]
        assert row["prompt"] == [{"role": "user", "content": question}]
        a, op, b = question.removeprefix("What is ").removesuffix("?").split(" ")
        assert question == f"What is {a} {op} {b}?" and op == "+"
        assert 10 <= int(a) <= 99 and 10 <= int(b) <= 99
        truth = row["reward_model"]["ground_truth"]
        assert isinstance(truth, str) and truth == str(int(a) + int(b))
        assert row["extra_info"]["answer"] == f"{a} {op} {b} = {truth}\n#### {truth}"


def test_arithmetic_options_digits_and_ops():
    rows = generate_task_rows("arithmetic", "train", 250, seed=0, min_digits=1, max_digits=1, ops="+,-,*")
    seen_ops = set()
    for row in rows:
        a, op, b = row["extra_info"]["question"].removeprefix("What is ").removesuffix("?").split(" ")
        assert 0 <= int(a) <= 9 and 0 <= int(b) <= 9
        seen_ops.add(op)
        expected = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
        assert row["reward_model"]["ground_truth"] == str(expected)
    assert seen_ops == {"+", "-", "*"}
    assert any(row["reward_model"]["ground_truth"].startswith("-") for row in rows)


def test_countdown_row_schema_and_solutions():
    rows = generate_task_rows("countdown", "train", 300, seed=0)
    for index, row in enumerate(rows):
        assert list(row) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
        assert row["data_source"] == "countdown" and row["ability"] == "math"
        assert row["reward_model"]["style"] == "rule"
        truth = row["reward_model"]["ground_truth"]
        assert list(truth) == ["target", "numbers"]
        target, numbers = truth["target"], truth["numbers"]
        assert isinstance(target, int) and 1 <= target <= 100
        assert len(numbers) == 3 and all(isinstance(n, int) and 1 <= n <= 20 for n in numbers)
        question = row["extra_info"]["question"]
        assert question == f"Use {', '.join(map(str, numbers))} to make {target}. Each number once, + - * /."
        assert row["prompt"] == [{"role": "user", "content": question}]
        assert row["extra_info"]["split"] == "train" and row["extra_info"]["index"] == index
        head, expression = row["extra_info"]["answer"].split("\n#### ")
        assert head == f"{expression} = {target}"
        value, literals = _eval_countdown(expression)
        assert value == target
        assert Counter(literals) == Counter(numbers)


@pytest.mark.parametrize("kwargs", [{"num_numbers": 4, "max_number": 6}, {"num_numbers": 5, "max_number": 9}])
def test_countdown_other_sizes_listed_and_sampled(kwargs):
    # 4 numbers up to 6 is listed in full, 5 numbers is sampled from random expression trees.
    rows = generate_task_rows("countdown", "test", 40, seed=1, **kwargs)
    assert len({problem_key("countdown", r) for r in rows}) == 40
    for row in rows:
        truth = row["reward_model"]["ground_truth"]
        assert len(truth["numbers"]) == kwargs["num_numbers"]
        value, literals = _eval_countdown(row["extra_info"]["answer"].split("\n#### ")[1])
        assert value == truth["target"] and Counter(literals) == Counter(truth["numbers"])


def test_format_expr_minimal_parentheses():
    assert format_expr(("*", ("+", 3, 5), 2)) == "(3 + 5) * 2"
    assert format_expr(("-", 9, ("-", 5, 2))) == "9 - (5 - 2)"
    assert format_expr(("-", ("-", 9, 5), 2)) == "9 - 5 - 2"
    assert format_expr(("/", 8, ("*", 2, 2))) == "8 / (2 * 2)"
    assert format_expr(("+", 1, ("*", 2, 3))) == "1 + 2 * 3"


# ---- determinism, splits, dedup ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(TASKS))
def test_determinism_by_seed(task):
    first = generate_task_rows(task, "train", 100, seed=7)
    assert generate_task_rows(task, "train", 100, seed=7) == first
    assert generate_task_rows(task, "train", 100, seed=8) != first
    # A smaller request is a prefix of a larger one with the same seed.
    assert generate_task_rows(task, "train", 40, seed=7) == first[:40]


@pytest.mark.slow
def test_parquet_files_byte_identical(tmp_path):
    a = make_task_dataset("countdown", tmp_path / "a", train_size=60, test_size=20, seed=5)
    b = make_task_dataset("countdown", tmp_path / "b", train_size=60, test_size=20, seed=5)
    for split in ("train", "test"):
        assert Path(a[split]).read_bytes() == Path(b[split]).read_bytes()


@pytest.mark.parametrize(
    "task,train_size,test_size,kwargs",
    [
        ("arithmetic", DEFAULT_TRAIN_SIZE, DEFAULT_TEST_SIZE, {}),
        ("arithmetic", 150, 12, {"min_digits": 1, "max_digits": 1, "ops": "+-"}),
        ("countdown", DEFAULT_TRAIN_SIZE, DEFAULT_TEST_SIZE, {}),
        ("countdown", 300, 30, {"num_numbers": 5}),
    ],
)
def test_train_test_disjoint_by_problem_and_no_duplicates(task, train_size, test_size, kwargs):
    train = [problem_key(task, r) for r in generate_task_rows(task, "train", train_size, seed=0, **kwargs)]
    test = [problem_key(task, r) for r in generate_task_rows(task, "test", test_size, seed=0, **kwargs)]
    assert len(train) == train_size and len(test) == test_size
    assert len(set(train)) == len(train)
    assert len(set(test)) == len(test)
    assert not set(train) & set(test)


def test_split_disjoint_whatever_sizes():
    # The split is a property of the problem, so independently sized requests never overlap.
    train = {problem_key("arithmetic", r) for r in generate_task_rows("arithmetic", "train", 6000, seed=2)}
    test = {problem_key("arithmetic", r) for r in generate_task_rows("arithmetic", "test", 700, seed=2)}
    assert len(train) == 6000 and len(test) == 700 and not train & test


@pytest.mark.slow
def test_countdown_key_ignores_number_order():
    rows = generate_task_rows("countdown", "train", 2000, seed=0)
    keys = [problem_key("countdown", r) for r in rows]
    assert len(set(keys)) == len(keys)
    multisets = Counter(tuple(sorted(r["reward_model"]["ground_truth"]["numbers"])) for r in rows)
    assert max(multisets.values()) > 1  # same numbers recur only with different targets


# ---- reference answers score 1.0 --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "task,kwargs",
    [
        ("arithmetic", {"ops": "+-*"}),
        ("arithmetic", {"terms": 3, "ops": "+-*", "mul_digits": 1}),
        ("arithmetic", {"terms": 3, "ops": "+-", "style": "steps"}),
        ("arithmetic", {"style": "answer", "reward": "partial"}),
        ("countdown", {}),
        ("countdown", {"num_numbers": 5}),
    ],
)
def test_reference_answers_score_one(task, kwargs):
    score_fn = _default_compute_score()
    for split in ("train", "test"):
        for row in generate_task_rows(task, split, 150, seed=4, **kwargs):
            result = score_fn(
                row["data_source"], row["extra_info"]["answer"], row["reward_model"]["ground_truth"], row["extra_info"]
            )
            score = result["score"] if isinstance(result, dict) else result
            assert score == 1.0, row


def test_reference_answers_score_one_after_parquet_roundtrip(tmp_path):
    score_fn = _default_compute_score()
    paths = make_task_dataset("countdown", tmp_path, train_size=50, test_size=10, seed=0)
    for row in pq.read_table(paths["train"]).to_pylist():
        result = score_fn(row["data_source"], row["extra_info"]["answer"], row["reward_model"]["ground_truth"])
        assert (result["score"] if isinstance(result, dict) else result) == 1.0


# ---- parquet ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_make_task_dataset_parquet_roundtrip(tmp_path):
    paths = make_task_dataset("arithmetic", tmp_path / "nested" / "out", train_size=30, test_size=10, seed=0)
    assert paths == {
        "train": str(tmp_path / "nested/out/train.parquet"),
        "test": str(tmp_path / "nested/out/test.parquet"),
    }
    train = pq.read_table(paths["train"])
    assert train.num_rows == 30 and pq.read_table(paths["test"]).num_rows == 10
    assert train.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert train.to_pylist() == generate_task_rows("arithmetic", "train", 30, seed=0)
    assert str(train.schema.field("extra_info").type.field("index").type) == "int64"
    countdown = pq.read_table(make_task_dataset("countdown", tmp_path / "cd", 5, 5)["test"])
    truth_type = countdown.schema.field("reward_model").type.field("ground_truth").type
    assert [f.name for f in truth_type] == ["target", "numbers"]
    assert truth_type.field("target").type == pa.int64()
    assert pa.types.is_list(truth_type.field("numbers").type)
    assert truth_type.field("numbers").type.value_type == pa.int64()
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_write_rows_to_parquet_replaces_atomically(tmp_path):
    path = tmp_path / "x" / "rows.parquet"
    write_rows_to_parquet([{"a": 1}], path)
    write_rows_to_parquet([{"a": 2}, {"a": 3}], path)
    assert pq.read_table(path).to_pylist() == [{"a": 2}, {"a": 3}]
    assert sorted(p.name for p in path.parent.iterdir()) == ["rows.parquet"]


# ---- errors -----------------------------------------------------------------------------------


def test_too_small_problem_space():
    with pytest.raises(ValueError, match=r"only 100 distinct problems.*max_digits"):
        generate_task_rows("arithmetic", "train", 500, min_digits=1, max_digits=1)
    with pytest.raises(ValueError, match=r"distinct problems.*test split.*max_number"):
        make_task_dataset("countdown", "/nonexistent/never-written", train_size=10, test_size=5000, max_number=5)


def test_unknown_task_and_bad_options():
    with pytest.raises(ValueError, match=r"unknown task 'sudoku'.*arithmetic.*countdown"):
        generate_task_rows("sudoku", "train", 10)
    with pytest.raises(ValueError, match=r"unknown option.*digits"):
        generate_task_rows("arithmetic", "train", 10, digits=3)
    with pytest.raises(ValueError, match="ops"):
        generate_task_rows("arithmetic", "train", 10, ops="+/")
    with pytest.raises(ValueError, match="max_digits"):
        generate_task_rows("arithmetic", "train", 10, min_digits=3, max_digits=2)
    with pytest.raises(ValueError, match="split"):
        generate_task_rows("arithmetic", "valid", 10)


# ---- builtin:// specs -------------------------------------------------------------------------


def test_resolve_builtin_spec_generates_once(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_CACHE_DIR", str(tmp_path))
    path = resolve_data_files("builtin://arithmetic/test?size=30&seed=1&max_digits=3&ops=+,-")
    assert Path(path).name == "test.parquet"
    folder = Path(path).parent
    assert folder.parent == tmp_path / "datasets" and folder.name.startswith("arithmetic-")
    rows = pq.read_table(path).to_pylist()
    assert rows == generate_task_rows("arithmetic", "test", 30, seed=1, max_digits=3, ops=("+", "-"))
    assert {r["extra_info"]["question"].split(" ")[3] for r in rows} == {"+", "-"}
    assert pq.read_table(folder / "train.parquet").num_rows == DEFAULT_TRAIN_SIZE

    mtime = os.stat(path).st_mtime_ns
    assert resolve_data_files("builtin://arithmetic/test?size=30&seed=1&max_digits=3&ops=+,-") == path
    assert os.stat(path).st_mtime_ns == mtime  # cached, not regenerated
    # Same settings spelled differently share the cache; the train split of that folder is disjoint.
    assert resolve_data_files("builtin://arithmetic/train?seed=1&ops=%2B,-&max_digits=3&test_size=30") == str(
        folder / "train.parquet"
    )
    other = resolve_data_files("builtin://arithmetic/test?size=30&seed=2&max_digits=3&ops=+,-")
    assert Path(other).parent != folder


def test_resolve_builtin_defaults_and_passthrough(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_CACHE_DIR", str(tmp_path))
    path = resolve_data_files("builtin://countdown/test")
    assert pq.read_table(path).num_rows == DEFAULT_TEST_SIZE
    assert resolve_data_files("data/gsm8k/train.parquet") == "data/gsm8k/train.parquet"
    assert resolve_data_files(["builtin://countdown/test", "x.parquet"]) == [path, "x.parquet"]
    for bad, message in [
        ("builtin://arithmetic", "expected builtin://"),
        ("builtin://arithmetic/dev", "split"),
        ("builtin://nope/train", "unknown task"),
        ("builtin://arithmetic/train?colour=red", "unknown option 'colour'"),
        ("builtin://arithmetic/train?size=x", "bad value 'x' for 'size'"),
    ]:
        with pytest.raises(ValueError, match=message):
            resolve_data_files(bad)


@pytest.mark.slow
def test_resolve_builtin_concurrent_processes(tmp_path):
    code = "import sys; from verl.data import resolve_data_files; print(resolve_data_files(sys.argv[1]))"
    spec = "builtin://countdown/train?size=300&test_size=20&seed=9"
    env = {**os.environ, "VERL_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code, spec], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=120)[0].strip() for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    assert outputs[0] == outputs[1]
    assert pq.read_table(outputs[0]).to_pylist() == generate_task_rows("countdown", "train", 300, seed=9)
    assert sorted(p.name for p in Path(outputs[0]).parent.iterdir()) == ["params.json", "test.parquet", "train.parquet"]


# ---- CLI --------------------------------------------------------------------------------------


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "verl.data.tasks", *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.slow
def test_cli_arithmetic(tmp_path):
    out = tmp_path / "arith"
    args = [
        "--out-dir",
        str(out),
        "--train-size",
        "40",
        "--test-size",
        "8",
        "--seed",
        "3",
        "--ops",
        "+,-",
        "--max-digits",
        "3",
    ]
    proc = _run_cli("arithmetic", *args)
    assert proc.returncode == 0, proc.stderr
    assert f"train: {out / 'train.parquet'} (40 rows)" in proc.stdout
    assert f"test: {out / 'test.parquet'} (8 rows)" in proc.stdout
    expected = generate_task_rows("arithmetic", "train", 40, seed=3, ops="+-", max_digits=3)
    assert pq.read_table(out / "train.parquet").to_pylist() == expected


@pytest.mark.slow
def test_cli_countdown_and_errors(tmp_path):
    proc = _run_cli(
        "countdown", "--out-dir", str(tmp_path), "--train-size", "12", "--test-size", "4", "--num-numbers", "4"
    )
    assert proc.returncode == 0, proc.stderr
    rows = pq.read_table(tmp_path / "test.parquet").to_pylist()
    assert len(rows) == 4 and all(len(r["reward_model"]["ground_truth"]["numbers"]) == 4 for r in rows)
    proc = _run_cli("arithmetic", "--out-dir", str(tmp_path / "x"), "--min-digits", "1", "--max-digits", "1")
    assert proc.returncode == 2 and "distinct problems" in proc.stderr
    assert not (tmp_path / "x").exists()
    proc = _run_cli("arithmetic", "--out-dir", str(tmp_path / "y"), "--ops", "+,/")
    assert proc.returncode == 2 and "ops must be a non-empty selection of ['+', '-', '*'], got '+,/'" in proc.stderr


def test_no_rows_is_an_error_not_a_file_without_columns(tmp_path):
    with pytest.raises(ValueError, match="empty.parquet: no rows to write"):
        write_rows_to_parquet([], tmp_path / "empty.parquet")
    assert not (tmp_path / "empty.parquet").exists()


# ---- arithmetic variants (the learning suite's sibling tasks) ------------------------------------


def test_arithmetic_variants_keep_the_classic_rows_and_cache_identity():
    """The new options at their defaults change nothing: same rows, same builtin:// cache folder."""
    from verl.data.tasks import arithmetic

    classic = generate_task_rows("arithmetic", "test", 50, seed=3)
    explicit = generate_task_rows("arithmetic", "test", 50, seed=3, terms=2, style="work", reward="exact")
    assert classic == explicit
    assert arithmetic.TASK.normalize_params({}) == {"min_digits": 2, "max_digits": 2, "ops": ("+",)}


def test_arithmetic_three_terms_bind_like_python():
    rows = generate_task_rows("arithmetic", "train", 200, seed=1, terms=3, ops="+-*", mul_digits=1)
    for row in rows:
        expression = row["extra_info"]["question"].removeprefix("What is ").removesuffix("?")
        assert int(row["reward_model"]["ground_truth"]) == eval(expression)  # noqa: S307 (digits and + - * only)
        for right in expression.split(" * ")[1:]:
            assert len(right.split(" ")[0]) == 1  # the operand right of '*' has one digit


def test_arithmetic_styles_and_partial_reward():
    work, answer, steps = (
        generate_task_rows("arithmetic", "train", 1, seed=2, terms=3, style=style)[0]
        for style in ("work", "answer", "steps")
    )
    a, b, c = (int(x) for x in work["extra_info"]["question"][8:-1].split(" + "))
    assert work["extra_info"]["answer"] == f"{a} + {b} + {c} = {a + b + c}\n#### {a + b + c}"
    assert answer["extra_info"]["answer"] == f"#### {a + b + c}"
    assert steps["extra_info"]["answer"] == f"{a} + {b} = {a + b}\n{a + b} + {c} = {a + b + c}\n#### {a + b + c}"
    partial = generate_task_rows("arithmetic", "train", 1, seed=2, reward="partial")[0]
    assert partial["data_source"] == "arithmetic_partial" and work["data_source"] == "arithmetic"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"terms": 5}, "terms must be between 2 and 4"),
        ({"style": "essay"}, "style must be one of"),
        ({"reward": "fuzzy"}, "reward must be one of"),
        ({"style": "steps", "ops": "*"}, "style='steps'"),
        ({"mul_digits": 1}, "mul_digits=1 needs '\\*' in ops"),
        ({"ops": "*", "mul_digits": "x"}, "mul_digits must be an integer"),
    ],
)
def test_arithmetic_variant_errors_name_the_option(kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate_task_rows("arithmetic", "train", 1, **kwargs)


def test_builtin_spec_takes_the_variant_options(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_CACHE_DIR", str(tmp_path))
    path = resolve_data_files("builtin://arithmetic/test?size=20&ops=*&mul_digits=1&min_digits=2&max_digits=3")
    rows = pq.read_table(path).to_pylist()
    assert len(rows) == 20 and all(" * " in r["extra_info"]["question"] for r in rows)
