"""docs/config_reference.md is generated from the YAML trees and current; every key there says what it does."""

import os

import pytest

from verl.utils.config import CONFIG_DIR, load_yaml
from verl.utils.config_reference import JOBS, leaf_keys, reference, yaml_key_comments

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_committed_reference_is_current():
    with open(os.path.join(ROOT, "docs", "config_reference.md")) as f:
        committed = f.read()
    assert committed == reference(), "regenerate: python -m verl.utils.config_reference > docs/config_reference.md"


@pytest.mark.parametrize("job", [job for job, _ in JOBS])
def test_every_key_is_parsed_and_commented(job):
    path = os.path.join(CONFIG_DIR, f"{job}.yaml")
    rows = {key: comment for key, _, comment in yaml_key_comments(path)}
    leaves = leaf_keys(load_yaml(path))
    assert set(leaves) <= set(rows)  # the line parser finds every key yaml.safe_load finds
    uncommented = [k for k in leaves if not rows[k]]
    assert not uncommented, f"{job}.yaml keys without a comment: {uncommented}"


def test_parser_on_nested_sections(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("a:                # section A\n  b: 1   # one\n  c:\n    d: [x, y]  # list\ne: ${a.b}\n")
    assert yaml_key_comments(str(p)) == [
        ("a", "", "section A"),
        ("a.b", "1", "one"),
        ("a.c", "", ""),
        ("a.c.d", "[x, y]", "list"),
        ("e", "${a.b}", ""),
    ]
