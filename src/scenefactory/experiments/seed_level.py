"""Seed-level statistics of an experiment's report: the training seed, not the agent-episode, as
the unit.

An experiment pools the agent-episodes of every policy of a kind, and its intervals treat them as
independent. They are not: the episodes of one policy share its training run, so the pooled
intervals understate how much a result would move with other training seeds. This module reads a
report folder's ``results.json`` (each cell's ``per_policy`` figures, one entry per trained
policy) and gives, per cell and metric, the per-seed values with their mean and a Student-t 95 %
interval over seeds (n − 1 degrees of freedom); and for pairs of cells, the difference of the seed
means with a Welch 95 % interval (unpaired: seeds of two kinds are independent training runs) or,
with ``paired``, a paired-t interval over the per-seed differences (the same policies under two
conditions, matched by training seed, or in order where both cells list the same seeds in the same
order). With three seeds these intervals are wide; that is the point of reporting them beside the
pooled ones. Every experiment report with two or more policies of a kind has these tables too
(:func:`~scenefactory.experiments.report.write_report`).

``scenefactory seed-level DIR [--compare A B]... [--paired]`` writes ``DIR/seed_level.json`` and
``DIR/seed_level.md`` (both atomically).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from scenefactory.errors import UserError
from scenefactory.experiments.report import METRIC_LABELS, fmt_ci, fmt_diff, markdown_table
from scenefactory.io import atomic_write_text, write_json

METRICS = ("goal_reach_rate", "collision_rate", "offroad_rate", "mean_peak_drac_mps2", "high_drac_rate")
"""The figures summarised per seed (where a cell has them)."""


def t_interval(values: Sequence[float]) -> dict[str, Any]:
    """Mean of ``values`` (one per seed) and its Student-t 95 % interval (n − 1 df); n ≥ 2."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        raise ValueError(f"a seed-level interval needs at least 2 seeds, got {x.size}")
    half = float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    m = float(x.mean())
    return {"mean": m, "ci95": [m - half, m + half], "seeds_n": int(x.size), "sd": float(x.std(ddof=1))}


