"""Markdown tables and number formats shared by the experiment reports and the seed-level tables.

Pure text: a figure with its 95 % interval (``0.812 [0.734, 0.871]``), a difference with its
interval (``+0.012 [−0.010, +0.034]``), a GitHub table. Both :mod:`.report` and :mod:`.seed_level`
read these; neither reads the other's formats from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from scenefactory.experiments.results import Difference

METRIC_LABELS: dict[str, str] = {
    "goal_reach_rate": "goal reach",
    "collision_rate": "collision",
    "offroad_rate": "off-road",
    "timeout_rate": "time-out",
    "high_drac_rate": "high-DRAC rate",
    "near_miss_rate": "near miss",
    "mean_peak_drac_mps2": "mean peak DRAC (m/s²)",
    "log_divergence_m": "log divergence (m)",
}


def fmt_ci(m: Mapping[str, Any], key: str, digits: int = 3) -> str:
    """``value [low, high]`` of ``m[key]`` and ``m[key + '_ci95']``; ``n/a`` when not finite."""
    v = m.get(key)
    if v is None or not math.isfinite(v):
        return "n/a"
    lo, hi = m.get(f"{key}_ci95", (math.nan, math.nan))
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{v:.{digits}f}"
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def fmt_interval(value: float, ci95: Sequence[float], digits: int = 3) -> str:
    """``value [low, high]``; ``n/a`` when the value is not finite, the bare value when the
    interval is not."""
    return fmt_ci({"v": value, "v_ci95": list(ci95)}, "v", digits)


def fmt_diff(d: Difference, digits: int = 3) -> str:
    """``+0.012 [−0.010, +0.034]`` for a difference with its interval; ``n/a`` when undefined."""
    v, (lo, hi) = d.diff, d.ci95
    if not math.isfinite(v):
        return "n/a"
    return f"{v:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def delta_label(key: str) -> str:
    """Column header of a difference: ``Δ goal reach``."""
    return f"Δ {METRIC_LABELS.get(key, key)}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def metrics_table(
    labels: Sequence[str], rows: Sequence[tuple[Sequence[str], Mapping[str, Any]]], keys: Sequence[str]
) -> str:
    """Rows of ``(label cells, metrics)``: each metric as value [95 % CI], then the count."""
    header = [*labels, *(METRIC_LABELS.get(k, k) for k in keys), "agent-episodes"]
    body = [
        [*cells, *(fmt_ci(m, k, 2 if k.endswith(("_mps2", "_m")) else 3) for k in keys), str(m["episodes"])]
        for cells, m in rows
    ]
    return markdown_table(header, body)
