"""Top-down rendering of recorded episodes: an animated GIF of up to four panels, and scene stills.

Everything is drawn with matplotlib on an explicit Agg canvas (no display, no pyplot state); each
panel (road, lanes, lines, edges, agents, colours) is drawn by
:mod:`scenefactory.evaluation.render_scene`, and this module lays the panels out into a figure,
runs the frame loop and encodes the GIF. The static part of a panel (road surface, lane centres,
road lines and edges, scale bar, title) is drawn once; each frame restores that background and
redraws only the moving artists (agents, routes, goals, the shared ``t = … s (step k)`` clock above
the panels). Frames are mapped onto one shared 255-colour palette (status colours reserved
exactly); pixels that did not change since the previous frame are written as the transparent
index, so a GIF of a mostly static road stays small. The GIF is written with Pillow, streamed frame
by frame and looping forever, to a temporary file in the target folder that is then renamed, so it
is never half-written.

Colours: see :mod:`scenefactory.evaluation.render_scene` (``STATUS_COLORS`` and ``GOAL_RADIUS_M``
are importable from here too).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.text import Text
from PIL import Image

from scenefactory.evaluation.record import EpisodeRecord
from scenefactory.evaluation.render_scene import (
    _EDGE,
    _FIG_BG,
    _LANE_CENTRE,
    _MEDIAN,
    _OFFROAD_BG,
    _ROAD,
    _TEXT,
    _WHITE_LINE,
    _YELLOW_LINE,
    GOAL_RADIUS_M,
    SIGNAL_COLORS,
    STATUS_COLORS,
    Crop,
    _clock_text,
    _darker,
    _episode_extent,
    _fit_aspect,
    _legend,
    _Panel,
)
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.status import AgentStatus

__all__ = [
    "GOAL_RADIUS_M",
    "STATUS_COLORS",
    "render_episodes_gif",
    "render_frames",
    "render_scene_png",
]

_TITLE_IN = 0.30
_PAD_IN = 0.10
_HEADER_IN = 0.30
_LEGEND_ROW_IN = 0.24
_PX_PER_M = 3.5
_PANEL_PX_RANGE = (420.0, 840.0, 1000.0)  # min, max in a grid, max for a single panel


# ----------------------------------------------------------------------------------------- layout


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


# ----------------------------------------------------------------------------------------- figure


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
    signals = any(ep.scene.signals is not None and ep.scene.signals.num_signals for ep in episodes)
    legend = _legend(fig, ncol=7 if signals else 6, signals=signals)
    if legend.get_window_extent(canvas.get_renderer()).width > 0.98 * lay.fig_w_in * dpi:
        legend.remove()  # too wide for a narrow figure: two rows
        lay = _layout(len(episodes), aspect, panel_in, header=shared, legend_rows=2)
        fig.set_size_inches(lay.fig_w_in, lay.fig_h_in)
        _legend(fig, ncol=4 if signals else 3, signals=signals)
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
        *SIGNAL_COLORS.values(),
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
