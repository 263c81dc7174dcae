"""The HTML replay and the live viewer in a real browser: headless Chromium over the DevTools
protocol (``cdp_browser``). Skipped, saying so, where Debian's ``chromium`` is not installed
(``.ci/run`` installs it in CI).

What is pinned, and why (a page that opens but draws nothing, or draws the same picture at every
step, would pass a file-size or JSON test):

- the replay page opens from disk (file://) with no console error or uncaught exception, and decodes
  its worlds;
- two screenshots at different steps differ where the car moved (around its place at each step) and
  nowhere far from the cars (the map stays put);
- clicking the car shows its panel with the recorded speed and TTC at that step;
- play advances the step; choosing another world shows it; the wheel zooms, a drag pans;
- the live viewer (``scenefactory view``) serves a page on 127.0.0.1 that loads and draws: its canvas
  holds more than the background.
"""

from __future__ import annotations

import io
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cdp_browser import Browser, find_chromium
from scenefactory.evaluation.html_replay import write_html_replay
from scenefactory.evaluation.rollout import record_episodes
from scenefactory.tasks.driving.config import DrivingTaskConfig
from test_html_replay import STEPS, chase_scene, coast

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="chromium is not installed (apt-get install -y chromium; .ci/run installs it in CI)",
)

LATER = 12


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    task = DrivingTaskConfig(agents_per_world=3, episode_length_s=STEPS * 0.1)
    (rec,) = record_episodes(coast, task, [chase_scene()])
    recs = [rec, rec]  # two worlds to choose between (one recording: the test is about the page)
    path = write_html_replay(recs, tmp_path_factory.mktemp("replay") / "episodes.html", baseline=[rec, None])
    return path, recs


def _png(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(np.int16)


def _changed(a: np.ndarray, b: np.ndarray, x: float, y: float, r: int = 10) -> int:
    """Pixels that differ between two shots in a (2r)² box around viewport pixel (x, y)."""
    xi, yi = round(x), round(y)
    box = (slice(max(0, yi - r), yi + r), slice(max(0, xi - r), xi + r))
    return int((np.abs(a[box] - b[box]).sum(-1) > 30).sum())


def _set_step(b: Browser, t: int) -> None:
    b.eval(
        f"(() => {{ const s = document.getElementById('slider'); s.value = '{t}';"
        " s.dispatchEvent(new Event('input')); })()"
    )


def test_replay_plays_in_a_browser(replay: tuple[Path, list]) -> None:
    path, recs = replay
    with Browser(1100, 700) as b:
        b.goto(path.as_uri())
        b.wait_for("window.replay && window.replay.ready")
        assert b.eval("window.replay.worlds.length") == 2
        _set_step(b, 0)
        b.pump(0.2)
        first, p0 = _png(b.screenshot()), b.eval("window.replayAgentOnScreen(0)")
        _set_step(b, LATER)
        b.pump(0.2)
        later, p1 = _png(b.screenshot()), b.eval("window.replayAgentOnScreen(0)")
        assert b.eval("window.replay.step") == LATER
        assert p1[0] - p0[0] > 20  # the chaser drove east by more than 20 px at this zoom
        assert _changed(first, later, *p0) > 40  # it left its first place ...
        assert _changed(first, later, *p1) > 40  # ... and stands in its later one
        assert _changed(first, later, 30, 60, r=20) == 0  # far from the cars: the same map

        # click the chaser: its panel shows its recorded speed and TTC at this step
        b.click(*p1)
        b.wait_for("document.getElementById('agent-table') !== null")
        text = b.eval("document.getElementById('agent-panel').innerText")
        rec = recs[0]
        assert f"agent 0 · step {LATER}" in text
        assert f"{rec.speed[LATER, 0]:.2f} m/s" in text
        assert f"{rec.ttc_s[LATER, 0]:.2f} s" in text
        assert "progress" in text and "collision" in text  # the reward terms

        # play advances; another world can be chosen
        _set_step(b, 0)
        b.eval("document.getElementById('play').click()")
        b.pump(0.6)
        assert b.eval("window.replay.step") > 0
        b.eval("document.getElementById('play').click()")
        b.eval(
            "(() => { const w = document.getElementById('world'); w.value = '1';"
            " w.dispatchEvent(new Event('change')); })()"
        )
        assert b.eval("window.replay.world") == 1
        assert "no human baseline" in b.eval("document.getElementById('info').textContent")

        # the wheel zooms in around the cursor; a drag pans
        before = b.eval("({...window.replay.view})")
        b.send("Input.dispatchMouseEvent", type="mouseWheel", x=400, y=300, deltaX=0, deltaY=-400)
        zoomed = b.eval("({...window.replay.view})")
        assert zoomed["scale"] > 1.5 * before["scale"]
        for kind, x in (
            ("mousePressed", 400),
            ("mouseMoved", 450),
            ("mouseMoved", 500),
            ("mouseReleased", 500),
        ):
            b.send("Input.dispatchMouseEvent", type=kind, x=x, y=300, button="left", buttons=1, clickCount=1)
        panned = b.eval("({...window.replay.view})")
        assert panned["cx"] == pytest.approx(zoomed["cx"] - 100 / zoomed["scale"], rel=1e-6)
        b.pump(0.2)
        assert b.errors() == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_live_viewer_page_loads_and_draws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip(
        "viser", reason="the live viewer needs the 'viewer' extra (pip install scenefactory[viewer])"
    )
    from scenefactory.cli.main import main
    from scenefactory.evaluation.rollout import EXPERT
    from scenefactory.jobs.view import serve
    from scenefactory.jobs.view_drive import DriveSource

    # the command checks what to show before it serves anything
    assert main(["view", "--port", str(_free_port())]) == 2
    assert "view needs --scenes DIR, --checkpoint PATH" in capsys.readouterr().err

    # the page loads and draws the scene that arrives over its websocket
    source = DriveSource([chase_scene()], EXPERT, DrivingTaskConfig(agents_per_world=3), "chase")
    urls: list[str] = []
    stop = threading.Event()
    server = threading.Thread(
        target=serve,
        args=(source, _free_port()),
        kwargs={"ready": urls.append, "stop": stop, "max_seconds": 120.0},
    )
    server.start()
    try:
        deadline = time.monotonic() + 30
        while not urls and time.monotonic() < deadline:
            time.sleep(0.1)
        assert urls, "the viewer never became ready"
        with Browser(1000, 700) as b:
            b.goto(urls[0])
            b.wait_for("document.body.innerText.includes('Playback')", timeout_s=30)
            deadline = time.monotonic() + 30
            colours = 0
            while time.monotonic() < deadline:  # the canvas is more than its background
                shot = _png(b.screenshot())
                colours = len(np.unique(shot[::4, ::4].reshape(-1, 3), axis=0))
                if colours > 50:
                    break
                b.pump(0.5)
            assert colours > 50
            assert b.errors() == []
    finally:
        stop.set()
        server.join(20)
    assert not server.is_alive()
