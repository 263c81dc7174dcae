"""Result plots: the training learning curve and a bar chart of evaluation rates with 95 % CIs.

Both draw on an explicit Agg canvas (no display, no pyplot state) and write the PNG atomically
(a temporary file in the target folder, then ``os.replace``), so a reader never sees half a file.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, PercentFormatter

from scenefactory.evaluation.render import STATUS_COLORS
from scenefactory.io import atomic_write_bytes
from scenefactory.tasks.driving.status import AgentStatus

__all__ = ["RATE_KEYS", "plot_learning_curve", "plot_metric_bars", "rolling_nanmean"]

RATE_KEYS: dict[str, tuple[str, str]] = {
    "goal_reach_rate": ("goal reached", STATUS_COLORS[AgentStatus.GOAL]),
    "collision_rate": ("collision", STATUS_COLORS[AgentStatus.COLLISION]),
    "offroad_rate": ("off-road", STATUS_COLORS[AgentStatus.OFFROAD]),
    "timeout_rate": ("timeout", "#6f6f6f"),
}
"""Known rate keys: display label and colour (the renderer's status colours)."""

_OTHER_COLORS = ("#1f6fd1", "#8e44ad", "#17a2b8", "#8c564b", "#e377c2")
_REWARD_COLOR = "#1f6fd1"


def rolling_nanmean(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing rolling mean over ``window`` points that ignores NaN (NaN where a window has no data)."""
    values = np.asarray(values, dtype=np.float64)
    if window <= 1 or values.size == 0:
        return values.copy()
    ok = np.isfinite(values)
    csum = np.concatenate([[0.0], np.cumsum(np.where(ok, values, 0.0))])
    ccnt = np.concatenate([[0], np.cumsum(ok)])
    hi = np.arange(1, values.size + 1)
    lo = np.maximum(hi - window, 0)
    count = ccnt[hi] - ccnt[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (csum[hi] - csum[lo]) / count
    out[count == 0] = np.nan
    return out


def _column(history: Sequence[Mapping[str, float]], key: str) -> np.ndarray:
    out = np.full(len(history), np.nan)
    for i, row in enumerate(history):
        v = row.get(key)
        if v is not None:
            try:
                out[i] = float(v)
            except (TypeError, ValueError):
                out[i] = np.nan
    return out


def save_png(fig: Figure, path: str | os.PathLike[str], dpi: float) -> Path:
    """Render ``fig`` to PNG in memory and write it atomically to ``path``."""
    buf = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buf, format="png", dpi=dpi, facecolor=fig.get_facecolor())
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def _no_data(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, what, transform=ax.transAxes, ha="center", va="center", color="#777777", fontsize=10)


def plot_learning_curve(
    history: Sequence[Mapping[str, float]],
    path: str | os.PathLike[str],
    title: str = "",
    *,
    smooth: int | None = None,
    dpi: float = 120.0,
) -> Path:
    """Write a two-panel learning-curve PNG: mean episode reward, and episode outcome rates.

    Args:
        history: one row per training iteration with ``iteration``, ``env_steps`` and
            ``mean_reward``, and optionally ``goal_reach_rate``, ``collision_rate``,
            ``offroad_rate``, ``timeout_rate`` (fractions in [0, 1]; NaN when no episode ended in
            that iteration) and any other ``*_rate`` key. Missing values and NaN leave gaps.
        path: output PNG (written atomically; parent folders are created).
        title: figure title.
        smooth: window of the trailing rolling mean (NaN-aware) drawn over the raw curves; ``None``
            picks about a fifteenth of the history (at least 1, i.e. no smoothing for short runs).
        dpi: output resolution.
    """
    rows = list(history)
    steps = _column(rows, "env_steps")
    xlabel = "environment steps"
    if rows and not np.isfinite(steps).any():
        steps = _column(rows, "iteration")
        xlabel = "iteration"
    order = np.argsort(steps, kind="stable")
    steps = steps[order]
    window = max(1, round(len(rows) / 15)) if smooth is None else max(1, int(smooth))

    fig = Figure(figsize=(8.0, 6.4), dpi=dpi, facecolor="white")
    ax_r, ax_s = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1.0, 1.0], "hspace": 0.12})
    if title:
        fig.suptitle(title, fontsize=12)

    reward = _column(rows, "mean_reward")[order]
    if np.isfinite(reward).any():
        ax_r.plot(
            steps, reward, color=_REWARD_COLOR, lw=0.9, alpha=0.35, marker="o", ms=2.0, label="per iteration"
        )
        if window > 1:
            ax_r.plot(
                steps,
                rolling_nanmean(reward, window),
                color=_REWARD_COLOR,
                lw=2.0,
                label=f"rolling mean ({window} it.)",
            )
        ax_r.legend(loc="best", fontsize=8, frameon=False)
    else:
        _no_data(ax_r, "no reward data yet")
    ax_r.set_ylabel("mean episode reward")
    ax_r.set_title("reward", fontsize=10, loc="left")

    rate_keys = [k for k in RATE_KEYS if any(k in r for r in rows)]
    rate_keys += sorted({k for r in rows for k in r if k.endswith("_rate") and k not in RATE_KEYS})
    drawn = 0
    for j, key in enumerate(rate_keys):
        label, color = RATE_KEYS.get(key, (key.removesuffix("_rate").replace("_", " "), ""))
        color = color or _OTHER_COLORS[j % len(_OTHER_COLORS)]
        vals = _column(rows, key)[order]
        if not np.isfinite(vals).any():
            continue
        drawn += 1
        if window > 1:
            ax_s.plot(steps, vals, color=color, lw=0.8, alpha=0.3, marker="o", ms=1.8)
            ax_s.plot(steps, rolling_nanmean(vals, window), color=color, lw=1.9, label=label)
        else:
            ax_s.plot(steps, vals, color=color, lw=1.6, marker="o", ms=2.5, label=label)
    if drawn:
        ax_s.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    else:
        _no_data(ax_s, "no finished episodes yet")
    ax_s.set_ylim(-0.02, 1.02)
    ax_s.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax_s.set_ylabel("share of finished episodes")
    ax_s.set_title(
        "episode outcomes" + (f" (lines: rolling mean over {window} it.)" if window > 1 else ""),
        fontsize=10,
        loc="left",
    )
    ax_s.set_xlabel(xlabel)
    if xlabel == "environment steps":
        ax_s.xaxis.set_major_formatter(EngFormatter(sep=""))
    for ax in (ax_r, ax_s):
        ax.grid(True, color="#dddddd", lw=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    fig.subplots_adjust(left=0.1, right=0.83, top=0.9 if title else 0.94, bottom=0.09)
    return save_png(fig, path, dpi)


def plot_metric_bars(
    metrics: Mapping[str, float],
    ci: Mapping[str, tuple[float, float]],
    path: str | os.PathLike[str],
    title: str = "",
    *,
    dpi: float = 120.0,
) -> Path:
    """Write a bar chart of rates with 95 % confidence-interval error bars.

    Args:
        metrics: name -> value (rates in [0, 1] are shown as percentages; NaN draws "n/a").
        ci: name -> ``(low, high)`` 95 % interval of the same metric; a missing name draws no bar
            error.
        path: output PNG (written atomically; parent folders are created).
        title: figure title.
        dpi: output resolution.
    """
    names = list(metrics)
    values = np.array([float(metrics[n]) for n in names], dtype=np.float64)
    finite = values[np.isfinite(values)]
    rates = bool(finite.size == 0 or (finite.min() >= 0.0 and finite.max() <= 1.0))
    lo = np.array([float(ci[n][0]) if n in ci else np.nan for n in names])
    hi = np.array([float(ci[n][1]) if n in ci else np.nan for n in names])
    has_ci = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(values)
    err = np.zeros((2, len(names)))
    err[0, has_ci] = np.maximum(values[has_ci] - lo[has_ci], 0.0)
    err[1, has_ci] = np.maximum(hi[has_ci] - values[has_ci], 0.0)

    fig = Figure(figsize=(max(4.5, 1.1 * len(names) + 1.8), 4.2), dpi=dpi, facecolor="white")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(names))
    colors = []
    for j, n in enumerate(names):
        c = RATE_KEYS.get(n, ("", ""))[1]
        colors.append(c or _OTHER_COLORS[j % len(_OTHER_COLORS)])
    ax.bar(x, np.where(np.isfinite(values), values, 0.0), width=0.62, color=colors, alpha=0.85, zorder=2)
    if has_ci.any():
        ax.errorbar(
            x[has_ci],
            values[has_ci],
            yerr=err[:, has_ci],
            fmt="none",
            ecolor="#222222",
            elinewidth=1.2,
            capsize=5,
            zorder=3,
            label="95 % CI",
        )
        ax.legend(loc="upper right", fontsize=8, frameon=False)
    top = float(np.nanmax(np.concatenate([values, hi, [0.0]]))) if len(names) else 1.0
    top = 1.0 if rates else (top if math.isfinite(top) and top > 0 else 1.0)
    for j, v in enumerate(values):
        text = "n/a" if not math.isfinite(v) else f"{100 * v:.1f} %" if rates else f"{v:.3g}"
        ybase = hi[j] if has_ci[j] else (v if math.isfinite(v) else 0.0)
        ax.text(x[j], ybase + 0.02 * top, text, ha="center", va="bottom", fontsize=8.5, color="#222222")
    ax.set_xticks(x)
    ax.set_xticklabels([RATE_KEYS.get(n, (n.replace("_", " "), ""))[0] for n in names], fontsize=9)
    if rates:
        ax.set_ylim(0.0, 1.1)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylabel("share of episodes")
    else:
        ax.set_ylim(min(0.0, float(np.nanmin(np.concatenate([values, lo, [0.0]])))), top * 1.15)
        ax.set_ylabel("value")
    ax.grid(True, axis="y", color="#dddddd", lw=0.6, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return save_png(fig, path, dpi)
