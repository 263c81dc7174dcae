"""Write the README's and the site's picture, ``docs/assets/demo_frame.png``, from a demo run.

    .venv/bin/python docs/gen/demo_frame.py runs/demo/episodes.gif [--frame 40]

takes one frame of the GIF that ``scenefactory demo`` (``make demo``) writes — four held-out scenes
driven by the trained policy — and saves it as an optimized PNG (the picture must stay small: it is
in git and on PyPI's page through the README).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from PIL import Image, ImageSequence

OUT = Path(__file__).resolve().parents[1] / "assets" / "demo_frame.png"


def frame(gif: Path, index: int, out: Path = OUT, max_width: int = 1000) -> Path:
    """Save frame ``index`` of ``gif`` (clamped to its last frame) as a palette PNG at most
    ``max_width`` pixels wide; returns ``out``."""
    with Image.open(gif) as im:
        frames = [f.convert("RGB") for f in ImageSequence.Iterator(im)]
    if not frames:
        raise ValueError(f"{gif}: no frames")
    img = frames[min(index, len(frames) - 1)]
    if img.width > max_width:
        img = img.resize((max_width, round(img.height * max_width / img.width)), Image.Resampling.LANCZOS)
    out.parent.mkdir(parents=True, exist_ok=True)
    img.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    return out


def main() -> None:
    """Parse the GIF path and the frame index, write the PNG."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("gif", type=Path)
    p.add_argument("--frame", type=int, default=40)
    a = p.parse_args()
    out = frame(a.gif, a.frame)
    print(f"{out} ({out.stat().st_size / 1024:.0f} KB)")


if __name__ == "__main__":
    main()
