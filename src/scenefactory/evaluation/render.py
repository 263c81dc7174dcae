"""Top-down rendering of recorded episodes: an animated GIF of up to four panels, and scene stills.

Everything is drawn with matplotlib on an explicit Agg canvas (no display, no pyplot state). The
static part of a panel (road surface, lane centres, road lines and edges, scale bar, title) is drawn
once; each frame restores that background and redraws only the moving artists (agents, routes,
goals, the shared ``t = … s (step k)`` clock above the panels). Frames are mapped onto one shared
255-colour palette (status colours reserved exactly); pixels that did not change since the previous
frame are written as the transparent index, so a GIF of a mostly static road stays small. The GIF
is written with Pillow, streamed frame by frame and looping forever, to a temporary file in the
target folder that is then renamed, so it is never half-written.

Colours: agents by :class:`~scenefactory.evaluation.record.AgentStatus` (ACTIVE blue, GOAL green,
COLLISION red, OFFROAD orange, TIMEOUT grey); each agent's route is a faint line and its goal a
3 m circle (the success radius) with an x, both in the agent's current status colour.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from matplotlib import patheffects
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from PIL import Image

from scenefactory.evaluation.record import AgentStatus, EpisodeRecord
from scenefactory.scenes.roadgraph import RoadEdgeType, RoadGraph, RoadLineType
from scenefactory.scenes.scene import Scene

__all__ = [
    "GOAL_RADIUS_M",
    "STATUS_COLORS",
    "render_episodes_gif",
    "render_frames",
    "render_scene_png",
]

GOAL_RADIUS_M = 3.0
"""Radius of the goal circle drawn around each goal [m] (the driving task's success radius)."""

STATUS_COLORS: dict[AgentStatus, str] = {
    AgentStatus.ACTIVE: "#1f6fd1",
    AgentStatus.GOAL: "#22a33a",
    AgentStatus.COLLISION: "#e0201b",
    AgentStatus.OFFROAD: "#ff8c00",
    AgentStatus.TIMEOUT: "#9a9a9a",
}
"""Agent fill colour per status (also used for the agent's route and goal)."""

_UNKNOWN_STATUS_COLOR = "#000000"

# Theme.
_FIG_BG = "#ffffff"
_OFFROAD_BG = "#eef0eb"
_ROAD = "#b9bcbf"
_LANE_CENTRE = "#e6e6e6"
_WHITE_LINE = "#ffffff"
_YELLOW_LINE = "#f0b400"
_UNKNOWN_LINE = "#f4f4f4"
_EDGE = "#2f3337"
_MEDIAN = "#4a4f55"
_TEXT = "#222222"

_MARGIN_M = 6.0
_MIN_VIEW_M = 30.0
_TITLE_IN = 0.30
_PAD_IN = 0.10
_HEADER_IN = 0.30
_LEGEND_ROW_IN = 0.24
_PX_PER_M = 3.5
_PANEL_PX_RANGE = (420.0, 840.0, 1000.0)  # min, max in a grid, max for a single panel

Crop = Literal["roadgraph", "agents"]


# ------------------------------------------------------------------------------------------ geometry


def _dedupe(poly: np.ndarray) -> np.ndarray:
    """Drop consecutive duplicate points (they have no tangent)."""
    if len(poly) < 2:
        return poly
    keep = np.ones(len(poly), dtype=bool)
    keep[1:] = np.linalg.norm(np.diff(poly, axis=0), axis=1) > 1e-9
    return poly[keep]


def _lane_polygon(center: np.ndarray, width: np.ndarray) -> np.ndarray | None:
    """Footprint of a lane: its centre polyline offset by ± width/2 along the point normals."""
    keep = np.ones(len(center), dtype=bool)
    keep[1:] = np.linalg.norm(np.diff(center, axis=0), axis=1) > 1e-9
    center, width = center[keep], width[keep]
    if len(center) < 2:
        return None
    tangent = np.empty_like(center)
    tangent[1:-1] = center[2:] - center[:-2]
    tangent[0] = center[1] - center[0]
    tangent[-1] = center[-1] - center[-2]
    norm = np.linalg.norm(tangent, axis=1, keepdims=True)
    tangent = tangent / np.maximum(norm, 1e-12)
    normal = np.stack([-tangent[:, 1], tangent[:, 0]], axis=1)
    half = (0.5 * width)[:, None]
    left = center + normal * half
    right = center - normal * half
    return np.concatenate([left, right[::-1]], axis=0)


def _circle(center: np.ndarray, radius: float, n: int = 28) -> np.ndarray:
    a = np.linspace(0.0, 2.0 * math.pi, n + 1)
    return np.stack([center[0] + radius * np.cos(a), center[1] + radius * np.sin(a)], axis=1)


def _box_corners(xy: np.ndarray, yaw: np.ndarray, length: np.ndarray, width: np.ndarray) -> np.ndarray:
    """``(n, 4, 2)`` corners of oriented rectangles."""
    hl, hw = 0.5 * length[:, None], 0.5 * width[:, None]
    local_x = np.concatenate([hl, hl, -hl, -hl], axis=1)
    local_y = np.concatenate([hw, -hw, -hw, hw], axis=1)
    c, s = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    return np.stack([xy[:, :1] + c * local_x - s * local_y, xy[:, 1:] + s * local_x + c * local_y], axis=2)


def _nose_triangles(xy: np.ndarray, yaw: np.ndarray, length: np.ndarray, width: np.ndarray) -> np.ndarray:
    """``(n, 3, 2)`` small triangles in the front of each box, pointing forward (the heading mark)."""
    hl, hw = 0.5 * length[:, None], 0.5 * width[:, None]
    local_x = np.concatenate([hl * 0.92, hl * 0.25, hl * 0.25], axis=1)
    local_y = np.concatenate([0.0 * hw, hw * 0.62, -hw * 0.62], axis=1)
    c, s = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    return np.stack([xy[:, :1] + c * local_x - s * local_y, xy[:, 1:] + s * local_x + c * local_y], axis=2)


def _status_rgba(status: np.ndarray) -> np.ndarray:
    table = np.array([to_rgba(STATUS_COLORS[s]) for s in AgentStatus], dtype=np.float64)
    out = np.tile(np.asarray(to_rgba(_UNKNOWN_STATUS_COLOR)), (len(status), 1))
    ok = (status >= 0) & (status < len(table))
    out[ok] = table[status[ok].astype(np.int64)]
    return out


def _tuples(rgba: np.ndarray) -> list[tuple[float, float, float, float]]:
    return [(float(r), float(g), float(b), float(a)) for r, g, b, a in rgba]


def _darker(rgba: np.ndarray, factor: float = 0.5) -> np.ndarray:
    out = rgba.copy()
    out[:, :3] *= factor
    return out


def _nice_length(span_m: float) -> float:
    """A round scale-bar length of about a sixth of the view width."""
    target = span_m / 6.0
    for v in (2.0, 5.0, 10.0, 20.0, 25.0, 50.0, 100.0, 200.0, 250.0, 500.0, 1000.0):
        if v >= target:
            return v
    return 1000.0 * math.ceil(target / 1000.0)


# ------------------------------------------------------------------------------------------- view


def _episode_extent(episode: EpisodeRecord, crop: Crop) -> tuple[float, float, float, float]:
    """``(xmin, ymin, xmax, ymax)`` to show for an episode, before matching the panel aspect."""
    scene = episode.scene
    xmin, ymin, xmax, ymax = scene.roadgraph.bounds()
    if crop == "agents":
        valid = np.flatnonzero(scene.agent_valid)
        pts = [episode.pos_xy[:, valid].reshape(-1, 2), scene.goal_xy[valid]]
        pts += [scene.route(int(i)) for i in valid]
        allp = np.concatenate([p for p in pts if len(p)], axis=0) if valid.size else np.zeros((0, 2))
        allp = allp[np.all(np.isfinite(allp), axis=1)]
        if len(allp):
            pad = 12.0
            lo, hi = allp.min(axis=0) - pad, allp.max(axis=0) + pad
            xmin, ymin = max(xmin, float(lo[0])), max(ymin, float(lo[1]))
            xmax, ymax = min(xmax, float(hi[0])), min(ymax, float(hi[1]))
            if xmax <= xmin or ymax <= ymin:  # agents entirely outside the road graph
                xmin, ymin, xmax, ymax = float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])
    cx, cy = 0.5 * (xmin + xmax), 0.5 * (ymin + ymax)
    w = max(xmax - xmin + 2 * _MARGIN_M, _MIN_VIEW_M)
    h = max(ymax - ymin + 2 * _MARGIN_M, _MIN_VIEW_M * 0.25)
    return cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2


