"""Model accuracy against closed-loop transfer: does the more accurate dynamics model train the
better policy?

Each point is one dynamics model a policy kind was trained in: its held-out prediction error (one
step, or the final position error of a 10-step open-loop rollout, [m]) against the goal reach on
the target tier of the policies trained in it (pooled over their seeds, Wilson 95 % CI). The
association is Spearman's rank correlation ρ (ties get average ranks) with an exact two-sided
permutation p-value: the share of the n! orderings of one variable whose |ρ| reaches the observed
one. With n points the smallest attainable p is 2/n! (0.083 for 4 points, 0.017 for 5), so with
the handful of models here ρ describes the points and cannot establish a trend.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from scenefactory.evaluation.plots import save_png
from scenefactory.experiments.results import Reader

MIN_POINTS = 3
"""Fewest points a rank correlation is computed on."""


@dataclass(frozen=True)
class AccuracyPoint:
    """One dynamics model: ``label``; held-out position errors [m] after one step (``one_step_m``)
    and at the end of 10- and 20-step open-loop rollouts (``rollout10_m``, ``rollout20_m``), each
    ``None`` when unknown; ``goal`` the goal reach on the target of the policies trained in it with
    ``goal_ci95``; ``learned`` False for a reference model (the plain bicycle)."""

    label: str
    one_step_m: float | None
    rollout10_m: float | None
    rollout20_m: float | None
    goal: float
    goal_ci95: tuple[float, float]
    learned: bool = True

    def to_json(self) -> dict[str, Any]:
        """Plain data (the fields by name)."""
        return {**asdict(self), "goal_ci95": list(self.goal_ci95)}

    @classmethod
    def from_json(cls, r: Reader) -> AccuracyPoint:
        """Inverse of :meth:`to_json`."""
        return cls(
            r.text("label"),
            r.opt_number("one_step_m"),
            r.opt_number("rollout10_m"),
            r.opt_number("rollout20_m"),
            r.number("goal"),
            r.interval("goal_ci95"),
            r.flag("learned"),
        )


@dataclass(frozen=True)
class Spearman:
    """Spearman's ``rho`` over ``n`` pairs with its exact two-sided permutation ``p`` (NaN when
    not computed: too few or too many points, or a constant variable)."""

    n: int
    rho: float
    p: float


@dataclass(frozen=True)
class Correlation:
    """The rank correlation between one held-out ``error`` of the models (``one_step`` or
    ``rollout10``) and the goal reach of the policies trained in them, over the ``models`` group:
    ``learned`` (the learned models only) or ``all`` (with the reference models too)."""

    models: str
    error: str
    spearman: Spearman

    def to_json(self) -> dict[str, Any]:
        """Plain data: ``models``, ``error``, ``n``, ``rho``, ``p``."""
        s = self.spearman
        return {"models": self.models, "error": self.error, "n": s.n, "rho": s.rho, "p": s.p}

    @classmethod
    def from_json(cls, r: Reader) -> Correlation:
        """Inverse of :meth:`to_json`."""
        return cls(
            r.text("models"), r.text("error"), Spearman(r.integer("n"), r.number("rho"), r.number("p"))
        )


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1 … n) of ``x`` (n,), ties sharing the mean of their ranks."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1, dtype=np.float64)
    for v in np.unique(x):
        tie = x == v
        ranks[tie] = ranks[tie].mean()
    return ranks


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else math.nan


def spearman(x: Sequence[float], y: Sequence[float]) -> Spearman:
    """Spearman's ρ of paired ``x``, ``y`` (n,) with its exact two-sided permutation ``p`` and ``n``.

    ``rho`` and ``p`` are NaN when n < :data:`MIN_POINTS`, n > 8 (the exact test enumerates n!
    orderings), or one variable is constant.
    """
    n = len(x)
    if n != len(y):
        raise ValueError(f"x and y must pair up, got {n} and {len(y)} values")
    none = Spearman(n, math.nan, math.nan)
    if n < MIN_POINTS or n > 8:
        return none
    rx, ry = _ranks(np.asarray(x, dtype=np.float64)), _ranks(np.asarray(y, dtype=np.float64))
    rho = _pearson(rx, ry)
    if not math.isfinite(rho):
        return none
    hits = total = 0
    for perm in itertools.permutations(range(n)):
        total += 1
        hits += abs(_pearson(rx, ry[list(perm)])) >= abs(rho) - 1e-12
    return Spearman(n, rho + 0.0, hits / total)


ERRORS: dict[str, str] = {"one_step": "one_step_m", "rollout10": "rollout10_m"}
"""The errors correlated with goal reach → the :class:`AccuracyPoint` field holding each."""


def correlations(points: Sequence[AccuracyPoint]) -> tuple[Correlation, ...]:
    """ρ between each error of :data:`ERRORS` and goal reach, over the learned models only
    (``models`` = ``learned``) and with the reference models too (``all``)."""
    out = []
    for group, pts in (("learned", [p for p in points if p.learned]), ("all", list(points))):
        for error, field in ERRORS.items():
            pairs = [(getattr(p, field), p.goal) for p in pts if getattr(p, field) is not None]
            out.append(Correlation(group, error, spearman([e for e, _ in pairs], [g for _, g in pairs])))
    return tuple(out)


def find_correlation(found: Sequence[Correlation], models: str, error: str) -> Spearman:
    """The correlation of ``error`` over the ``models`` group; ``KeyError`` when there is none."""
    for c in found:
        if (c.models, c.error) == (models, error):
            return c.spearman
    raise KeyError(f"no correlation of {error!r} over {models!r} models")


def describe(corr: Spearman) -> str:
    """One sentence on a correlation: ρ and p, or why there is none."""
    n = corr.n
    if not math.isfinite(corr.rho):
        why = f"too few points ({n})" if n < MIN_POINTS else "one variable is constant"
        return f"no rank correlation ({why})"
    floor = 2.0 / math.factorial(n)
    return (
        f"Spearman ρ = {corr.rho:+.2f} over {n} models (exact permutation p = {corr.p:.2f}; "
        f"with {n} points p cannot fall below {floor:.3f})"
    )


def plot_accuracy(
    path: Path,
    points: Sequence[AccuracyPoint],
    reference: Mapping[str, float],
    title: str,
    ylabel: str = "goal reach on the target",
) -> Path:
    """Two panels (1-step and 10-step held-out error [m] on x) of goal reach on y with 95 % CI
    whiskers, one labelled point per model (reference models grey); dashed horizontal lines at the
    ``reference`` goal reaches (label → rate, e.g. the policies trained on the target itself)."""
    fig = Figure(figsize=(9.0, 4.0), facecolor="white")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, squeeze=False)[0]
    for ax, (attr, xlabel) in zip(
        axes,
        (("one_step_m", "held-out 1-step position error (m)"), ("rollout10_m", "held-out 10-step error (m)")),
        strict=True,
    ):
        for p in points:
            x = getattr(p, attr)
            if x is None or not math.isfinite(x):
                continue
            lo, hi = p.goal_ci95
            color = "#1f6fd1" if p.learned else "#888888"
            err = [[max(p.goal - lo, 0.0)], [max(hi - p.goal, 0.0)]]
            ax.errorbar([x], [p.goal], yerr=err, fmt="o", color=color, ecolor=color, capsize=3)
            ax.annotate(p.label, (x, p.goal), textcoords="offset points", xytext=(5, 4), fontsize=8)
        for (label, rate), ls in zip(reference.items(), ("--", ":", "-."), strict=False):
            if math.isfinite(rate):
                ax.axhline(rate, color="#c0392b", lw=0.9, ls=ls, label=label)
        ax.set_xlabel(xlabel)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.set_ylabel(ylabel)
        ax.set_ylim(0.0, 1.05)
        ax.grid(color="#dddddd", lw=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    if reference:
        axes[0].legend(fontsize=8, frameon=False, loc="best")
    fig.suptitle(title + " (95 % CI)", fontsize=11)
    fig.tight_layout()
    return save_png(fig, path, dpi=110)
