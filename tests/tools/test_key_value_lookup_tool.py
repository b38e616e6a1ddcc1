"""The key-value lookup: a per-sample table given in tools_kwargs, in each accepted form; unknown keys list the
keys."""

import asyncio

import pytest

from verl.tools import KeyValueLookupTool, call_tool


def _lookup(key, tool_kwargs, tool=None):
    return asyncio.run(call_tool(tool or KeyValueLookupTool(), {"key": key}, tool_kwargs, timeout_s=5))


TABLE = {"alice": "Paris", "bob": "Lima", "carol": 42}


@pytest.mark.parametrize(
    "table",
    [
        TABLE,
        '{"alice": "Paris", "bob": "Lima", "carol": 42}',
        [["alice", "Paris"], ["bob", "Lima"], ["carol", 42]],
        [{"key": "alice", "value": "Paris"}, {"key": "bob", "value": "Lima"}, {"key": "carol", "value": 42}],
        {**TABLE, "dave": None},  # parquet fills keys other rows have with null: dropped
    ],
)
def test_lookup_in_every_table_form(table):
    kwargs = {"create_kwargs": {"table": table}}
    assert _lookup("bob", kwargs).response.text == "Lima"
    assert _lookup(" carol ", kwargs).response.text == "42"  # surrounding spaces ignored; non-text as JSON
    missing = _lookup("erin", kwargs)
    assert missing.error_kind == "tool_error"
    assert missing.response.text == "Error: no such key: erin; keys are alice, bob, carol"


def test_each_sample_has_its_own_table():
    tool = KeyValueLookupTool()
    assert _lookup("k", {"create_kwargs": {"table": {"k": "one"}}}, tool).response.text == "one"
    assert _lookup("k", {"create_kwargs": {"table": {"k": "two"}}}, tool).response.text == "two"
    assert tool._tables == {}  # released after each call


def test_a_long_key_list_is_cut():
    table = {f"k{i}": i for i in range(25)}
    text = _lookup("zz", {"create_kwargs": {"table": table}}).response.text
    assert text.startswith("Error: no such key: zz; keys are k0, k1,") and text.endswith("k19, ... (5 more)")


def test_the_yaml_table_serves_rows_without_one():
    tool = KeyValueLookupTool({"table": {"pi": "3.14159"}})
    assert _lookup("pi", {}, tool).response.text == "3.14159"


def test_a_row_without_a_table_says_where_to_put_it():
    result = _lookup("a", {"create_kwargs": {}})
    assert result.error_kind == "exception"
    assert (
        "key_value_lookup needs a table: give extra_info.tools_kwargs.key_value_lookup.create_kwargs.table"
        in result.response.text
    )


def test_verls_older_keyword_create():
    async def main():
        tool = KeyValueLookupTool()
        instance_id, _ = await tool.create("i0", table={"a": "b"})
        return await tool.execute(instance_id, {"key": "a"})

    response, reward, metrics = asyncio.run(main())
    assert response.text == "b" and reward == 0.0 and metrics == {}
