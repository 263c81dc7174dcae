"""A headless Chromium driven over the Chrome DevTools Protocol (CDP), for the browser tests and the
docs screenshot: no Playwright, no browser download — Debian's ``chromium`` and the ``websockets``
package (a dependency of ``mujoco``) are all it needs.

``Browser`` starts ``chromium --headless`` with a fresh profile and ``--remote-debugging-port=0``,
reads the DevTools address Chromium prints, opens a page and speaks CDP over one websocket
(``websockets.sync``): navigate, evaluate JavaScript, click, take PNG screenshots, and collect
console errors and uncaught exceptions. ``python tests/cdp_browser.py PAGE OUT.png`` screenshots a
page (the command behind ``docs/assets/viewer.png``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.request import urlopen

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
)
"""Flags for a headless Chromium as root in a container, with nothing reaching the network."""


def find_chromium() -> str | None:
    """The Chromium executable (``$CHROMIUM``, or ``chromium`` / ``chromium-browser`` on the PATH)."""
    env = os.environ.get("CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 800, timeout_s: float = 30.0) -> None:
        """Start Chromium (``width`` x ``height`` window) and attach to its first page."""
        from websockets.sync.client import connect

        exe = find_chromium()
        if exe is None:
            raise FileNotFoundError("chromium is not installed (apt-get install -y chromium)")
        self.timeout_s = timeout_s
        self._stack = contextlib.ExitStack()
        self.profile = tempfile.mkdtemp(prefix="sf-chromium-")
        self.proc = subprocess.Popen(
            [
                exe,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            port = self._devtools_port()
            page = self._page_ws(port)
            self.ws = self._stack.enter_context(connect(page, max_size=64 * 2**20, open_timeout=timeout_s))
        except BaseException:
            self.close()
            raise
        self._id = 0
        self.console: list[dict[str, Any]] = []
        self.exceptions: list[str] = []
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _devtools_port(self) -> int:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + self.timeout_s
        seen = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                if self.proc.poll() is not None:
                    break
                continue
            seen.append(line.strip())
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                return int(m.group(1))
        raise RuntimeError("chromium did not start its DevTools server: " + " | ".join(seen[-5:]))

    def _page_ws(self, port: int) -> str:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            with urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                targets = json.loads(r.read())
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
            time.sleep(0.1)
        raise RuntimeError("chromium opened no page")

    # ---------------------------------------------------------------------------------- protocol

    def _event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append({"level": params.get("type"), "text": text})
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.exceptions.append(str(d.get("exception", {}).get("description") or d.get("text")))
        elif method == "Log.entryAdded":
            e = params.get("entry", {})
            self.console.append({"level": e.get("level"), "text": e.get("text"), "url": e.get("url")})

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one CDP command and return its result (events meanwhile are collected)."""
        self._id += 1
        mid = self._id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"CDP {method}: no answer in {self.timeout_s} s")
            msg = json.loads(self.ws.recv(timeout=left))
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"CDP {method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self._event(msg)

    def pump(self, seconds: float) -> None:
        """Read events for ``seconds`` (console messages arrive as events)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                self._event(json.loads(self.ws.recv(timeout=left)))
            except TimeoutError:
                return

    # ------------------------------------------------------------------------------------ actions

    def goto(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def eval(self, expression: str) -> Any:
        """Evaluate JavaScript in the page (promises awaited) and return its JSON value."""
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails'].get('text')}: {expression}")
        return r.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout_s: float | None = None) -> Any:
        """Poll ``expression`` until it is truthy; returns its value."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            self.pump(0.05)
        raise TimeoutError(f"page never satisfied: {expression}")

    def click(self, x: float, y: float) -> None:
        """A left click at CSS pixel ``(x, y)`` of the viewport."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            extra = {} if kind == "mouseMoved" else {"button": "left", "clickCount": 1}
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def screenshot(self, path: str | os.PathLike[str] | None = None) -> bytes:
        """A PNG of the viewport (also written to ``path`` when given)."""
        png = base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"])
        if path is not None:
            Path(path).write_bytes(png)
        return png

    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions seen so far."""
        return self.exceptions + [str(c["text"]) for c in self.console if c.get("level") == "error"]

    def close(self) -> None:
        """Stop Chromium (the process this object started) and remove its profile."""
        self._stack.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _main() -> None:
    p = argparse.ArgumentParser(description="Screenshot a page (file or URL) in headless Chromium.")
    p.add_argument("page", help="an HTML file or a URL")
    p.add_argument("out", type=Path, help="PNG to write")
    p.add_argument("--size", default="1280x800", help="viewport WIDTHxHEIGHT")
    p.add_argument("--step", type=int, default=None, help="for an HTML replay: show this step")
    p.add_argument("--world", type=int, default=0, help="for an HTML replay: show this world")
    p.add_argument("--select", type=int, default=None, help="for an HTML replay: select this agent")
    p.add_argument("--fit-agents", action="store_true", help="for an HTML replay: zoom onto the agents")
    p.add_argument(
        "--zoom", type=float, default=None, help="for an HTML replay: zoom by this onto the selected agent"
    )
    p.add_argument("--wait", default="true", help="a JS expression to wait for before the shot")
    p.add_argument(
        "--colors", type=int, default=None, help="save a palette PNG of this many colours (smaller)"
    )
    a = p.parse_args()
    w, h = (int(v) for v in a.size.split("x"))
    url = a.page if "://" in a.page else Path(a.page).resolve().as_uri()
    with Browser(w, h) as b:
        b.goto(url)
        b.wait_for(a.wait)
        if a.step is not None or a.select is not None or a.fit_agents or a.zoom is not None:
            b.wait_for("window.replay && window.replay.ready")
            b.eval(
                f"document.getElementById('world').value = '{a.world}';"
                "document.getElementById('world').dispatchEvent(new Event('change'))"
            )
            if a.fit_agents:
                b.eval("document.getElementById('fit-agents').click()")
            if a.select is not None:
                b.eval(f"window.replay.selected = {a.select}")
            if a.zoom is not None:
                j, t = (a.select or 0), (a.step or 0)
                b.eval(
                    f"(() => {{ const r = window.replay; r.view.scale *= {a.zoom};"
                    f" r.view.cx = r.w.agents.x[{j}][{t}]; r.view.cy = r.w.agents.y[{j}][{t}]; }})()"
                )
            if a.step is not None:
                b.eval(
                    f"(() => {{ const s = document.getElementById('slider'); s.value = '{a.step}';"
                    "s.dispatchEvent(new Event('input')); })()"
                )
        b.pump(0.3)
        png = b.screenshot(a.out)
        if a.colors is not None:
            import io

            from PIL import Image

            im = Image.open(io.BytesIO(png)).convert("RGB")
            pal = im.quantize(colors=a.colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
            pal.save(a.out, optimize=True)
        if b.errors():
            raise SystemExit(f"the page logged errors: {b.errors()}")
    print(f"screenshot: {a.out}")


if __name__ == "__main__":
    _main()