def _fit_aspect(ext: tuple[float, float, float, float], aspect: float) -> tuple[float, float, float, float]:
    """Grow the shorter side of ``ext`` (about its centre) so that width / height == ``aspect``."""
    xmin, ymin, xmax, ymax = ext
    w, h = xmax - xmin, ymax - ymin
    if w / h < aspect:
        w = h * aspect
    else:
        h = w / aspect
    cx, cy = 0.5 * (xmin + xmax), 0.5 * (ymin + ymax)
    return cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2


@dataclass(frozen=True)
class _Layout:
    """Figure geometry in inches: an optional clock header, the panel grid, the legend strip."""

    nrows: int
    ncols: int
    panel_w_in: float
    panel_h_in: float
    header_in: float
    legend_in: float

    @property
    def fig_w_in(self) -> float:
        return self.ncols * self.panel_w_in + (self.ncols + 1) * _PAD_IN

    @property
    def fig_h_in(self) -> float:
        return self.header_in + self.nrows * (self.panel_h_in + _TITLE_IN + _PAD_IN) + self.legend_in

    def rect(self, i: int) -> tuple[float, float, float, float]:
        """``[left, bottom, width, height]`` of panel ``i`` (row-major), in figure fractions."""
        r, c = divmod(i, self.ncols)
        left = _PAD_IN + c * (self.panel_w_in + _PAD_IN)
        bottom = self.legend_in + (self.nrows - 1 - r) * (self.panel_h_in + _TITLE_IN + _PAD_IN)
        fw, fh = self.fig_w_in, self.fig_h_in
        return left / fw, bottom / fh, self.panel_w_in / fw, self.panel_h_in / fh


