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
conditions, matched by training seed). With three seeds these intervals are wide; that is the
point of reporting them beside the pooled ones.

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
from scenefactory.experiments.report import METRIC_LABELS, fmt_diff, markdown_table
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
    seeds = [p.get("trained_seed", i) if isinstance(p, Mapping) else i for i, p in enumerate(per)]
    return [i if s is None else s for i, s in enumerate(seeds)], per


def seed_level(
    results: Mapping[str, Any], compare: Sequence[tuple[str, str]] = (), paired: bool = False
) -> dict[str, Any]:
    """Seed-level summary of a ``results.json`` document (see the module docstring).

    ``compare``: pairs of cell names (keys of ``results['results']['cells']``); each gives A − B per
    metric that both cells have. Cells with one policy are listed without an interval."""
    try:
        cells = results["results"]["cells"]
    except (KeyError, TypeError):
        raise UserError("results.json has no results.cells (not an experiment report?)") from None
    out_cells: dict[str, Any] = {}
    for name, cell in cells.items():
        seeds, per = _seeds(name, cell)
        row: dict[str, Any] = {"seeds": seeds}
        for metric in METRICS:
            values = [v for p in per if isinstance(v := p.get(metric), int | float) and math.isfinite(v)]
            if len(values) < len(per):
                continue
            row[metric] = {"per_seed": values, **(t_interval(values) if len(values) > 1 else {})}
        out_cells[name] = row
    comparisons = []
    for a, b in compare:
        for name in (a, b):
            if name not in cells:
                raise UserError(f"--compare: no cell '{name}'; expected one of {', '.join(cells)}")
        sa, sb = out_cells[a]["seeds"], out_cells[b]["seeds"]
        if paired and sorted(sa) != sorted(sb):
            raise UserError(f"--paired: cells '{a}' and '{b}' have different training seeds ({sa} vs {sb})")
        entry: dict[str, Any] = {"a": a, "b": b, "paired": paired}
        for metric in METRICS:
            if metric not in out_cells[a] or metric not in out_cells[b]:
                continue
            va, vb = out_cells[a][metric]["per_seed"], out_cells[b][metric]["per_seed"]
            if paired:
                order = {s: i for i, s in enumerate(sb)}
                vb = [vb[order[s]] for s in sa]
                entry[metric] = paired_difference(va, vb)
            else:
                entry[metric] = welch_difference(va, vb)
        comparisons.append(entry)
    return {"cells": out_cells, "comparisons": comparisons}


def _fmt(x: float, ci: Sequence[float], digits: int) -> str:
    return f"{x:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def _cell(name: str) -> str:
    """A cell name inside a markdown table (cell names like ``aware|wet`` hold a pipe)."""
    return name.replace("|", "\\|")


def _digits(metric: str) -> int:
    return 2 if metric == "mean_peak_drac_mps2" else 3


def to_markdown(summary: Mapping[str, Any], source: Path) -> str:
    """The seed-level tables of :func:`seed_level` as markdown."""
    lines = [
        "# Seed-level statistics",
        "",
        f"From `{source}`. The unit is the training seed: per cell, each policy's figure, their mean and a "
        "Student-t 95 % interval over seeds (n − 1 df). Differences: Welch 95 % intervals over seed "
        "means (paired t over per-seed differences with `--paired`).",
        "",
    ]
    for metric in METRICS:
        rows = [
            [
                _cell(name),
                " / ".join(f"{v:.{_digits(metric)}f}" for v in row[metric]["per_seed"]),
                _fmt(row[metric]["mean"], row[metric]["ci95"], _digits(metric))
                if "mean" in row[metric]
                else "n/a (1 seed)",
            ]
            for name, row in summary["cells"].items()
            if metric in row
        ]
        if rows:
            lines += [
                f"## {METRIC_LABELS[metric]}",
                "",
                markdown_table(["cell", "per seed", "mean [95 % CI]"], rows),
            ]
    if summary["comparisons"]:
        lines += ["## Differences", ""]
        header = ["A − B", "test", *(METRIC_LABELS[m] for m in METRICS)]
        rows = []
        for c in summary["comparisons"]:
            cols = [fmt_diff(c[m], _digits(m)) if m in c else "n/a" for m in METRICS]
            rows.append([f"{_cell(c['a'])} − {_cell(c['b'])}", "paired t" if c["paired"] else "Welch", *cols])
        lines.append(markdown_table(header, rows))
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
