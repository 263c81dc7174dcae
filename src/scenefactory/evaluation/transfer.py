"""Cross-simulator transfer: policies trained on one tier, evaluated on every tier.

``transfer_matrix`` evaluates each checkpoint on each engine with the same held-out scenes and
seed, writes every cell's ``metrics.json`` under ``out/<trained>_on_<evaluated>/``, and a table
(``transfer.md``), the matrix as JSON (``transfer.json``) and a plot (``transfer.png``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scenefactory.evaluation.plots import save_png
from scenefactory.io import atomic_write_text, write_json

CELL_KEYS = ("goal_reach_rate", "collision_rate", "offroad_rate")

Evaluate = Callable[[Path, str, Path], dict[str, Any]]
"""(checkpoint, engine, out dir) → metrics dict (as ``jobs.drive.evaluate`` writes)."""


def transfer_matrix(
    checkpoints: Mapping[str, Path], engines: Sequence[str], evaluate: Evaluate, out: Path
) -> dict[str, Any]:
    """Evaluate every ``checkpoints[trained_on]`` on every engine; returns the JSON-ready matrix."""
    cells: dict[str, dict[str, Any]] = {}
    for trained, ckpt in checkpoints.items():
        for engine in engines:
            m = evaluate(ckpt, engine, out / f"{trained}_on_{engine}")
            cells[f"{trained}->{engine}"] = {
                "trained_on": trained,
                "evaluated_on": engine,
                "checkpoint": str(ckpt),
                "episodes": m["episodes"],
                "scenes": m.get("scenes"),
                **{k: m[k] for k in CELL_KEYS},
                **{f"{k}_ci95": m[f"{k}_ci95"] for k in CELL_KEYS},
            }
    result = {"cells": cells, "trained_on": list(checkpoints), "evaluated_on": list(engines)}
    write_json(out / "transfer.json", result)
    atomic_write_text(out / "transfer.md", transfer_table(result))
    plot_transfer(result, out / "transfer.png")
    return result


def transfer_table(result: Mapping[str, Any]) -> str:
    """Markdown table: one row per (trained on, evaluated on) with rates, 95 % CIs and counts."""
    lines = [
        "| trained on | evaluated on | goal reach | collision | off-road | agent-episodes |",
        "|---|---|---|---|---|---|",
    ]
    for cell in result["cells"].values():

        def fmt(k: str, c: Mapping[str, Any] = cell) -> str:
            lo, hi = c[f"{k}_ci95"]
            return f"{c[k]:.3f} [{lo:.3f}, {hi:.3f}]"

        lines.append(
            f"| {cell['trained_on']} | {cell['evaluated_on']} | {fmt('goal_reach_rate')} | "
            f"{fmt('collision_rate')} | {fmt('offroad_rate')} | {cell['episodes']} |"
        )
    return "\n".join(lines) + "\n"


def plot_transfer(result: Mapping[str, Any], path: Path) -> Path:
    """Grouped bars of goal reach with 95 % CIs: one group per training tier, one bar per evaluation."""
    # pyplot only here, after choosing the headless backend
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trained, evaluated = result["trained_on"], result["evaluated_on"]
    width = 0.8 / len(evaluated)
    fig, ax = plt.subplots(figsize=(7, 4))
    for j, engine in enumerate(evaluated):
        vals, err_lo, err_hi = [], [], []
        for t in trained:
            c = result["cells"][f"{t}->{engine}"]
            vals.append(c["goal_reach_rate"])
            err_lo.append(c["goal_reach_rate"] - c["goal_reach_rate_ci95"][0])
            err_hi.append(c["goal_reach_rate_ci95"][1] - c["goal_reach_rate"])
        x = np.arange(len(trained)) + (j - (len(evaluated) - 1) / 2) * width
        ax.bar(x, vals, width, yerr=[err_lo, err_hi], capsize=4, label=f"evaluated on {engine}")
    ax.set_xticks(np.arange(len(trained)), [f"trained on {t}" for t in trained])
    ax.set_ylabel("goal reach rate")
    ax.set_ylim(0, 1.05)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title("cross-simulator transfer (95 % CI)")
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)
    return path