def _auto_panel_inches(view_w_m: float, aspect: float, n: int, dpi: float) -> float:
    """Panel long side [in] giving about ``_PX_PER_M`` pixels per metre, within a pixel range.

    A 4.5 m car is then ~16 px long (at the upper cap, ~14 px on a 250 m wide scene in a 2x2 grid).
    """
    long_m = view_w_m if aspect >= 1.0 else view_w_m / aspect
    lo, hi = _PANEL_PX_RANGE[0], _PANEL_PX_RANGE[1] if n > 1 else _PANEL_PX_RANGE[2]
    return float(np.clip(long_m * _PX_PER_M, lo, hi)) / dpi


def _layout(n: int, aspect: float, panel_in: float, header: bool, legend_rows: int) -> _Layout:
    nrows, ncols = (1, 1) if n == 1 else (1, 2) if n == 2 else (2, 2)
    pw, ph = (panel_in, panel_in / aspect) if aspect >= 1.0 else (panel_in * aspect, panel_in)
    header_in = _HEADER_IN if header else 0.0
    return _Layout(nrows, ncols, pw, ph, header_in, _LEGEND_ROW_IN * legend_rows + 0.08)


# ---------------------------------------------------------------------------------------- drawing


def _draw_roadgraph(ax: Axes, rg: RoadGraph) -> None:
    polys = []
    for i in range(rg.num_lanes):
        n = int(rg.lane_valid[i].sum())
        poly = _lane_polygon(rg.lane_xy[i, :n], rg.lane_width_m[i, :n])
        if poly is not None:
            polys.append(poly)
    # An edge in the road colour closes hairline seams between adjoining lane footprints.
    ax.add_collection(
        PolyCollection(polys, facecolors=_ROAD, edgecolors=_ROAD, linewidths=0.6, zorder=1, antialiased=True)
    )
    ax.add_collection(
        LineCollection(
            [_dedupe(p) for p in rg.lanes()],
            colors=_LANE_CENTRE,
            linewidths=0.6,
            linestyles=(0, (3.0, 3.0)),
            alpha=0.9,
            zorder=2,
        )
    )
    # Road lines grouped by drawing style: (colour, width, dashes, double).
    styles: dict[tuple[str, float, bool, bool], list[np.ndarray]] = {}
    for kind, poly in zip(rg.line_type, rg.lines(), strict=True):
        if len(poly) < 2:
            continue
        k = int(kind)
        yellow = k in (
            RoadLineType.BROKEN_SINGLE_YELLOW,
            RoadLineType.BROKEN_DOUBLE_YELLOW,
            RoadLineType.SOLID_SINGLE_YELLOW,
            RoadLineType.SOLID_DOUBLE_YELLOW,
            RoadLineType.PASSING_DOUBLE_YELLOW,
        )
        broken = k in (
            RoadLineType.BROKEN_SINGLE_WHITE,
            RoadLineType.BROKEN_SINGLE_YELLOW,
            RoadLineType.BROKEN_DOUBLE_YELLOW,
        )
        double = k in (
            RoadLineType.SOLID_DOUBLE_WHITE,
            RoadLineType.BROKEN_DOUBLE_YELLOW,
            RoadLineType.SOLID_DOUBLE_YELLOW,
            RoadLineType.PASSING_DOUBLE_YELLOW,
        )
        color = _YELLOW_LINE if yellow else _WHITE_LINE if k != RoadLineType.UNKNOWN else _UNKNOWN_LINE
        lw = 2.2 if double else 1.0
        styles.setdefault((color, lw, broken, double), []).append(_dedupe(poly))
    for (color, lw, broken, double), segs in styles.items():
        dash = (0, (4.0, 3.0)) if broken else "solid"
        ax.add_collection(LineCollection(segs, colors=color, linewidths=lw, linestyles=dash, zorder=3))
        if double:  # a road-coloured core turns one thick line into two thin ones
            ax.add_collection(LineCollection(segs, colors=_ROAD, linewidths=0.7, zorder=3.1))
    edges: dict[bool, list[np.ndarray]] = {}
    for kind, poly in zip(rg.edge_type, rg.edges(), strict=True):
        if len(poly) >= 2:
            edges.setdefault(int(kind) == RoadEdgeType.MEDIAN, []).append(_dedupe(poly))
    for median, segs in edges.items():
        ax.add_collection(
            LineCollection(
                segs, colors=_MEDIAN if median else _EDGE, linewidths=1.3, zorder=4, capstyle="round"
            )
        )


