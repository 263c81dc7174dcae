"""``scenefactory view``: a live 3D viewer in the browser, served from Python by viser (the optional
``viewer`` extra), on 127.0.0.1 only.

It shows one of three sources (:mod:`~scenefactory.jobs.view_drive`, :mod:`~scenefactory.jobs.view_go1`):

- a folder of scenes: the road, and the scenes' logged drivers driving closed loop (their spawn
  poses only, for scenes without a log);
- a running evaluation: a driving checkpoint's policy on those scenes (or on held-out procedural
  ones), stepped as the viewer plays;
- a Go1 policy walking through the command sequence of ``render go1`` on its terrain: the MJCF's
  geoms, the height field, the commanded and measured velocity as arrows.

Every source is live: the simulation advances as the timeline plays past its last frame, and each
frame is kept, so the slider scrubs back through what has run. The controls (a "Playback" panel):
play/pause, one step back or forward, the step slider and the playback speed. The server stops
cleanly on Ctrl-C or after ``max_seconds``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from scenefactory.errors import UserError

HOST = "127.0.0.1"
"""The viewer listens on this address only: it is not reachable from other machines."""
SPEEDS = ("0.25", "0.5", "1", "2", "4")
"""Playback speeds offered (multiples of real time)."""


class Source(Protocol):
    """What the viewer plays: frames ``0 … num_frames - 1`` at ``dt_s``, more while ``live``."""

    title: str
    dt_s: float

    def build(self, server: Any) -> None:
        """Add the static scene and any source-specific GUI to ``server``."""

    def num_frames(self) -> int:
        """Frames recorded so far."""

    def extend(self) -> bool:
        """Run the simulation one more frame; ``False`` when it has ended (no frame added)."""

    def show(self, frame: int) -> None:
        """Move the scene to ``frame``."""

    def describe(self, frame: int) -> str:
        """A line of Markdown about ``frame`` (time, statuses, commands)."""


@dataclass(frozen=True, kw_only=True)
class ViewArgs:
    """Arguments of ``scenefactory view``: ``scenes_dir`` (a folder of scene JSON) and/or
    ``checkpoint`` (a driving policy: a running evaluation), or ``go1`` (a Go1 checkpoint, or the
    string ``shipped`` for the policy shipped with the package); ``worlds`` scenes at once; the
    ``port`` on 127.0.0.1; ``max_seconds`` to stop by itself (``None``: until Ctrl-C)."""

    scenes_dir: Path | None = None
    scene_split: str = "all"
    checkpoint: Path | None = None
    go1: str | None = None
    worlds: int = 4
    seed: int = 0
    port: int = 8080
    max_seconds: float | None = None


class Timeline:
    """The Playback panel and the clock: play/pause, step back/forward, a slider and a speed."""

    def __init__(self, server: Any, source: Source) -> None:
        """Add the controls to ``server``'s GUI for ``source``."""
        self.source = source
        self.playing = False
        self.frame = 0
        self.ended = False
        self._acc = 0.0
        gui = server.gui
        with gui.add_folder("Playback"):
            self.play = gui.add_button("Play / pause", hint="play from the shown step; pause")
            self.back = gui.add_button("Step back")
            self.fwd = gui.add_button("Step forward", hint="runs the simulation past its last frame")
            self.slider = gui.add_slider("Step", min=0, max=1, step=1, initial_value=0)
            self.speed = gui.add_dropdown("Speed", SPEEDS, initial_value="1")
            self.status = gui.add_markdown("")
        self.play.on_click(lambda _: self.toggle())
        self.back.on_click(lambda _: self.goto(self.frame - 1, pause=True))
        self.fwd.on_click(lambda _: self.goto(self.frame + 1, pause=True))
        self.slider.on_update(lambda _: self._slid())
        self._sync()

    def toggle(self) -> None:
        """Play or pause."""
        self.playing = not self.playing

    def _slid(self) -> None:
        if int(self.slider.value) != self.frame:
            self.goto(int(self.slider.value))

    def goto(self, frame: int, pause: bool = False) -> None:
        """Show ``frame`` (running the simulation up to it when it is past the last one)."""
        if pause:
            self.playing = False
        while frame >= self.source.num_frames() and not self.ended:
            self.ended = not self.source.extend()
        self.frame = max(0, min(frame, self.source.num_frames() - 1))
        self.source.show(self.frame)
        self._sync()

    def _sync(self) -> None:
        n = self.source.num_frames()
        self.slider.max = max(1, n - 1)
        if int(self.slider.value) != self.frame:
            self.slider.value = self.frame
        more = "" if self.ended else " (more as it plays)"
        self.status.content = f"{self.source.describe(self.frame)}  \nframes: {n}{more}"

    def tick(self, elapsed_s: float) -> None:
        """Advance by ``elapsed_s`` of wall time when playing."""
        if not self.playing:
            return
        self._acc += elapsed_s * float(self.speed.value)
        steps = int(self._acc / self.source.dt_s)
        if steps:
            self._acc -= steps * self.source.dt_s
            self.goto(self.frame + steps)
            if self.ended and self.frame >= self.source.num_frames() - 1:
                self.playing = False


def make_source(args: ViewArgs) -> Source:
    """The source the arguments name (each checked before anything is built)."""
    if args.go1 is not None:
        if args.scenes_dir is not None or args.checkpoint is not None:
            raise UserError("view: --go1 shows a Go1 policy alone; leave out --scenes and --checkpoint")
        from scenefactory.jobs.view_go1 import Go1Source

        return Go1Source.load(args.go1, args.seed)
    if args.scenes_dir is None and args.checkpoint is None:
        raise UserError(
            "view needs --scenes DIR, --checkpoint PATH (a driving policy) or --go1 CHECKPOINT|shipped"
        )
    from scenefactory.jobs.view_drive import DriveSource

    return DriveSource.load(args.scenes_dir, args.scene_split, args.checkpoint, args.worlds, args.seed)


def serve(
    source: Source, port: int, max_seconds: float | None = None, ready: Any = None, stop: Any = None
) -> None:
    """Serve ``source`` on http://127.0.0.1:``port`` until Ctrl-C, ``max_seconds`` or ``stop`` (a
    ``threading.Event``) is set; ``ready`` (a callable) is told the URL once the page can be opened."""
    import viser

    server = viser.ViserServer(host=HOST, port=port, label=source.title, verbose=False)
    try:
        server.scene.set_up_direction("+z")
        server.scene.configure_environment_map(None)  # no image to fetch: lit by the default lights only
        server.scene.configure_default_lights(True, cast_shadow=False)
        source.build(server)
        timeline = Timeline(server, source)
        timeline.goto(0)
        if ready is not None:
            ready(f"http://{HOST}:{server.get_port()}/")
        start = last = time.monotonic()
        while (max_seconds is None or time.monotonic() - start < max_seconds) and not (
            stop and stop.is_set()
        ):
            time.sleep(0.02)
            now = time.monotonic()
            timeline.tick(now - last)
            last = now
    finally:
        server.stop()


def view(args: ViewArgs, ready: Any = None) -> None:
    """Run the viewer (see the module docstring)."""
    try:
        import viser  # noqa: F401
    except ImportError as exc:
        raise UserError(
            "the live viewer needs viser: pip install 'scenefactory[viewer]' (the HTML replay of "
            "'render drive --format html' needs nothing more)"
        ) from exc
    if not 1 <= args.port <= 65535:
        raise UserError(f"--port must be in 1-65535, got {args.port}")
    source = make_source(args)
    serve(source, args.port, args.max_seconds, ready)
