"""Seed-level statistics of an experiment's cells: the training seed, not the agent-episode, as
the unit.

An experiment pools the agent-episodes of every policy of a kind, and its intervals treat them as
independent. They are not: the episodes of one policy share its training run, so the pooled
intervals understate how much a result would move with other training seeds. This module takes
typed :class:`~scenefactory.experiments.results.Cell` objects (each with one
:class:`~scenefactory.experiments.results.PolicyFigures` per trained policy) and gives, per cell and
metric, the per-seed values with their mean and a Student-t 95 % interval over seeds (n − 1
degrees of freedom); and for pairs of cells, the difference of the seed means with a Welch 95 %
interval (unpaired: seeds of two kinds are independent training runs) or, with ``paired``, a
paired-t interval over the per-seed differences (the same policies under two conditions, matched
by training seed, or in order where both cells list the same seeds in the same order). With three
seeds these intervals are wide; that is the point of reporting them beside the pooled ones. Every
experiment report with two or more policies of a kind has these tables too
(:func:`~scenefactory.experiments.report.write_report`).

``scenefactory seed-level DIR [--compare A B]... [--paired]`` reads ``DIR/results.json`` (cells
named as :func:`~scenefactory.experiments.results.cell_labels` names them; a version 1 file's as it
names them, :mod:`~scenefactory.experiments.report_cells`) and writes
``DIR/seed_level.json`` and ``DIR/seed_level.md`` (both atomically).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from scenefactory.errors import UserError, warn
from scenefactory.experiments.report_cells import read_cells
from scenefactory.experiments.results import (
    SEED_FIGURES,
    Cell,
    Reader,
    cell_labels,
    read_json_file,
)
from scenefactory.experiments.tables import METRIC_LABELS, fmt_interval, markdown_table
from scenefactory.io import atomic_write_text, write_json
from scenefactory.stats import t_interval as student_t_interval

METRICS = SEED_FIGURES
"""The figures summarised per seed (where a cell has them)."""


# ----------------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class TInterval:
    """Mean of ``n`` per-seed values with its Student-t 95 % interval (n − 1 df) and their ``sd``."""

    mean: float
    ci95: tuple[float, float]
    sd: float
    n: int


def t_interval(values: Sequence[float]) -> TInterval:
    """Mean of ``values`` (one per seed) and its Student-t 95 % interval (n − 1 df); n ≥ 2."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        raise ValueError(f"a seed-level interval needs at least 2 seeds, got {x.size}")
    m, lo, hi = student_t_interval(x.tolist())
    return TInterval(m, (lo, hi), float(x.std(ddof=1)), int(x.size))


@dataclass(frozen=True)
class SeedDifference:
    """A − B over seeds with its 95 % interval, the test's degrees of freedom and its name
    (``welch`` or ``paired t``)."""

    diff: float
    ci95: tuple[float, float]
    df: float
    test: str

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {"diff": self.diff, "ci95": list(self.ci95), "df": self.df, "test": self.test}

    @classmethod
    def from_json(cls, r: Reader) -> SeedDifference:
        """Inverse of :meth:`to_json` (an infinite df is written as null and reads back as inf)."""
        df = r.number("df")
        return cls(r.number("diff"), r.interval("ci95"), math.inf if math.isnan(df) else df, r.text("test"))


def welch_difference(a: Sequence[float], b: Sequence[float]) -> SeedDifference:
    """mean(a) − mean(b) with a Welch 95 % interval (Welch–Satterthwaite df); each side n ≥ 2."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.size < 2 or xb.size < 2:
        raise ValueError(f"a Welch interval needs at least 2 seeds per side, got {xa.size} and {xb.size}")
    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    diff = float(xa.mean() - xb.mean())
    se = math.sqrt(va + vb)
    if se == 0.0:
        return SeedDifference(diff, (diff, diff), math.inf, "welch")
    df = (va + vb) ** 2 / (va**2 / (xa.size - 1) + vb**2 / (xb.size - 1))
    half = float(stats.t.ppf(0.975, df) * se)
    return SeedDifference(diff, (diff - half, diff + half), float(df), "welch")


def paired_difference(a: Sequence[float], b: Sequence[float]) -> SeedDifference:
    """Mean of the per-seed differences a_i − b_i with a paired-t 95 % interval; n ≥ 2 pairs."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    out = t_interval(d.tolist())
    return SeedDifference(out.mean, out.ci95, float(d.size - 1), "paired t")


