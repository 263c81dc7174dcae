"""How much of a transfer gap a method closes, with a scene-paired bootstrap interval.

Every policy kind is evaluated on the same held-out scenes, so the kinds' rates are compared with
the scenes resampled together: one bootstrap draw picks S scenes with replacement (S = the number
of held-out scenes) and every kind's rate is recomputed over the agent-episodes of the drawn
scenes (all of a kind's policies pooled). The fraction of the gap closed by a method is

    gap(m) = (rate(m) − rate(base)) / (rate(top) − rate(base)),

0 for the baseline (``base``: direct transfer), 1 for the reference (``top``: the oracle trained
on the target). Its 95 % interval is the 2.5–97.5 percentile of the draws; draws where
rate(top) = rate(base) (no gap to close) are left out and counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scenefactory.experiments.results import Difference, Reader
from scenefactory.tasks.driving.env import FinishedEpisodes
from scenefactory.tasks.driving.status import AgentStatus

OUTCOMES: dict[str, AgentStatus] = {
    "goal_reach_rate": AgentStatus.GOAL,
    "collision_rate": AgentStatus.COLLISION,
    "offroad_rate": AgentStatus.OFFROAD,
}
"""Metric key → the agent outcome it counts."""

DRAWS = 2000
"""Bootstrap draws."""


@dataclass(frozen=True)
class GapClosed:
    """How much of the ``metric`` gap from the base kind to the reference kind policies of ``kind``
    close (module docstring): their pooled ``rate``, the fraction ``gap_closed``
    (NaN when there is no gap) with its scene-paired bootstrap ``ci95``, the draws used and those
    left out for want of a gap."""

    kind: str
    metric: str
    rate: float
    gap_closed: float
    ci95: tuple[float, float]
    draws_used: int
    draws_without_gap: int

    def to_json(self) -> dict[str, Any]:
        """Plain data: the fields by name (``ci95`` as ``gap_closed_ci95``)."""
        return {
            "kind": self.kind,
            "metric": self.metric,
            "rate": self.rate,
            "gap_closed": self.gap_closed,
            "gap_closed_ci95": list(self.ci95),
            "draws_used": self.draws_used,
            "draws_without_gap": self.draws_without_gap,
        }

    @classmethod
    def from_json(cls, r: Reader) -> GapClosed:
        """Inverse of :meth:`to_json`."""
        return cls(
            kind=r.text("kind"),
            metric=r.text("metric"),
            rate=r.number("rate"),
            gap_closed=r.number("gap_closed"),
            ci95=r.interval("gap_closed_ci95"),
            draws_used=r.integer("draws_used"),
            draws_without_gap=r.integer("draws_without_gap"),
        )

    @property
    def figures(self) -> dict[str, Any]:
        """``gap_closed`` and ``gap_closed_ci95`` as :func:`~.tables.fmt_ci` reads them."""
        return {"gap_closed": self.gap_closed, "gap_closed_ci95": list(self.ci95)}


def find_gap(gaps: Sequence[GapClosed], kind: str, metric: str = "goal_reach_rate") -> GapClosed:
    """The gap closed by ``kind`` on ``metric``; ``KeyError`` when there is none."""
    for g in gaps:
        if g.kind == kind and g.metric == metric:
            return g
    raise KeyError(f"no gap closed for kind {kind!r} on {metric!r}")


@dataclass(frozen=True)
class SceneCounts:
    """Per held-out scene: ``hits`` (S,) agent-episodes with the outcome, ``total`` (S,) all of them."""

    hits: np.ndarray
    total: np.ndarray


def scene_counts(records: FinishedEpisodes, key: str, num_scenes: int) -> SceneCounts:
    """Counts of outcome ``key`` (a key of :data:`OUTCOMES`) per scene id ``0 … num_scenes − 1``."""
    sid = records.scene_id.cpu().numpy().astype(np.int64)
    if sid.size and (sid.min() < 0 or sid.max() >= num_scenes):
        raise ValueError(f"scene ids must lie in [0, {num_scenes}), got {sid.min()}..{sid.max()}")
    hit = (records.outcome.cpu().numpy() == int(OUTCOMES[key])).astype(np.float64)
    return SceneCounts(
        hits=np.bincount(sid, weights=hit, minlength=num_scenes),
        total=np.bincount(sid, minlength=num_scenes).astype(np.float64),
    )


def _draw_weights(num: int, seed: int, draws: int) -> np.ndarray:
    """(draws, num): how often each scene is drawn in each bootstrap draw (same seed, same draws)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(num, np.full(num, 1.0 / num), size=draws).astype(np.float64)