def _draw_scale_bar(ax: Axes, view: tuple[float, float, float, float]) -> None:
    xmin, ymin, xmax, ymax = view
    w, h = xmax - xmin, ymax - ymin
    length = _nice_length(w)
    x1 = xmax - 0.03 * w
    x0 = x1 - length
    y = ymin + 0.04 * h
    halo = [patheffects.withStroke(linewidth=3.0, foreground="white")]
    ax.plot([x0, x1], [y, y], color=_TEXT, lw=1.6, solid_capstyle="butt", zorder=9, path_effects=halo)
    label = f"{length:g} m"
    ax.text(
        0.5 * (x0 + x1),
        y + 0.012 * h,
        label,
        ha="center",
        va="bottom",
        fontsize=7,
        color=_TEXT,
        zorder=9,
        path_effects=halo,
    )


class _Panel:
    """One episode drawn into one axes; ``update(step)`` moves the dynamic artists.

    ``own_clock``: the panel shows its own ``t = … s (step k)`` label (used when the panels do not
    share one time step); otherwise it only shows an "ended" tag once its episode is over.
    """

    def __init__(
        self,
        ax: Axes,
        episode: EpisodeRecord,
        view: tuple[float, float, float, float],
        animated: bool,
        own_clock: bool,
        show_end: bool = True,
    ) -> None:
        self.ax = ax
        self.episode = episode
        self.own_clock = own_clock
        self.show_end = show_end
        scene = episode.scene
        self.valid = np.flatnonzero(scene.agent_valid)
        ax.set_facecolor(_OFFROAD_BG)
        ax.set_xlim(view[0], view[2])
        ax.set_ylim(view[1], view[3])
        ax.set_aspect("equal", adjustable="box")
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_edgecolor("#9aa0a6")
            spine.set_linewidth(0.8)
        ax.set_title(episode.title or scene.name, fontsize=9.5, color=_TEXT, pad=4)
        _draw_roadgraph(ax, scene.roadgraph)
        _draw_scale_bar(ax, view)

        v = self.valid
        self.length = scene.length_m[v]
        self.width = scene.width_m[v]
        self.routes = LineCollection(
            [_dedupe(scene.route(int(i))) for i in v],
            linewidths=1.1,
            zorder=5,
            capstyle="round",
            joinstyle="round",
            animated=animated,
        )
        self.goal_rings = LineCollection(
            [_circle(scene.goal_xy[i], GOAL_RADIUS_M) for i in v], linewidths=0.9, zorder=6, animated=animated
        )
        self.goal_marks = ax.scatter(
            scene.goal_xy[v, 0],
            scene.goal_xy[v, 1],
            marker="x",
            s=14.0,
            linewidths=1.0,
            zorder=6,
            animated=animated,
        )
        self.bodies = PolyCollection([], linewidths=0.6, zorder=7, animated=animated)
        self.noses = PolyCollection(
            [], facecolors="white", edgecolors="none", alpha=0.9, zorder=8, animated=animated
        )
        for coll in (self.routes, self.goal_rings, self.bodies, self.noses):
            ax.add_collection(coll)
        self.label = ax.text(
            0.015,
            0.985,
            "",
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=8,
            color=_TEXT,
            zorder=10,
            animated=animated,
            bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "none", "alpha": 0.85},
        )
        self._last = -1

    @property
    def artists(self) -> list[Artist]:
        """The moving artists, in drawing order (an empty label is skipped: text is slow to draw)."""
        arts: list[Artist] = [self.routes, self.goal_rings, self.goal_marks, self.bodies, self.noses]
        if self.label.get_text():
            arts.append(self.label)
        return arts

    def update(self, step: int) -> None:
        """Show step ``step`` (clamped to the episode's last step)."""
        ep = self.episode
        t = min(step, ep.num_steps - 1)
        if t == self._last:
            return
        self._last = t
        v = self.valid
        xy = np.asarray(ep.pos_xy[t, v], dtype=np.float64).reshape(-1, 2)
        yaw = np.asarray(ep.yaw[t, v], dtype=np.float64).reshape(-1)
        rgba = _status_rgba(np.asarray(ep.status[t, v]).reshape(-1))
        faint = rgba.copy()
        faint[:, 3] = 0.3
        self.routes.set_color(_tuples(faint))
        ring = rgba.copy()
        ring[:, 3] = 0.85
        self.goal_rings.set_color(_tuples(ring))
        self.goal_marks.set_color(_tuples(ring))
        ok = np.all(np.isfinite(xy), axis=1) & np.isfinite(yaw)
        self.bodies.set_verts(list(_box_corners(xy[ok], yaw[ok], self.length[ok], self.width[ok])))
        self.bodies.set_facecolor(_tuples(rgba[ok]))
        self.bodies.set_edgecolor(_tuples(_darker(rgba[ok])))
        self.noses.set_verts(list(_nose_triangles(xy[ok], yaw[ok], self.length[ok], self.width[ok])))
        ended = self.show_end and t == ep.num_steps - 1 and ep.num_steps > 1
        if self.own_clock:
            self.label.set_text(_clock_text(t, ep.dt_s) + ("  · ended" if ended else ""))
        else:
            self.label.set_text(f"ended at t = {t * ep.dt_s:.1f} s" if ended else "")


