"""Confidence intervals for success rates and means (95 %, used by every evaluation table)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from scipy import stats as scipy_stats

Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when ``n`` is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: torch.Tensor) -> tuple[float, float, float]:
    """``(mean, low, high)`` with a normal-approximation 95 % interval; NaNs when empty."""
    n = int(values.numel())
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = float(values.double().mean())
    if n == 1:
        return mean, mean, mean
    half = Z95 * float(values.double().std()) / math.sqrt(n)
    return mean, mean - half, mean + half


def t_interval(
    values: Sequence[float], low: float = -math.inf, high: float = math.inf
) -> tuple[float, float, float]:
    """``(mean, low, high)`` of ``values`` (one per training seed) with a Student-t 95 % interval
    (n − 1 degrees of freedom), clipped to ``[low, high]`` where the quantity is bounded (a rate's
    [0, 1], a difference of rates' [−1, 1]); a point for one value, NaNs for none."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = math.fsum(values) / n
    if n == 1:
        return mean, mean, mean
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(scipy_stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean, max(low, mean - half), min(high, mean + half)
