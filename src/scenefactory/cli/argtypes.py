"""Checked paths and the checks across flags that the CLI runs on a parsed command line before any
scene, engine or model is built (the value bounds live in :mod:`scenefactory.bounds`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from scenefactory.bounds import AUTO, check_scene_range, policy_steps
from scenefactory.errors import UserError


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

INPUTS: tuple[tuple[str, str, bool, str], ...] = (
    ("data", "--data", True, "a dataset folder written by 'scenefactory collect'"),
    ("grounding", "--grounding", True, "a folder written by 'scenefactory ground'"),
    ("dynamics_model", "--dynamics-model", False, "a model.pt written by 'scenefactory fit-dynamics'"),
)
"""(attribute, flag, is a folder, what it should be) of the input paths checked before the work."""


def check_flags(args: argparse.Namespace) -> None:
    """Everything about the flags that argparse cannot check one flag at a time, before any work:
    the output path (:func:`check_out`), input paths, the physics rate
    against the policy rate, engine-specific flags and the scene-seed range. Raises
    :class:`UserError` naming the flags."""
    from scenefactory.jobs import drive  # its scene counts; drive imports this module

    key = (args.command, getattr(args, "task", None))
    if getattr(args, "out", None) is not None:
        check_out(args.out, folder=key not in FILE_OUTPUTS, suffix=FILE_OUTPUTS.get(key))
    if hasattr(args, "grounding"):
        _check_engine_flags(args)
    for attr, flag, folder, what in INPUTS:
        value = getattr(args, attr, None)
        if isinstance(value, str | Path):  # experiment's --dynamics-model is KIND=PATH pairs
            check_input(Path(value), flag, folder, what)
    if hasattr(args, "grounding"):
        _check_engine_files(args)
    if hasattr(args, "physics_hz"):
        if args.command == "validate":
            from scenefactory.evaluation.vehicle import POLICY_HZ

            policy_steps(args.physics_hz, POLICY_HZ, f"the vehicle checks' {POLICY_HZ:g} Hz policy")
        elif hasattr(args, "policy_hz"):
            policy_steps(args.physics_hz, args.policy_hz, f"--policy-hz {args.policy_hz:g}")
        else:
            policy_steps(args.physics_hz, drive.POLICY_HZ, f"the {drive.POLICY_HZ:g} Hz policy")
    if getattr(args, "agents", None) == AUTO and getattr(args, "scenes", None) is None:
        raise UserError(
            "--agents auto chooses the agents per world from the scenes of --scenes DIR; procedural "
            "scenes place as many agents as --agents asks for, so give a number"
        )
    if getattr(args, "scene_split", "all") != "all" and getattr(args, "scenes", None) is None:
        raise UserError(f"--scene-split {args.scene_split} picks scenes of --scenes DIR; give the folder")
    _check_seed_range(args, drive)


def _check_engine_flags(args: argparse.Namespace) -> None:
    if args.engine == "learned" and args.dynamics_model is None:
        raise UserError(
            "--engine learned needs --dynamics-model PATH (a model.pt from 'scenefactory fit-dynamics')"
        )
    if args.engine == "grounded" and args.grounding is None:
        raise UserError("--engine grounded needs --grounding PATH (a folder from 'scenefactory ground')")
    if args.grounding is not None and args.engine != "grounded":
        raise UserError(f"--grounding applies to --engine grounded, not to --engine {args.engine}")


def _check_engine_files(args: argparse.Namespace) -> None:
    """Read the learned or grounded engine's model (safely, and cheaply) so that a foreign, unsafe
    or damaged file is refused before any scene is built."""
    if args.engine == "learned" and args.dynamics_model is not None:
        from scenefactory.dynamics.model_file import load_dynamics_model

        load_dynamics_model(Path(args.dynamics_model))
    if args.engine == "grounded" and args.grounding is not None:
        from scenefactory.dynamics.artifact import load_grounding

        load_grounding(Path(args.grounding))


def _check_seed_range(args: argparse.Namespace, drive: Any) -> None:
    """Procedural scenes a driving command builds stay in their split's seed range."""
    key = (args.command, getattr(args, "task", None))
    seed = getattr(args, "seed", 0)
    if key == ("train", "drive"):
        n = train_scenes(args)
        check_scene_range("train", seed, n, f"--seed {seed} with --train-scenes {n}")
    elif key == ("eval", "drive") and args.scenes is None and args.policy == "checkpoint":
        check_scene_range("eval", seed, args.episodes, f"--seed {seed} with --episodes {args.episodes}")
    elif key == ("render", "drive") and args.scenes is None:
        first = seed + drive.RENDER_SEED_OFFSET
        check_scene_range("eval", first, args.panels, f"--seed {seed} with --panels {args.panels}")
    elif key == ("bench", "drive") and getattr(args, "scenes", None) is None:
        check_scene_range("train", seed, drive.BENCH_SCENES, f"--seed {seed}")
    elif key == ("collect", "drive"):
        check_scene_range("train", seed, drive.COLLECT_SCENES, f"--seed {seed}")


def train_scenes(args: argparse.Namespace) -> int:
    """Procedural scenes of ``train drive``: ``--train-scenes``, or the default count, none with
    ``--scenes``."""
    from scenefactory.jobs.drive import TRAIN_SCENES

    if args.train_scenes is not None:
        return int(args.train_scenes)
    return 0 if args.scenes else TRAIN_SCENES
