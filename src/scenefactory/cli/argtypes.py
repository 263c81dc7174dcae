"""The argument types the commands share (checked numbers, paths, their help texts) and the checks
across flags that the CLI runs on every parsed command line before any scene, engine or model is
built; a command's own checks (its seed range, its engine) are in its module. The value bounds live
in :mod:`scenefactory.bounds`."""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from pathlib import Path

from scenefactory.bounds import (
    AUTO,
    MAX_AGENTS,
    MAX_ITERATIONS,
    MAX_SCENE_AGENTS,
    MAX_SCENES,
    MAX_WORLDS,
    OrAuto,
    positive,
)
from scenefactory.errors import UserError

WORLDS = positive(MAX_WORLDS)
AGENTS = positive(MAX_AGENTS, "procedural scenes place up to 32")
SCENE_AGENTS = positive(MAX_SCENE_AGENTS)
ITERATIONS = positive(MAX_ITERATIONS)
SCENES = positive(MAX_SCENES, "scenes are built up front, ~20 ms each")
AGENTS_OR_AUTO = OrAuto.of(AGENTS)
SCENE_AGENTS_OR_AUTO = OrAuto.of(SCENE_AGENTS)

AUTO_HELP = "'auto': the most that keeps worlds 90%% full on average over the --scenes folder"
RESET_HELP = (
    "reset a world once fewer than this fraction of the agents it started with are still driving; "
    "they end as time-outs (default 0: wait for the last one)"
)
SPLIT_HELP = "scenes of --scenes DIR: all, or those 'convert' put in its train or eval split (index.json)"
SIGNALS_HELP = (
    "traffic signals: signal cycles at the procedural junctions, the signal"
    " observation and the red-light and stop-sign penalties"
)


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_out(path: Path, folder: bool, suffix: str | None = None, flag: str = "--out") -> None:
    """``UserError`` naming ``flag`` unless ``path`` can take the command's output: a folder
    (``folder``: existing, or creatable) or a file (``suffix``, e.g. ``.gif``, if it needs one),
    with writable parents; called before the work so a bad path loses nothing."""
    want = "a folder" if folder else f"a {suffix} file" if suffix else "a file name"
    _check_out_place(path, folder, want, suffix, flag)
    if not folder and suffix and path.suffix.lower() != suffix:
        raise UserError(f"{flag} {path}: expected {want}, e.g. {path.with_suffix(suffix)}")


def _check_out_place(path: Path, folder: bool, want: str, suffix: str | None, flag: str) -> None:
    if path.exists():
        if folder and not path.is_dir():
            raise UserError(f"{flag} {path}: is an existing file, expected {want} (existing or new)")
        if not folder and path.is_dir():
            example = path / f"result{suffix or '.json'}"
            raise UserError(f"{flag} {path}: is an existing folder, expected {want} (e.g. {example})")
        if not folder and not path.is_file():
            raise UserError(f"{flag} {path}: is not a regular file, expected {want}")
    else:
        parent = _nearest_existing(path if folder else path.parent)
        if parent.exists() and not parent.is_dir():
            raise UserError(f"{flag} {path}: {parent} is a file, so nothing can be created under it")
    _try_write(path if folder else path.parent, path, want, flag)


def _try_write(folder: Path, path: Path, want: str, flag: str) -> None:
    """Create the missing folders up to ``folder`` and a temporary file in it, then remove what was
    created: the one test of writability that also holds for root, ``/proc``, read-only mounts and
    broken or looping symlinks."""
    missing: list[Path] = []
    p = folder.absolute()
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    created: list[Path] = []
    try:
        for m in reversed(missing):
            m.mkdir()
            created.append(m)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".scenefactory-write-test-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UserError(
            f"{flag} {path}: cannot write there ({reason}), expected {want} you can write"
        ) from None
    finally:
        for c in reversed(created):
            with contextlib.suppress(OSError):
                c.rmdir()


def out_path(text: str) -> Path:
    """Argument type of every ``--out``: a non-empty path (an empty string would mean the current
    folder, never what was meant)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return Path(text)


def check_input(path: Path, flag: str, folder: bool, what: str) -> None:
    """``UserError`` naming ``flag`` unless ``path`` is an existing folder (``folder``) or file;
    ``what`` says what it should be (``a folder written by 'scenefactory ground'``)."""
    if not path.exists():
        raise UserError(f"{flag} {path}: not found, expected {what}")
    if folder != path.is_dir():
        kind = "a folder" if path.is_dir() else "a file"
        raise UserError(f"{flag} {path}: is {kind}, expected {what}")


# ------------------------------------------------------------------------- a parsed command line

FILE_OUTPUTS: dict[tuple[str, str | None], str | None] = {
    ("bench", "drive"): None,
    ("render", "drive"): ".gif",
}
"""Commands whose ``--out`` is a file (→ the suffix it needs); every other ``--out`` is a folder."""


def check_flags(args: argparse.Namespace) -> None:
    """What any command's flags must satisfy beyond one flag at a time, before any work: the output
    path (:func:`check_out`), the ``--data`` folder, ``--agents auto`` and ``--scene-split`` only
    with a ``--scenes`` folder. Raises :class:`UserError` naming the flags."""
    key = (args.command, getattr(args, "task", None))
    if getattr(args, "out", None) is not None:
        suffix = FILE_OUTPUTS.get(key)
        if key == ("render", "drive") and getattr(args, "format", "gif") == "html":
            suffix = ".html"  # the HTML replay alone (with both, the .html goes beside the .gif)
        check_out(args.out, folder=key not in FILE_OUTPUTS, suffix=suffix)
    if getattr(args, "data", None) is not None:
        check_input(args.data, "--data", True, "a dataset folder written by 'scenefactory collect'")
    if getattr(args, "agents", None) == AUTO and getattr(args, "scenes", None) is None:
        raise UserError(
            "--agents auto chooses the agents per world from the scenes of --scenes DIR; procedural "
            "scenes place as many agents as --agents asks for, so give a number"
        )
    if getattr(args, "scene_split", "all") != "all" and getattr(args, "scenes", None) is None:
        raise UserError(f"--scene-split {args.scene_split} picks scenes of --scenes DIR; give the folder")