def _clock_text(step: int, dt_s: float) -> str:
    return f"t = {step * dt_s:.1f} s  (step {step})"


def _legend(fig: Figure, ncol: int) -> Legend:
    handles: list[Artist] = [
        Patch(facecolor=c, edgecolor=_darker(np.array([to_rgba(c)]))[0], linewidth=0.6, label=s.name.lower())
        for s, c in STATUS_COLORS.items()
    ]
    handles.append(
        Line2D(
            [], [], color="#555555", marker="x", markersize=5, lw=0.0, label=f"goal (r = {GOAL_RADIUS_M:g} m)"
        )
    )
    return fig.legend(
        handles=handles,
        loc="lower center",
        ncol=ncol,
        frameon=False,
        fontsize=8,
        bbox_to_anchor=(0.5, 0.0),
        handlelength=1.2,
        handletextpad=0.4,
        columnspacing=1.1,
        borderaxespad=0.3,
    )


@dataclass
class _Figure:
    fig: Figure
    canvas: FigureCanvasAgg
    panels: list[_Panel]
    clock: Text | None  # the shared clock in the header, when the panels share one time step


def _build_figure(
    episodes: Sequence[EpisodeRecord],
    dpi: float,
    panel_in: float | None,
    crop: Crop,
    animated: bool,
    clock: bool = True,
) -> _Figure:
    extents = [_episode_extent(ep, crop) for ep in episodes]
    aspects = [(e[2] - e[0]) / (e[3] - e[1]) for e in extents]
    aspect = float(np.clip(np.exp(np.mean(np.log(aspects))), 0.5, 2.0))
    views = [_fit_aspect(e, aspect) for e in extents]
    if panel_in is None:
        panel_in = _auto_panel_inches(max(v[2] - v[0] for v in views), aspect, len(episodes), dpi)
    shared = clock and len({float(ep.dt_s) for ep in episodes}) == 1
    lay = _layout(len(episodes), aspect, panel_in, header=shared, legend_rows=1)
    fig = Figure(figsize=(lay.fig_w_in, lay.fig_h_in), dpi=dpi, facecolor=_FIG_BG)
    canvas = FigureCanvasAgg(fig)
    legend = _legend(fig, ncol=6)
    if legend.get_window_extent(canvas.get_renderer()).width > 0.98 * lay.fig_w_in * dpi:
        legend.remove()  # too wide for a narrow figure: two rows
        lay = _layout(len(episodes), aspect, panel_in, header=shared, legend_rows=2)
        fig.set_size_inches(lay.fig_w_in, lay.fig_h_in)
        _legend(fig, ncol=3)
    panels = []
    for i, (ep, view) in enumerate(zip(episodes, views, strict=True)):
        ax = fig.add_axes(lay.rect(i))
        panels.append(_Panel(ax, ep, view, animated=animated, own_clock=clock and not shared, show_end=clock))
    clock_text = None
    if shared:
        y = 1.0 - 0.5 * _HEADER_IN / lay.fig_h_in
        clock_text = fig.text(
            0.5, y, "", ha="center", va="center", fontsize=10, color=_TEXT, animated=animated
        )
    return _Figure(fig, canvas, panels, clock_text)


