"""Reducing per-micro-batch metric lists to one number per step (verl's ``verl.utils.metric``).

A worker appends one value per micro-batch (``metrics["actor/pg_loss"] = [0.31, 0.29, ...]``); the controller logs
one number per key. `reduce_metrics` picks the reduction from the key, as verl does: a key naming ``max`` keeps the
largest value, one naming ``min`` the smallest, any other the mean. A `Metric` carries its reduction with it
instead, for values whose key says nothing (a token count to sum, say).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from numbers import Real
from typing import Any

import numpy as np
import torch

__all__ = ["AggregationType", "Metric", "reduce_metrics"]


class AggregationType(Enum):
    MEAN = "mean"
    SUM = "sum"
    MIN = "min"
    MAX = "max"


_REDUCE = {
    AggregationType.MEAN: np.mean,
    AggregationType.SUM: np.sum,
    AggregationType.MIN: np.min,
    AggregationType.MAX: np.max,
}


class Metric:
    """Values of one metric and how they become one number: ``Metric("sum", 3)``, ``.append(4)``,
    ``.aggregate() == 7``. Values are Python numbers or one-element tensors (stored as numbers, so a Metric never
    holds a graph or a device buffer)."""

    def __init__(self, aggregation: str | AggregationType, value: Any = None) -> None:
        try:
            self.aggregation = AggregationType(aggregation)
        except ValueError:
            names = [a.value for a in AggregationType]
            raise ValueError(f"Metric aggregation {aggregation!r}: use one of {names}") from None
        self.values: list[float | int] = []
        if isinstance(value, (list, tuple)):
            self.extend(value)
        elif value is not None:
            self.append(value)

    def append(self, value: Any) -> None:
        """Add one value (a `Metric` adds all of its values)."""
        if isinstance(value, Metric):
            self.extend(value)
            return
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ValueError(f"a Metric value must be a scalar; got a tensor of shape {tuple(value.shape)}")
            value = value.detach().item()
        if not isinstance(value, Real):
            raise ValueError(f"a Metric value must be a number or a scalar tensor, not {type(value).__name__}")
        self.values.append(value)

    def extend(self, values: Metric | Iterable[Any]) -> None:
        """Add several values; another `Metric` must reduce the same way (its values would mean something else)."""
        if isinstance(values, Metric):
            if values.aggregation != self.aggregation:
                raise ValueError(
                    f"cannot merge a {values.aggregation.value} Metric into a {self.aggregation.value} one"
                )
            values = values.values
        for value in values:
            self.append(value)

    def aggregate(self) -> float:
        """The one number (NaN for no values, as numpy's mean of nothing)."""
        if not self.values:
            return float("nan")
        return _REDUCE[self.aggregation](self.values).item()

    def init_list(self) -> Metric:
        """An empty Metric reducing the same way (for the next step's values)."""
        return Metric(self.aggregation)

    @classmethod
    def chain(cls, metrics: Iterable[Metric]) -> Metric:
        """One Metric holding the values of all ``metrics`` in order (mean of nothing when there are none)."""
        metrics = list(metrics)
        out = cls(metrics[0].aggregation if metrics else AggregationType.MEAN)
        for m in metrics:
            out.extend(m)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], aggregation: str | AggregationType) -> dict[str, Metric]:
        """``{key: Metric(aggregation, value)}`` for every entry of ``data``."""
        return {key: cls(aggregation, value) for key, value in data.items()}

    def __repr__(self) -> str:
        return f"Metric({self.aggregation.value!r}, {self.values})"


def _reduce_values(key: str, values: Any) -> Any:
    if isinstance(values, Metric):
        return values.aggregate()
    if isinstance(values, torch.Tensor):
        values = values.detach().float().cpu().numpy()
    if isinstance(values, (list, tuple, np.ndarray)):
        if len(values) == 0:
            return float("nan")
        fn = np.max if "max" in key else np.min if "min" in key else np.mean
        return fn(values).item()
    return values  # a single number (or a note) is already reduced


def reduce_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """Each list (or `Metric`) of ``metrics`` replaced by one number: ``max`` in the key -> the largest, ``min`` ->
    the smallest, else the mean (NaN for an empty list); single numbers stay as they are.

    Like verl, the dict is updated in place and returned, so both ``reduce_metrics(m)`` followed by reading ``m``
    and ``out = reduce_metrics(m)`` work."""
    for key in list(metrics):
        metrics[key] = _reduce_values(key, metrics[key])
    return metrics
