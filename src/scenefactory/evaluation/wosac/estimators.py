"""Histogram and Bernoulli log-likelihood estimators of WOSAC, batched over objects.

Follows ``wdl_limited/sim_agents_metrics/estimators.py`` (``histogram_estimate``,
``bernoulli_estimate``, ``_log_likelihood_estimate_timeseries_agent_level`` with
``independent_timesteps``) and the binning of ``tfp.stats.histogram`` that it calls (checked against
tensorflow-probability 0.21): ``num_bins + 1`` float32 edges from ``linspace(min, max)``; values
clipped into ``[min, max]``; bins half-open ``[a, b)`` except the last, which holds ``max``; a NaN
(the central differences' padding at a trajectory's end, pooled with the simulated values) falls in
the **last** bin, as ``tfp.stats.histogram`` puts it there. The categorical of an object is its
counts plus the pseudocount, normalised; each logged value scores the log-probability of its bin.
"""

from __future__ import annotations

import numpy as np
import torch

from scenefactory.evaluation.wosac.config import FeatureConfig

BERNOULLI_MIN, BERNOULLI_MAX, BERNOULLI_BINS = -0.5, 1.5, 2
"""``bernoulli_estimate``: a 2-bin histogram over [-0.5, 1.5] of the events cast to 0.0 / 1.0."""


def edges(min_val: float, max_val: float, num_bins: int) -> torch.Tensor:
    """(num_bins + 1,) float32 bin edges, ``tf.linspace`` of the float32 config values."""
    lo, hi = np.float32(min_val), np.float32(max_val)
    step = (hi - lo) / np.float32(num_bins)
    e = lo + np.arange(num_bins + 1, dtype=np.float32) * step
    e[-1] = hi
    return torch.from_numpy(e.astype(np.float32))


def bin_index(values: torch.Tensor, min_val: float, max_val: float, num_bins: int) -> torch.Tensor:
    """(...) int64 bin of each value (clipped into range; NaN in the last bin)."""
    e = edges(min_val, max_val, num_bins)
    v = values.to(torch.float32).clamp(float(e[0]), float(e[-1]))
    idx = torch.searchsorted(e, v.contiguous(), right=True) - 1
    idx = idx.clamp(0, num_bins - 1)
    return torch.where(torch.isnan(v), num_bins - 1, idx)


def histogram_log_likelihood(
    log_values: torch.Tensor,
    sim_values: torch.Tensor,
    min_val: float,
    max_val: float,
    num_bins: int,
    pseudocount: float,
) -> torch.Tensor:
    """(M, Lg) log-probability of each logged value ``log_values`` (M, Lg) under the histogram of the
    simulated values ``sim_values`` (M, S) of the same population m."""
    m = sim_values.shape[0]
    if log_values.shape[0] != m:
        raise ValueError(f"histogram: {log_values.shape[0]} logged populations, {m} simulated")
    sim_bins = bin_index(sim_values, min_val, max_val, num_bins)
    counts = torch.zeros(m, num_bins, dtype=torch.float32)
    counts.scatter_add_(1, sim_bins, torch.ones_like(sim_bins, dtype=torch.float32))
    counts += float(np.float32(pseudocount))
    log_prob = torch.log(counts) - torch.log(counts.sum(dim=1, keepdim=True))
    return torch.gather(log_prob, 1, bin_index(log_values, min_val, max_val, num_bins))


def feature_log_likelihood(
    cfg: FeatureConfig, log_values: torch.Tensor, sim_values: torch.Tensor
) -> torch.Tensor:
    """Per-object estimator of a feature (``independent_timesteps``: an object's simulated values
    pooled over rollouts and steps). ``log_values`` (E, T), ``sim_values`` (R, E, T) → (E, T); for a
    Bernoulli feature booleans ``log_values`` (E,), ``sim_values`` (R, E) → (E,)."""
    if cfg.bernoulli:
        if log_values.dtype != torch.bool or sim_values.dtype != torch.bool:
            raise ValueError("a Bernoulli feature needs boolean values")
        return histogram_log_likelihood(
            log_values.to(torch.float32)[:, None],
            sim_values.to(torch.float32).T,
            BERNOULLI_MIN,
            BERNOULLI_MAX,
            BERNOULLI_BINS,
            cfg.pseudocount,
        )[:, 0]
    r, e, t = sim_values.shape
    pooled = sim_values.permute(1, 0, 2).reshape(e, r * t)
    return histogram_log_likelihood(
        log_values, pooled, cfg.min_val, cfg.max_val, cfg.num_bins, cfg.pseudocount
    )