# ------------------------------------------------------------------------------------------- frames


def _check_episodes(episodes: Sequence[EpisodeRecord]) -> None:
    if not episodes:
        raise ValueError("render: no episodes given")
    for ep in episodes:
        k = ep.scene.max_agents
        t = ep.num_steps
        if t < 1:
            raise ValueError(f"render: episode '{ep.title or ep.scene.name}' has no steps")
        for name, shape in (("pos_xy", (t, k, 2)), ("yaw", (t, k)), ("status", (t, k))):
            got = np.shape(getattr(ep, name))
            if got != shape:
                raise ValueError(
                    f"render: episode '{ep.title or ep.scene.name}': {name} has shape {got}, "
                    f"expected {shape} (T steps, K={k} scene agents)"
                )


def _select(episodes: Sequence[EpisodeRecord], max_panels: int, frame_stride: int) -> list[EpisodeRecord]:
    """Validate the arguments shared by every renderer and return the episodes to draw."""
    if frame_stride < 1:
        raise ValueError(f"render: frame_stride must be >= 1, got {frame_stride}")
    if not 1 <= max_panels <= 4:
        raise ValueError(f"render: max_panels must be in 1..4, got {max_panels}")
    eps = list(episodes)[:max_panels]
    _check_episodes(eps)
    return eps


def _frame_steps(num_steps: int, stride: int) -> list[int]:
    steps = list(range(0, num_steps, stride))
    if steps[-1] != num_steps - 1:
        steps.append(num_steps - 1)
    return steps


