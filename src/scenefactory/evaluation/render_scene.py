"""Top-down drawing of one scene into one panel: road, lanes, lines, edges, agents, routes, goals.

Everything is drawn with matplotlib onto a given axes (no pyplot state). ``_draw_roadgraph`` draws
the static road: the surface as the union of lane footprints, dashed lane centres, road lines
styled by type (white/yellow, broken, double) and road edges (medians darker); ``_draw_scale_bar``
adds a round-length scale bar. ``_Panel`` draws one episode's static background and title once and
moves its agents, routes, goals and label in ``update(step)``; ``_episode_extent`` and
``_fit_aspect`` choose the region shown; ``_legend`` adds the status-colour key to a figure. The
theme colours defined here are also reserved in the GIF palette by
:mod:`scenefactory.evaluation.render`, which lays the panels out into figures, animates them and
writes GIFs and scene stills.

Colours: agents by :class:`~scenefactory.evaluation.record.AgentStatus` (ACTIVE blue, GOAL green,
COLLISION red, OFFROAD orange, TIMEOUT grey); each agent's route is a faint line and its goal a
3 m circle (the success radius) with an x, both in the agent's current status colour. Traffic
signals (a scene's :class:`~scenefactory.scenes.scene.SignalLog`) are dots on their stop points in
the state of the frame (``SIGNAL_COLORS``: red, yellow, green, grey when unknown); stop signs are
red octagons.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from matplotlib import patheffects
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from scenefactory.evaluation.record import EpisodeRecord
from scenefactory.scenes.roadgraph import RoadEdgeType, RoadGraph, RoadLineType
from scenefactory.scenes.scene import CAUTION_STATES, GO_STATES, STOP_STATES, SignalLog
from scenefactory.tasks.driving.status import AgentStatus

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

SIGNAL_COLORS: dict[str, str] = {
    "red": "#d50000",
    "yellow": "#ffc400",
    "green": "#00c853",
    "unknown": "#8d8d8d",
}
"""Traffic-signal dot colour by state: stop, caution, go, unknown."""
_SIGNAL_EDGE = "#202020"

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


# ---------------------------------------------------------------------------------------- drawing


def _draw_markings(ax: Axes, rg: RoadGraph) -> None:
    """Crosswalks (white, hatched), speed bumps (amber) and stop signs (red octagons)."""
    cws = [p for p in rg.crosswalks() if len(p) >= 3]
    if cws:
        ax.add_collection(
            PolyCollection(
                cws, facecolors="#f4f4f4", edgecolors="#bbbbbb", hatch="////", linewidths=0.4, zorder=2
            )
        )
    bumps = [p for p in rg.speed_bumps() if len(p) >= 3]
    if bumps:
        ax.add_collection(PolyCollection(bumps, facecolors="#e0a030", edgecolors="none", alpha=0.8, zorder=2))
    if len(rg.stop_sign_xy):
        xs, ys = rg.stop_sign_xy[:, 0], rg.stop_sign_xy[:, 1]
        ax.scatter(xs, ys, marker="8", s=40, c="#c62828", edgecolors="white", linewidths=0.6, zorder=3)


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
    _draw_markings(ax, rg)
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
        sig = scene.signals
        self.signals: SignalLog | None = sig if sig is not None and sig.num_signals else None
        self.signal_dots = (
            ax.scatter(
                sig.stop_xy[:, 0],
                sig.stop_xy[:, 1],
                s=30.0,
                marker="o",
                edgecolors=_SIGNAL_EDGE,
                linewidths=0.6,
                zorder=6.5,
                animated=animated,
            )
            if self.signals is not None and sig is not None
            else None
        )
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
        if self.signal_dots is not None:
            arts.insert(3, self.signal_dots)
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
        if self.signal_dots is not None and self.signals is not None:
            codes = self.signals.states_at(np.array([t]), ep.dt_s)[0]
            self.signal_dots.set_facecolor(signal_colors(codes))
        ended = self.show_end and t == ep.num_steps - 1 and ep.num_steps > 1
        if self.own_clock:
            self.label.set_text(_clock_text(t, ep.dt_s) + ("  · ended" if ended else ""))
        else:
            self.label.set_text(f"ended at t = {t * ep.dt_s:.1f} s" if ended else "")


def signal_colors(codes: np.ndarray) -> list[str]:
    """``SIGNAL_COLORS`` of WOMD signal state codes (S,)."""
    names = {int(c): "red" for c in STOP_STATES}
    names.update({int(c): "yellow" for c in CAUTION_STATES})
    names.update({int(c): "green" for c in GO_STATES})
    return [SIGNAL_COLORS[names.get(int(c), "unknown")] for c in codes]


def _clock_text(step: int, dt_s: float) -> str:
    return f"t = {step * dt_s:.1f} s  (step {step})"


def _legend(fig: Figure, ncol: int, signals: bool = False) -> Legend:
    handles: list[Artist] = [
        Patch(facecolor=c, edgecolor=_darker(np.array([to_rgba(c)]))[0], linewidth=0.6, label=s.name.lower())
        for s, c in STATUS_COLORS.items()
    ]
    handles.append(
        Line2D(
            [], [], color="#555555", marker="x", markersize=5, lw=0.0, label=f"goal (r = {GOAL_RADIUS_M:g} m)"
        )
    )
    if signals:
        handles.append(
            Line2D(
                [],
                [],
                color=SIGNAL_COLORS["red"],
                marker="o",
                markersize=5,
                markeredgecolor=_SIGNAL_EDGE,
                lw=0.0,
                label="signal stop point",
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