def welch_difference(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """mean(a) − mean(b) with a Welch 95 % interval (Welch–Satterthwaite df); each side n ≥ 2."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.size < 2 or xb.size < 2:
        raise ValueError(f"a Welch interval needs at least 2 seeds per side, got {xa.size} and {xb.size}")
    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    diff = float(xa.mean() - xb.mean())
    se = math.sqrt(va + vb)
    if se == 0.0:
        return {"diff": diff, "ci95": [diff, diff], "df": math.inf, "test": "welch"}
    df = (va + vb) ** 2 / (va**2 / (xa.size - 1) + vb**2 / (xb.size - 1))
    half = float(stats.t.ppf(0.975, df) * se)
    return {"diff": diff, "ci95": [diff - half, diff + half], "df": float(df), "test": "welch"}


def paired_difference(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Mean of the per-seed differences a_i − b_i with a paired-t 95 % interval; n ≥ 2 pairs."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    out = t_interval(d.tolist())
    return {"diff": out["mean"], "ci95": out["ci95"], "df": float(d.size - 1), "test": "paired t"}


def _seeds(cell_name: str, cell: Mapping[str, Any]) -> tuple[list[Any], list[Mapping[str, Any]]]:
    per = cell.get("per_policy")
    if not isinstance(per, list) or not per:
        raise UserError(f"cell '{cell_name}' has no per_policy figures (one entry per trained policy)")
    return [i if p.get("trained_seed") is None else p["trained_seed"] for i, p in enumerate(per)], per


def seed_level(
    results: Mapping[str, Any],
    compare: Sequence[tuple[str, str]] = (),
    paired: bool = False,
    strict: bool = True,
) -> dict[str, Any]:
    """Seed-level summary of a ``results.json`` document (see the module docstring).

    ``compare``: pairs of cell names (keys of ``results['results']['cells']``); each gives A − B per
    metric that both cells have. Cells with one policy are listed without an interval. ``strict``:
    a cell without per-policy figures, a pair with fewer than 2 seeds on a side, or (``paired``) a
    pair whose seeds differ is an error; otherwise it is left out (how reports use it)."""
    try:
        cells = results["results"]["cells"]
    except (KeyError, TypeError):
        raise UserError("results.json has no results.cells (not an experiment report?)") from None
    out_cells: dict[str, Any] = {}
    for name, cell in cells.items():
        try:
            seeds, per = _seeds(name, cell)
        except UserError:
            if strict:
                raise
            continue
        row: dict[str, Any] = {"seeds": seeds}
        for metric in METRICS:
            values = [v for p in per if isinstance(v := p.get(metric), int | float) and math.isfinite(v)]
            if len(values) < len(per):
                continue
            summary = t_interval(values) if len(values) > 1 else {}
            if summary and metric.endswith("_rate"):  # a rate's interval stays within [0, 1]
                summary["ci95"] = [max(0.0, summary["ci95"][0]), min(1.0, summary["ci95"][1])]
            row[metric] = {"per_seed": values, **summary}
        out_cells[name] = row
    comparisons = []
    for a, b in compare:
        missing = [name for name in (a, b) if name not in cells]
        if missing and strict:
            raise UserError(f"--compare: no cell '{missing[0]}'; expected one of {', '.join(cells)}")
        problem = _unusable(a, b, out_cells, paired)
        if problem is not None:
            if strict:
                raise UserError(problem)
            continue
        sa, sb = out_cells[a]["seeds"], out_cells[b]["seeds"]
        entry: dict[str, Any] = {"a": a, "b": b, "paired": paired}
        for metric in METRICS:
            if metric not in out_cells[a] or metric not in out_cells[b]:
                continue
            va, vb = out_cells[a][metric]["per_seed"], out_cells[b][metric]["per_seed"]
            if paired:
                if sa != sb:  # same seeds in another order: match them
                    order = {s: i for i, s in enumerate(sb)}
                    vb = [vb[order[s]] for s in sa]
                entry[metric] = paired_difference(va, vb)
            else:
                entry[metric] = welch_difference(va, vb)
        comparisons.append(entry)
    return {"cells": out_cells, "comparisons": comparisons}


def _unusable(a: str, b: str, cells: Mapping[str, Any], paired: bool) -> str | None:
    """Why cells ``a`` and ``b`` cannot be compared at the seed level, or ``None``."""
    for name in (a, b):
        if name not in cells:
            return f"cell '{name}' has no per_policy figures (one entry per trained policy)"
        if len(cells[name]["seeds"]) < 2:
            n = len(cells[name]["seeds"])
            return f"cell '{name}' has {n} policy; a seed-level difference needs 2 or more per side"
    sa, sb = cells[a]["seeds"], cells[b]["seeds"]
    if paired and sa != sb and (sorted(sa) != sorted(sb) or len(set(sa)) < len(sa)):
        return f"--paired: cells '{a}' and '{b}' have different training seeds ({sa} vs {sb})"
    return None


def _cell(name: str) -> str:
    """A cell name inside a markdown table (cell names like ``aware|wet`` hold a pipe)."""
    return name.replace("|", "\\|")


def _digits(metric: str) -> int:
    return 2 if metric == "mean_peak_drac_mps2" else 3


def cells_markdown(summary: Mapping[str, Any], metrics: Sequence[str] = METRICS) -> str:
    """One table per metric: each cell's per-seed figures and their mean [95 % CI]."""
    parts = []
    for metric in metrics:
        rows = [
            [
                _cell(name),
                " / ".join(f"{v:.{_digits(metric)}f}" for v in row[metric]["per_seed"]),
                fmt_ci(
                    {"mean": row[metric]["mean"], "mean_ci95": row[metric]["ci95"]}, "mean", _digits(metric)
                )
                if "mean" in row[metric]
                else "n/a (1 seed)",
            ]
            for name, row in summary["cells"].items()
            if metric in row
        ]
        if rows:
            parts.append(
                f"### {METRIC_LABELS[metric]}\n\n"
                + markdown_table(["cell", "per seed", "mean [95 % CI]"], rows)
            )
    return "\n".join(parts)


def differences_markdown(summary: Mapping[str, Any]) -> str:
    """The compared pairs, A − B per metric with its seed-level 95 % interval."""
    header = ["A − B", "test", *(METRIC_LABELS[m] for m in METRICS)]
    rows = []
    for c in summary["comparisons"]:
        cols = [fmt_diff(c[m], _digits(m)) if m in c else "n/a" for m in METRICS]
        rows.append([f"{_cell(c['a'])} − {_cell(c['b'])}", "paired t" if c["paired"] else "Welch", *cols])
    return markdown_table(header, rows) if rows else ""


EXPLAINED = (
    "The unit is the training seed: per cell, each policy's figure, their mean and a Student-t 95 % "
    "interval over seeds (n − 1 df; a rate's clipped to [0, 1]). Differences: Welch 95 % intervals "
    "over seed means, or paired t over per-seed differences for the same policies under two conditions."
)


def to_markdown(summary: Mapping[str, Any], source: Path) -> str:
    """The seed-level tables of :func:`seed_level` as a markdown document."""
    lines = ["# Seed-level statistics", "", f"From `{source}`. {EXPLAINED}", ""]
    if summary["comparisons"]:
        lines += ["## Differences", "", differences_markdown(summary)]
    lines += ["## Per cell", "", cells_markdown(summary)]
    return "\n".join(lines)


def write_seed_level(
    folder: Path, compare: Sequence[tuple[str, str]] = (), paired: bool = False
) -> dict[str, Any]:
    """Read ``folder/results.json``, write ``seed_level.json`` and ``seed_level.md`` beside it."""
    path = folder / "results.json"
    if not path.is_file():
        raise UserError(f"{path}: not found (expected an experiment's report folder)")
    try:
        results = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    summary = seed_level(results, compare, paired)
    summary = {"source": str(path), "experiment": results.get("experiment"), **summary}
    write_json(folder / "seed_level.json", summary)
    atomic_write_text(folder / "seed_level.md", to_markdown(summary, path))
    return summary