def _render_images(
    episodes: Sequence[EpisodeRecord],
    max_panels: int,
    dpi: float,
    panel_inches: float | None,
    frame_stride: int,
    crop: Crop,
) -> Iterator[Image.Image]:
    eps = _select(episodes, max_panels, frame_stride)
    built = _build_figure(eps, dpi, panel_inches, crop, animated=True)
    canvas = built.canvas
    canvas.draw()  # static background only: the moving artists are animated
    background = canvas.copy_from_bbox(built.fig.bbox)
    renderer = canvas.get_renderer()
    for step in _frame_steps(max(ep.num_steps for ep in eps), frame_stride):
        canvas.restore_region(background)
        for p in built.panels:
            p.update(step)
            for art in p.artists:
                art.draw(renderer)
        if built.clock is not None:
            built.clock.set_text(_clock_text(step, eps[0].dt_s))
            built.clock.draw(renderer)
        buf = canvas.buffer_rgba()
        rgba = Image.frombuffer("RGBA", (buf.shape[1], buf.shape[0]), buf, "raw", "RGBA", 0, 1)
        yield rgba.convert("RGB")  # a copy: the canvas buffer is reused for the next frame


def render_frames(
    episodes: Sequence[EpisodeRecord],
    max_panels: int = 4,
    dpi: float = 100.0,
    panel_inches: float | None = None,
    frame_stride: int = 1,
    crop: Crop = "roadgraph",
) -> Iterator[np.ndarray]:
    """Yield ``(H, W, 3)`` uint8 RGB frames of up to ``max_panels`` episodes advancing together.

    Frame ``j`` shows step ``j * frame_stride`` of every panel (the last step is always included);
    a panel whose episode is shorter holds its last step. Arguments as in :func:`render_episodes_gif`.
    """
    for im in _render_images(episodes, max_panels, dpi, panel_inches, frame_stride, crop):
        yield np.asarray(im)


# ------------------------------------------------------------------------------------------------ GIF


