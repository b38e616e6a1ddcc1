"""`reduce_metrics` picks the reduction from the key, a `Metric` carries its own; both as verl's recipes use them."""

import math

import pytest
import torch

from verl.utils.metric import AggregationType, Metric, reduce_metrics


def test_reduction_follows_the_key_and_updates_in_place():
    metrics = {"actor/pg_loss": [1.0, 2.0, 6.0], "response_length/max": [3, 9, 4], "min_error": [0.5, 0.1]}
    metrics["actor/lr"] = 1e-6  # a single number is already reduced
    out = reduce_metrics(metrics)
    assert out is metrics  # verl callers read either the argument or the result
    assert out == {"actor/pg_loss": 3.0, "response_length/max": 9, "min_error": 0.1, "actor/lr": 1e-6}
    assert math.isnan(reduce_metrics({"empty": []})["empty"])


def test_metric_carries_its_reduction_through_merges():
    tokens = Metric("sum", [3, 4])
    tokens.append(torch.tensor(5))
    assert tokens.aggregate() == 12 and tokens.aggregation is AggregationType.SUM
    assert reduce_metrics({"tokens": tokens, "loss": [1.0, 3.0]}) == {"tokens": 12, "loss": 2.0}
    chained = Metric.chain([Metric("max", 1.0), Metric("max", 7.0)])
    assert chained.aggregate() == 7.0 and chained.init_list().values == []
    assert {k: m.aggregate() for k, m in Metric.from_dict({"a": 1.0}, "mean").items()} == {"a": 1.0}
    assert math.isnan(Metric("mean").aggregate())


def test_bad_values_and_mixed_reductions_are_clear_errors():
    with pytest.raises(ValueError, match="aggregation 'median'.*mean"):
        Metric("median")
    with pytest.raises(ValueError, match="scalar; got a tensor of shape \\(2,\\)"):
        Metric("mean").append(torch.ones(2))
    with pytest.raises(ValueError, match="not str"):
        Metric("mean").append("1.0")
    with pytest.raises(ValueError, match="cannot merge a sum Metric into a mean one"):
        Metric("mean").extend(Metric("sum", 1))