# -------------------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class SeedFigure:
    """One metric of one cell over its seeds: ``per_seed`` (``None`` where a policy's figure is
    null, NaN or absent; those seeds are in ``missing_seeds``) and, with every figure known and two
    or more seeds, their ``summary`` (a rate's interval clipped to [0, 1])."""

    per_seed: tuple[float | None, ...]
    missing_seeds: tuple[int, ...] = ()
    summary: TInterval | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain data: ``per_seed``, then ``missing_seeds`` or the summary's fields where there are any."""
        out: dict[str, Any] = {"per_seed": list(self.per_seed)}
        if self.missing_seeds:
            out["missing_seeds"] = list(self.missing_seeds)
        if self.summary is not None:
            s = self.summary
            out.update({"mean": s.mean, "ci95": list(s.ci95), "seeds_n": s.n, "sd": s.sd})
        return out

    @classmethod
    def from_json(cls, r: Reader) -> SeedFigure:
        """Inverse of :meth:`to_json`."""
        per = tuple(None if math.isnan(v) else v for v in r.numbers("per_seed"))  # null: missing
        missing = r.integers("missing_seeds") if r.has("missing_seeds") else ()
        summary = None
        if r.has("mean"):
            summary = TInterval(r.number("mean"), r.interval("ci95"), r.number("sd"), r.integer("seeds_n"))
        return cls(per, missing, summary)


@dataclass(frozen=True)
class SeedCell:
    """A cell at the seed level: its ``label`` (:func:`~.results.cell_labels`) and fields, the
    training ``seeds`` of its policies (their positions where a checkpoint records none) and one
    :class:`SeedFigure` per metric some policy of it has."""

    label: str
    kind: str
    eval_tier: str
    condition: str
    seeds: tuple[int, ...]
    figures: Mapping[str, SeedFigure]

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "label": self.label,
            "kind": self.kind,
            "eval_tier": self.eval_tier,
            "condition": self.condition,
            "seeds": list(self.seeds),
            "figures": {k: f.to_json() for k, f in self.figures.items()},
        }

    @classmethod
    def from_json(cls, r: Reader) -> SeedCell:
        """Inverse of :meth:`to_json`."""
        return cls(
            r.text("label"),
            r.text("kind"),
            r.text("eval_tier"),
            r.text("condition"),
            r.integers("seeds"),
            r.by_name("figures", SeedFigure.from_json),
        )


@dataclass(frozen=True)
class SeedComparison:
    """Cell ``a`` − cell ``b`` (labels) per metric both have for every seed, Welch or ``paired``."""

    a: str
    b: str
    paired: bool
    differences: Mapping[str, SeedDifference]

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "a": self.a,
            "b": self.b,
            "paired": self.paired,
            "differences": {k: d.to_json() for k, d in self.differences.items()},
        }

    @classmethod
    def from_json(cls, r: Reader) -> SeedComparison:
        """Inverse of :meth:`to_json`."""
        return cls(
            r.text("a"), r.text("b"), r.flag("paired"), r.by_name("differences", SeedDifference.from_json)
        )


@dataclass(frozen=True)
class SeedLevel:
    """The seed-level summary of a set of cells and the differences of the compared pairs."""

    cells: tuple[SeedCell, ...]
    comparisons: tuple[SeedComparison, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "cells": [c.to_json() for c in self.cells],
            "comparisons": [c.to_json() for c in self.comparisons],
        }

    @classmethod
    def from_json(cls, r: Reader) -> SeedLevel:
        """Inverse of :meth:`to_json`."""
        return cls(r.objects("cells", SeedCell.from_json), r.objects("comparisons", SeedComparison.from_json))

    def cell(self, label: str) -> SeedCell:
        """The cell called ``label``; ``KeyError`` when there is none."""
        for c in self.cells:
            if c.label == label:
                return c
        raise KeyError(label)