def _palette_image(samples: Sequence[Image.Image]) -> Image.Image:
    """A P-mode image holding a 255-colour palette: the theme/status colours plus an adaptive rest.

    Entry 255 repeats entry 0; frames are remapped off it so that it can be the transparent index.
    """
    fixed = [
        _FIG_BG,
        _OFFROAD_BG,
        _ROAD,
        _LANE_CENTRE,
        _WHITE_LINE,
        _YELLOW_LINE,
        _EDGE,
        _MEDIAN,
        _TEXT,
        *STATUS_COLORS.values(),
    ]
    status_rgba = np.array([to_rgba(c) for c in STATUS_COLORS.values()])
    colors: list[tuple[int, int, int]] = []
    for c in [to_rgba(c) for c in fixed] + [tuple(row) for row in _darker(status_rgba)]:
        rgb = tuple(round(255 * float(x)) for x in c[:3])
        if rgb not in colors:
            colors.append((rgb[0], rgb[1], rgb[2]))
    stack = np.concatenate([np.asarray(s)[::2, ::2] for s in samples], axis=0)
    adaptive = Image.fromarray(np.ascontiguousarray(stack)).quantize(
        colors=255 - len(colors), method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    pal = adaptive.getpalette() or []
    used = np.unique(np.asarray(adaptive)).astype(int)
    for i in used.tolist():
        rgb = (pal[3 * i], pal[3 * i + 1], pal[3 * i + 2])
        if rgb not in colors and len(colors) < 255:
            colors.append(rgb)
    while len(colors) < 256:
        colors.append(colors[0])
    img = Image.new("P", (1, 1))
    img.putpalette([v for c in colors for v in c])
    return img


class _GifEncoder:
    """Quantize RGB frames onto one palette and turn unchanged pixels into the transparent index."""

    TRANSPARENT = 255

    def __init__(self, palette_image: Image.Image) -> None:
        self.palette_image = palette_image
        self.palette = palette_image.getpalette() or []
        self.prev: np.ndarray | None = None

    def indices(self, frame: Image.Image) -> np.ndarray:
        im = frame.quantize(palette=self.palette_image, dither=Image.Dither.NONE)
        idx = np.array(im, dtype=np.uint8)
        idx[idx == self.TRANSPARENT] = 0  # entry 255 duplicates entry 0
        return idx

    def encode(self, frame: Image.Image) -> Image.Image:
        idx = self.indices(frame)
        out = idx
        if self.prev is not None:
            out = idx.copy()
            out[idx == self.prev] = self.TRANSPARENT
        self.prev = idx
        im = Image.fromarray(out)
        im.putpalette(self.palette)
        return im


def _atomic_save(path: Path, save) -> Path:  # type: ignore[no-untyped-def]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def render_episodes_gif(
    episodes: Sequence[EpisodeRecord],
    path: str | os.PathLike[str],
    fps: int = 10,
    max_panels: int = 4,
    dpi: float = 100.0,
    *,
    panel_inches: float | None = None,
    frame_stride: int = 1,
    crop: Crop = "roadgraph",
    end_pause_s: float = 1.0,
) -> Path:
    """Write an animated, looping GIF of up to ``max_panels`` episodes side by side; returns ``path``.

    Panels are laid out 1x1, 1x2 or 2x2 and advance together; a shorter episode holds its last frame.

    Args:
        episodes: recorded episodes; only the first ``max_panels`` are drawn.
        path: output ``.gif`` file (written atomically; parent folders are created).
        fps: playback frames per second.
        max_panels: at most this many panels (1..4).
        dpi: pixels per inch; a panel's long side is ``panel_inches * dpi`` pixels.
        panel_inches: long side of each panel in inches (fonts keep their point size); ``None``
            picks it from the scene size (about 3.5 px per metre, panels 420-840 px, up to 1000 px alone).
        frame_stride: draw every ``frame_stride``-th step (the last step is always drawn).
        crop: ``"roadgraph"`` shows the whole road graph plus a margin; ``"agents"`` zooms onto the
            region the valid agents, their routes and goals occupy (clipped to the road graph).
        end_pause_s: how long the last frame is held before the GIF loops.
    """
    if fps < 1:
        raise ValueError(f"render: fps must be >= 1, got {fps}")
    eps = _select(episodes, max_panels, frame_stride)
    steps = _frame_steps(max(ep.num_steps for ep in eps), frame_stride)
    frame_ms = 1000.0 / fps
    durations = [frame_ms] * len(steps)
    durations[-1] = max(frame_ms, 1000.0 * end_pause_s)

    # Palette from a few representative frames (start, middle, end), then stream every frame.
    sample_eps = [_subsample_episode(ep, [0, (ep.num_steps - 1) // 2, ep.num_steps - 1]) for ep in eps]
    samples = list(_render_images(sample_eps, max_panels, dpi, panel_inches, 1, crop))
    encoder = _GifEncoder(_palette_image(samples))
    frames = (
        encoder.encode(f) for f in _render_images(eps, max_panels, dpi, panel_inches, frame_stride, crop)
    )

    def save(tmp: str) -> None:
        first = next(frames)
        first.save(
            tmp,
            format="GIF",
            save_all=True,
            append_images=frames,
            duration=durations,
            loop=0,
            disposal=1,
            transparency=_GifEncoder.TRANSPARENT,
            optimize=False,
        )

    return _atomic_save(Path(path), save)


def _subsample_episode(ep: EpisodeRecord, steps: list[int]) -> EpisodeRecord:
    s = np.asarray(steps)
    return EpisodeRecord(
        scene=ep.scene,
        pos_xy=ep.pos_xy[s],
        yaw=ep.yaw[s],
        speed=ep.speed[s],
        status=ep.status[s],
        dt_s=ep.dt_s,
        title=ep.title,
    )


# ---------------------------------------------------------------------------------------------- still


def render_scene_png(
    scene: Scene,
    path: str | os.PathLike[str],
    dpi: float = 150.0,
    *,
    panel_inches: float = 7.0,
    title: str = "",
) -> Path:
    """Write a PNG still of one scene: road graph, routes, goals and agents at their spawn poses."""
    k = scene.max_agents
    ep = EpisodeRecord(
        scene=scene,
        pos_xy=scene.spawn_pose[None, :, :2].copy(),
        yaw=scene.spawn_pose[None, :, 2].copy(),
        speed=scene.spawn_speed_mps[None].copy(),
        status=np.full((1, k), int(AgentStatus.ACTIVE), dtype=np.int64),
        dt_s=0.0,
        title=title or f"{scene.name}  ({scene.num_agents} agents at spawn)",
    )
    built = _build_figure([ep], dpi, panel_inches, "roadgraph", animated=False, clock=False)
    built.panels[0].update(0)
    return _atomic_save(
        Path(path), lambda tmp: built.fig.savefig(tmp, format="png", dpi=dpi, facecolor=_FIG_BG)
    )
