"""docs/config_reference.md is generated from the schemas and current; every key there says what it does."""

import os
from dataclasses import dataclass

import pytest

from verl.base_config import BaseConfig
from verl.utils.config import job_schema, load_config, select
from verl.utils.config_reference import JOBS, field_comments, key_rows, reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_committed_reference_is_current():
    with open(os.path.join(ROOT, "docs", "config_reference.md")) as f:
        committed = f.read()
    assert committed == reference(), "regenerate: python -m verl.utils.config_reference > docs/config_reference.md"


@pytest.mark.parametrize("job", [job for job, _ in JOBS])
def test_every_key_is_listed_and_commented(job):
    rows = {key: comment for key, comment, _ in key_rows(job_schema(job))}
    loaded = load_config(job)
    leaves = [k for k, _, group in key_rows(job_schema(job)) if not group]
    missing = object()
    assert leaves and all(select(loaded, k, default=missing) is not missing for k in leaves)
    uncommented = [k for k, c in rows.items() if not c]
    assert not uncommented, f"{job} keys without a comment: {uncommented}"


@dataclass
class _Inner(BaseConfig):
    b: int = 1  # one
    c: list[str] = None  # list


@dataclass
class _Outer(BaseConfig):
    a: _Inner = None  # section A
    e: int = 2


def test_comment_parser_on_nested_sections():
    assert field_comments(_Outer) == {"a": "section A", "e": ""}
    assert key_rows(_Outer) == [
        ("a", "section A", True),
        ("a.b", "one", False),
        ("a.c", "list", False),
        ("e", "", False),
    ]