def _figure(value: Any) -> float | None:
    """A policy's figure; ``None`` where it is null or not finite (reported as missing)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _seed_cell(label: str, cell: Cell) -> SeedCell:
    seeds = tuple(i if p.trained_seed is None else p.trained_seed for i, p in enumerate(cell.policies))
    figures: dict[str, SeedFigure] = {}
    for metric in METRICS:
        if not any(metric in p.metrics for p in cell.policies):
            continue
        values = tuple(_figure(p.metrics.get(metric)) for p in cell.policies)
        missing = tuple(s for s, v in zip(seeds, values, strict=True) if v is None)
        if missing:
            figures[metric] = SeedFigure(values, missing)
            continue
        known = [v for v in values if v is not None]
        summary = t_interval(known) if len(known) > 1 else None
        if summary is not None and metric.endswith("_rate"):  # a rate's interval stays within [0, 1]
            lo, hi = summary.ci95
            summary = TInterval(summary.mean, (max(0.0, lo), min(1.0, hi)), summary.sd, summary.n)
        figures[metric] = SeedFigure(tuple(known), (), summary)
    return SeedCell(label, cell.kind, cell.eval_tier, cell.condition, seeds, figures)


def _unusable(a: SeedCell, b: SeedCell, paired: bool) -> str | None:
    """Why cells ``a`` and ``b`` cannot be compared at the seed level, or ``None``."""
    for c in (a, b):
        if len(c.seeds) < 2:
            n = len(c.seeds)
            return f"cell '{c.label}' has {n} policy; a seed-level difference needs 2 or more per side"
    sa, sb = list(a.seeds), list(b.seeds)
    if paired and sa != sb and (sorted(sa) != sorted(sb) or len(set(sa)) < len(sa)):
        return f"--paired: cells '{a.label}' and '{b.label}' have different training seeds ({sa} vs {sb})"
    return None


def seed_level(
    cells: Sequence[Cell],
    compare: Sequence[tuple[Cell, Cell]] = (),
    paired: bool = False,
    strict: bool = True,
) -> SeedLevel:
    """Seed-level summary of ``cells`` (see the module docstring), named by :func:`cell_labels`.

    ``compare``: pairs of cells (of ``cells``); each gives A − B per metric that both cells have
    for every seed. A cell without policies is left out of the summary (``strict``: an error).
    ``strict``: a pair with fewer than 2 seeds on a side, or (``paired``) a pair whose seeds differ
    is an error; otherwise it is left out (how reports use it). A metric that some policies of a
    cell have and others lack, or have as null or NaN, is kept with ``None`` for those seeds and
    their list in ``missing_seeds`` (no interval, and no difference with it); a metric no policy of
    a cell has is not listed."""
    labels = cell_labels(cells)
    rows: dict[int, SeedCell] = {}
    for i, (label, cell) in enumerate(zip(labels, cells, strict=True)):
        if not cell.policies:
            if strict:
                raise UserError(f"cell '{label}' has no per-policy figures (one entry per trained policy)")
            continue
        rows[i] = _seed_cell(label, cell)
    comparisons = []
    for ca, cb in compare:
        ia, ib = (_index(cells, c) for c in (ca, cb))
        missing = [labels[i] for i in (ia, ib) if i not in rows]
        problem = (
            f"cell '{missing[0]}' has no per-policy figures (one entry per trained policy)"
            if missing
            else _unusable(rows[ia], rows[ib], paired)
        )
        if problem is not None:
            if strict:
                raise UserError(problem)
            continue
        a, b = rows[ia], rows[ib]
        differences = {}
        for metric in METRICS:
            fa, fb = a.figures.get(metric), b.figures.get(metric)
            if fa is None or fb is None or fa.missing_seeds or fb.missing_seeds:
                continue
            va = [float(v) for v in fa.per_seed if v is not None]
            vb = [float(v) for v in fb.per_seed if v is not None]
            if paired:
                if a.seeds != b.seeds:  # same seeds in another order: match them
                    order = {s: j for j, s in enumerate(b.seeds)}
                    vb = [vb[order[s]] for s in a.seeds]
                differences[metric] = paired_difference(va, vb)
            else:
                differences[metric] = welch_difference(va, vb)
        comparisons.append(SeedComparison(a.label, b.label, paired, differences))
    return SeedLevel(tuple(rows.values()), tuple(comparisons))


def _index(cells: Sequence[Cell], cell: Cell) -> int:
    for i, c in enumerate(cells):
        if c is cell or c == cell:
            return i
    raise ValueError(f"compared cell of kind {cell.kind!r} on {cell.eval_tier!r} is not among the cells")


def missing_figures(summary: SeedLevel) -> list[tuple[str, str, tuple[int, ...]]]:
    """(cell, metric, seeds) of every figure :func:`seed_level` found null, NaN or absent."""
    return [
        (c.label, metric, c.figures[metric].missing_seeds)
        for c in summary.cells
        for metric in METRICS
        if metric in c.figures and c.figures[metric].missing_seeds
    ]


# ------------------------------------------------------------------------------------- markdown


def _cell(name: str) -> str:
    """A cell name inside a markdown table (cell names like ``aware|wet`` hold a pipe)."""
    return name.replace("|", "\\|")


def _digits(metric: str) -> int:
    return 2 if metric == "mean_peak_drac_mps2" else 3


def _no_interval(entry: SeedFigure) -> str:
    """Why a cell's metric has no interval: figures missing for some seeds, or one seed."""
    if entry.missing_seeds:
        return f"n/a (no figure for seed {', '.join(str(s) for s in entry.missing_seeds)})"
    return "n/a (1 seed)"