def _fraction(m: np.ndarray, base: np.ndarray, top: np.ndarray) -> np.ndarray:
    den = top - base
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0.0, (m - base) / np.where(den != 0.0, den, 1.0), np.nan) + 0.0  # no −0


def gap_closed(
    counts: Mapping[str, SceneCounts],
    base: str,
    top: str,
    seed: int = 0,
    draws: int = DRAWS,
    metric: str = "goal_reach_rate",
) -> dict[str, GapClosed]:
    """For every kind in ``counts`` (outcome counts of ``metric``), by kind: its ``rate``, the
    ``gap_closed`` (point estimate from the pooled rates; NaN when ``top`` and ``base`` tie) with
    its scene-paired bootstrap interval (module docstring), ``draws_used`` and
    ``draws_without_gap``."""
    num = len(next(iter(counts.values())).total)
    if any(len(c.total) != num for c in counts.values()):
        raise ValueError("every kind must be counted on the same scenes")
    for k in (base, top):
        if k not in counts:
            raise ValueError(f"kind '{k}' missing from the counts {list(counts)}")
    weights = _draw_weights(num, seed, draws)

    def rates(c: SceneCounts) -> tuple[float, np.ndarray]:
        n = c.total.sum()
        point = float(c.hits.sum() / n) if n else math.nan
        with np.errstate(divide="ignore", invalid="ignore"):
            return point, (weights @ c.hits) / (weights @ c.total)

    r = {k: rates(c) for k, c in counts.items()}
    (pb, db), (pt, dt) = r[base], r[top]
    out: dict[str, GapClosed] = {}
    for k, (pm, dm) in r.items():
        frac = _fraction(dm, db, dt)
        ok = np.isfinite(frac)
        lo, hi = np.percentile(frac[ok], [2.5, 97.5]) if ok.any() else (math.nan, math.nan)
        point = float(_fraction(np.array(pm), np.array(pb), np.array(pt)))
        out[k] = GapClosed(
            kind=k,
            metric=metric,
            rate=pm,
            gap_closed=point,
            ci95=(float(lo), float(hi)),
            draws_used=int(ok.sum()),
            draws_without_gap=int(draws - ok.sum()),
        )
    return out


def gap_difference(
    counts: Mapping[str, SceneCounts], a: str, b: str, base: str, top: str, seed: int = 0, draws: int = DRAWS
) -> Difference:
    """``gap(a) − gap(b)`` = (rate(a) − rate(b)) / (rate(top) − rate(base)) with its scene-paired
    bootstrap 95 % interval and the draws it used."""
    sub = {k: counts[k] for k in dict.fromkeys((a, b, base, top))}
    weights = _draw_weights(len(sub[a].total), seed, draws)
    with np.errstate(divide="ignore", invalid="ignore"):
        draw = {k: (weights @ c.hits) / (weights @ c.total) for k, c in sub.items()}
        point = {k: c.hits.sum() / c.total.sum() for k, c in sub.items()}
    den = draw[top] - draw[base]
    ok = np.isfinite(den) & (den != 0.0)
    diffs = (draw[a][ok] - draw[b][ok]) / den[ok]
    pden = point[top] - point[base]
    value = float((point[a] - point[b]) / pden) + 0.0 if pden != 0 else math.nan  # no −0
    lo, hi = np.percentile(diffs, [2.5, 97.5]) if diffs.size else (math.nan, math.nan)
    return Difference(value, (float(lo), float(hi)), int(ok.sum()))
