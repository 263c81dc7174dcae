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

from scenefactory.errors import UserError, warn
from scenefactory.experiments.report import METRIC_LABELS, fmt_ci, fmt_diff, markdown_table
from scenefactory.io import atomic_write_text, show_value, write_json

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


class ResultsFieldError(UserError):
    """A ``results.json`` that does not hold what :func:`seed_level` reads (names the field)."""


_show = show_value


def _cells(results: Any) -> Mapping[str, Any]:
    """``results['results']['cells']``, checked to be an object of cells by name."""
    if not isinstance(results, Mapping):
        raise ResultsFieldError(f"expected a JSON object (an experiment report), got {_show(results)}")
    inner = results.get("results")
    if not isinstance(inner, Mapping) or "cells" not in inner:
        what = "'results'" if not isinstance(inner, Mapping) else "'results.cells'"
        raise ResultsFieldError(f"field {what} is missing or not an object (not an experiment report?)")
    cells = inner["cells"]
    if not isinstance(cells, Mapping):
        raise ResultsFieldError(
            f"field 'results.cells': expected an object of cells by name, got {_show(cells)}"
        )
    return cells


def _seeds(cell_name: str, cell: Any) -> tuple[list[Any], list[Mapping[str, Any]]]:
    """The training seeds (or positions) of a cell's policies and their figures, checked."""
    where = f"results.cells.{cell_name}"
    if not isinstance(cell, Mapping):
        raise ResultsFieldError(f"field '{where}': expected an object (a cell), got {_show(cell)}")
    per = cell.get("per_policy")
    if not isinstance(per, list) or not per:
        raise ResultsFieldError(
            f"cell '{cell_name}' has no per_policy figures (field '{where}.per_policy': expected a "
            f"non-empty list, one entry per trained policy, got {_show(per)})"
        )
    seeds = []
    for i, p in enumerate(per):
        if not isinstance(p, Mapping):
            raise ResultsFieldError(
                f"field '{where}.per_policy[{i}]': expected an object (one policy's figures), got {_show(p)}"
            )
        seed = p.get("trained_seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ResultsFieldError(
                f"field '{where}.per_policy[{i}].trained_seed': expected an integer seed or null, "
                f"got {_show(seed)}"
            )
        seeds.append(i if seed is None else seed)
    return seeds, per


def _figure(value: Any, where: str, metric: str) -> float | None:
    """A policy's figure: a finite number (a rate in [0, 1]); ``None`` where it is null or not
    finite (reported as missing); :class:`ResultsFieldError` for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ResultsFieldError(f"field '{where}': expected a number or null, got {_show(value)}")
    if not math.isfinite(value):
        return None
    if metric.endswith("_rate") and not 0.0 <= value <= 1.0:
        raise ResultsFieldError(f"field '{where}': expected a rate in [0, 1], got {_show(value)}")
    return float(value)


def seed_level(
    results: Mapping[str, Any],
    compare: Sequence[tuple[str, str]] = (),
    paired: bool = False,
    strict: bool = True,
) -> dict[str, Any]:
    """Seed-level summary of a ``results.json`` document (see the module docstring).

    ``compare``: pairs of cell names (keys of ``results['results']['cells']``); each gives A − B per
    metric that both cells have. Cells with one policy are listed without an interval. ``strict``:
    a malformed cell (:class:`ResultsFieldError`, naming the field), a pair with fewer than 2 seeds
    on a side, or (``paired``) a pair whose seeds differ is an error; otherwise it is left out (how
    reports use it). A metric that some policies of a cell have and others lack, or have as null or
    NaN, is kept with ``None`` for those seeds and their list in ``missing_seeds`` (no interval,
    and no difference with it); a metric no policy of a cell has is not listed."""
    cells = _cells(results)
    out_cells: dict[str, Any] = {}
    for name, cell in cells.items():
        try:
            seeds, per = _seeds(name, cell)
            row: dict[str, Any] = {"seeds": seeds}
            for metric in METRICS:
                if not any(metric in p for p in per):
                    continue
                values = [
                    _figure(p.get(metric), f"results.cells.{name}.per_policy[{i}].{metric}", metric)
                    for i, p in enumerate(per)
                ]
                missing = [s for s, v in zip(seeds, values, strict=True) if v is None]
                if missing:
                    row[metric] = {"per_seed": values, "missing_seeds": missing}
                    continue
                known = [v for v in values if v is not None]
                summary = t_interval(known) if len(known) > 1 else {}
                if summary and metric.endswith("_rate"):  # a rate's interval stays within [0, 1]
                    summary["ci95"] = [max(0.0, summary["ci95"][0]), min(1.0, summary["ci95"][1])]
                row[metric] = {"per_seed": known, **summary}
        except UserError:
            if strict:
                raise
            continue
        out_cells[name] = row
    comparisons = []
    for a, b in compare:
        missing_cells = [name for name in (a, b) if name not in cells]
        if missing_cells and strict:
            raise UserError(f"--compare: no cell '{missing_cells[0]}'; expected one of {', '.join(cells)}")
        problem = _unusable(a, b, out_cells, paired)
        if problem is not None:
            if strict:
                raise UserError(problem)
            continue
        sa, sb = out_cells[a]["seeds"], out_cells[b]["seeds"]
        entry: dict[str, Any] = {"a": a, "b": b, "paired": paired}
        for metric in METRICS:
            if not all(
                metric in out_cells[c] and "missing_seeds" not in out_cells[c][metric] for c in (a, b)
            ):
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


def missing_figures(summary: Mapping[str, Any]) -> list[tuple[str, str, list[Any]]]:
    """(cell, metric, seeds) of every figure :func:`seed_level` found null, NaN or absent."""
    return [
        (name, metric, row[metric]["missing_seeds"])
        for name, row in summary["cells"].items()
        for metric in METRICS
        if metric in row and "missing_seeds" in row[metric]
    ]


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


def _no_interval(entry: Mapping[str, Any]) -> str:
    """Why a cell's metric has no interval: figures missing for some seeds, or one seed."""
    if "missing_seeds" in entry:
        seeds = ", ".join(str(s) for s in entry["missing_seeds"])
        return f"n/a (no figure for seed {seeds})"
    return "n/a (1 seed)"


def cells_markdown(summary: Mapping[str, Any], metrics: Sequence[str] = METRICS) -> str:
    """One table per metric: each cell's per-seed figures and their mean [95 % CI]."""
    parts = []
    for metric in metrics:
        rows = [
            [
                _cell(name),
                " / ".join(
                    "n/a" if v is None else f"{v:.{_digits(metric)}f}" for v in row[metric]["per_seed"]
                ),
                fmt_ci(
                    {"mean": row[metric]["mean"], "mean_ci95": row[metric]["ci95"]}, "mean", _digits(metric)
                )
                if "mean" in row[metric]
                else _no_interval(row[metric]),
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
        results = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        summary = seed_level(results, compare, paired)
    except ResultsFieldError as exc:
        raise UserError(f"{path}: {exc}") from None
    gaps = missing_figures(summary)
    if gaps:
        cell, metric, seeds = gaps[0]
        more = f" and {len(gaps) - 1} more" if len(gaps) > 1 else ""
        warn(
            f"{path}: figures missing, null or not finite for cell '{cell}' {metric} (seeds "
            f"{', '.join(map(str, seeds))}){more}: shown as n/a, without an interval or a difference"
        )
    summary = {"source": str(path), "experiment": results.get("experiment"), **summary}
    write_json(folder / "seed_level.json", summary)
    atomic_write_text(folder / "seed_level.md", to_markdown(summary, path))
    return summary