def _fmt_diff(d: SeedDifference, digits: int) -> str:
    v, (lo, hi) = d.diff, d.ci95
    return "n/a" if not math.isfinite(v) else f"{v:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def cells_markdown(summary: SeedLevel, metrics: Sequence[str] = METRICS) -> str:
    """One table per metric: each cell's per-seed figures and their mean [95 % CI]."""
    parts = []
    for metric in metrics:
        digits = _digits(metric)
        rows = []
        for c in summary.cells:
            f = c.figures.get(metric)
            if f is None:
                continue
            per = " / ".join("n/a" if v is None else f"{v:.{digits}f}" for v in f.per_seed)
            s = f.summary
            rows.append(
                [_cell(c.label), per, _no_interval(f) if s is None else fmt_interval(s.mean, s.ci95, digits)]
            )
        if rows:
            parts.append(
                f"### {METRIC_LABELS[metric]}\n\n"
                + markdown_table(["cell", "per seed", "mean [95 % CI]"], rows)
            )
    return "\n".join(parts)


def differences_markdown(summary: SeedLevel) -> str:
    """The compared pairs, A − B per metric with its seed-level 95 % interval."""
    header = ["A − B", "test", *(METRIC_LABELS[m] for m in METRICS)]
    rows = []
    for c in summary.comparisons:
        cols = [_fmt_diff(c.differences[m], _digits(m)) if m in c.differences else "n/a" for m in METRICS]
        rows.append([f"{_cell(c.a)} − {_cell(c.b)}", "paired t" if c.paired else "Welch", *cols])
    return markdown_table(header, rows) if rows else ""


EXPLAINED = (
    "The unit is the training seed: per cell, each policy's figure, their mean and a Student-t 95 % "
    "interval over seeds (n − 1 df; a rate's clipped to [0, 1]). Differences: Welch 95 % intervals "
    "over seed means, or paired t over per-seed differences for the same policies under two conditions."
)


def to_markdown(summary: SeedLevel, source: Path) -> str:
    """The seed-level tables of :func:`seed_level` as a markdown document."""
    lines = ["# Seed-level statistics", "", f"From `{source}`. {EXPLAINED}", ""]
    if summary.comparisons:
        lines += ["## Differences", "", differences_markdown(summary)]
    lines += ["## Per cell", "", cells_markdown(summary)]
    return "\n".join(lines)


def pairs_by_label(cells: Sequence[Cell], compare: Sequence[tuple[str, str]]) -> list[tuple[Cell, Cell]]:
    """The cells named by each ``(A, B)`` of labels (``--compare A B``); ``UserError`` naming an
    unknown label and listing the known ones."""
    named = dict(zip(cell_labels(cells), cells, strict=True))
    pairs = []
    for a, b in compare:
        for name in (a, b):
            if name not in named:
                raise UserError(f"--compare: no cell '{name}'; expected one of {', '.join(named)}")
        pairs.append((named[a], named[b]))
    return pairs


def write_seed_level(
    folder: Path, compare: Sequence[tuple[str, str]] = (), paired: bool = False
) -> SeedLevel:
    """Read ``folder/results.json``, write ``seed_level.json`` and ``seed_level.md`` beside it."""
    path = folder / "results.json"
    experiment, cells = read_json_file(path, read_cells)
    try:
        summary = seed_level(cells, pairs_by_label(cells, compare), paired)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None
    gaps = missing_figures(summary)
    if gaps:
        cell, metric, seeds = gaps[0]
        more = f" and {len(gaps) - 1} more" if len(gaps) > 1 else ""
        warn(
            f"{path}: figures missing, null or not finite for cell '{cell}' {metric} (seeds "
            f"{', '.join(map(str, seeds))}){more}: shown as n/a, without an interval or a difference"
        )
    write_json(
        folder / "seed_level.json", {"source": str(path), "experiment": experiment, **summary.to_json()}
    )
    atomic_write_text(folder / "seed_level.md", to_markdown(summary, path))
    return summary
