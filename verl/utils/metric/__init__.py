"""Metric reduction (verl's ``verl.utils.metric``): `reduce_metrics`, `Metric`, `AggregationType`."""

from verl.utils.metric.utils import AggregationType, Metric, reduce_metrics

__all__ = ["AggregationType", "Metric", "reduce_metrics"]
