"""Checked command-line values, shared by every command (``cli``, ``go1_cli``).

- Every numeric flag's ``type`` is an :class:`IntRange` or a :class:`FloatRange`: a finite value in
  its bounds, or an ``ArgumentTypeError`` that argparse prefixes with the flag's name
  (``argument --worlds: expected an integer in [1, 8192], got 0``). The bounds below say why.
- :func:`policy_steps` is the one rule for a physics rate against a policy rate;
  :func:`check_scene_range` keeps ``--seed`` plus a scene count inside a split's seed range;
  :func:`check_out` and :func:`check_input` check paths. They raise :class:`UserError` naming the
  flags; :func:`check_flags` runs them on a parsed command line, which the CLI does before any
  scene, engine or model is built.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenefactory.errors import UserError
from scenefactory.scenes.library import SEEDS_PER_SPLIT, SPLIT_SEED_BASE

# ---------------------------------------------------------------------------------------- bounds

MIN_PHYSICS_HZ = 100.0
"""Lowest mujoco physics rate: the car world's time step must be at most 0.01 s
(``vehicles.car.world_mjcf``: contacts' solref needs two steps per 0.02 s)."""
MAX_PHYSICS_HZ = 1000.0
"""Highest physics rate: 100 substeps per 10 Hz policy step, 8× the default's cost (1e9 hung)."""
MAX_POLICY_HZ = MAX_PHYSICS_HZ
"""A policy step is at least one physics step."""
MIN_POLICY_HZ = 1.0

MAX_DRIVE_SEED = SEEDS_PER_SPLIT - 1
"""Driving seeds index procedural scenes: train and eval ranges hold ``SEEDS_PER_SPLIT`` each."""
MAX_SEED = 2**32 - 1
"""Other seeds go to numpy and torch generators (numpy's legacy range)."""
MAX_WORLDS = 8192
"""Driving worlds in one batch (32× the benchmark's 256)."""
MAX_AGENTS = 32
"""Controlled agents per procedural scene: they place up to 32."""
MAX_SCENE_AGENTS = 128
"""Controlled agents per converted scene (a WOMD scenario tracks at most 128 objects)."""
MAX_ENVS = 16384
"""Go1 robots in one batch (16× the training default)."""
MAX_ITERATIONS = 100_000
"""PPO iterations (about 40 h at the demo's 1.4 s per iteration)."""
MAX_SCENES = 10_000
"""Procedural scenes a run builds up front (about 20 ms and 60 kB each: 10,000 = 3 min, 0.6 GB)."""
MAX_BENCH_STEPS = 10_000
"""Timed benchmark steps (the README's figures use 30)."""
MAX_STEPS = 1_000_000
"""Recorded policy steps (``collect``) and network training steps (``ground``)."""
MAX_EPOCHS = 10_000
MAX_HISTORY = 256
"""Steps or frames a model reads (a driving episode is 200 policy steps)."""
MAX_LAG_STEPS = 100
"""Actuator lag in policy steps: 10 s at 10 Hz, half a driving episode."""
MAX_BUDGET = 10**9
"""Target transitions a grounding fit may use."""
MAX_POLICY_SEEDS = 100
"""Policies trained per kind by an experiment."""
MAX_HIDDEN = 4096
"""Width of a recurrent layer."""
MAX_THREADS = 256
MAX_WORKERS = 256
MAX_EPISODES = 4096
"""Go1 evaluation and deployment runs per command (eval runs a row's episodes in parallel)."""
MAX_RENDER_S = 60.0
"""Go1 video length: its frames are held in memory (60 s = 1,500 frames, 1 GB)."""
MAX_RUN_S = 600.0
"""Length of one deployment run."""
MAX_LATENCY_MS = 1000.0
MAX_SCALE = 100.0
"""Joint damping and friction scales."""
MAX_WEIGHT = 1000.0
"""Reward weights set on the command line."""


def _shown(text: str) -> str:
    """``text`` quoted on one line, cut to a readable length."""
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _fmt(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class IntRange:
    """Argument type: an integer in ``[low, high]``; ``note`` says why the upper bound is there."""

    low: int
    high: int
    note: str = ""

    def __call__(self, text: str) -> int:
        """Parse ``text``; ``ArgumentTypeError`` naming the bounds and the value otherwise."""
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {_shown(text)}") from None
        if not self.low <= value <= self.high:
            shown = str(value) if len(str(value)) <= 40 else f"{str(value)[:20]}..."
            note = f" ({self.note})" if value > self.high and self.note else ""
            raise argparse.ArgumentTypeError(f"expected {self.describe()}{note}, got {shown}")
        return value

    def describe(self) -> str:
        """What the flag expects, e.g. ``an integer in [1, 8192]``."""
        return f"an integer in [{self.low}, {self.high}]"


@dataclass(frozen=True)
class FloatRange:
    """Argument type: a finite number in ``[low, high]`` (an end excluded when ``*_open``)."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False
    what: str = "a number"
    note: str = ""

    def __call__(self, text: str) -> float:
        """Parse ``text``; ``ArgumentTypeError`` naming the bounds and the value otherwise."""
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {_shown(text)}") from None
        above = value > self.high or (self.high_open and value == self.high)
        below = value < self.low or (self.low_open and value == self.low)
        if not math.isfinite(value) or above or below:
            note = f" ({self.note})" if above and self.note else ""
            raise argparse.ArgumentTypeError(f"expected {self.describe()}{note}, got {value:g}")
        return value

    def describe(self) -> str:
        """What the flag expects, e.g. ``a rate in Hz in [100, 1000]``."""
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"{self.what} in {left}{_fmt(self.low)}, {_fmt(self.high)}{right}"


def positive(high: int, note: str = "") -> IntRange:
    """An integer in ``[1, high]``."""
    return IntRange(1, high, note)


DRIVE_SEED = IntRange(0, MAX_DRIVE_SEED)
SEED = IntRange(0, MAX_SEED)
PHYSICS_HZ = FloatRange(MIN_PHYSICS_HZ, MAX_PHYSICS_HZ, what="a physics rate in Hz")
POLICY_HZ = FloatRange(MIN_POLICY_HZ, MAX_POLICY_HZ, what="a policy rate in Hz")
LAG_STEPS = IntRange(0, MAX_LAG_STEPS, "half a 20 s episode at 10 Hz")
PROBABILITY = FloatRange(0.0, 1.0, high_open=True, what="a probability")
FRACTION = FloatRange(0.0, 1.0, what="a number")
EVAL_FRACTION = FloatRange(0.0, 1.0, what="a fraction of the scenes")
"""``convert --eval-fraction``: the share of scenario ids put in the eval split."""
MIN_ACTIVE_FRACTION = FloatRange(0.0, 1.0, what="a fraction of a world's starting agents")
"""``--min-active-fraction``: the training reset policy (``DrivingTaskConfig.min_active_fraction``)."""

AUTO = "auto"
"""``--agents auto``: agents per world chosen from the ``--scenes`` folder (``tasks.driving.slots``)."""


@dataclass(frozen=True)
class OrAuto(IntRange):
    """Argument type: ``auto`` (:data:`AUTO`) or an integer in ``[low, high]``."""

    def __call__(self, text: str) -> int | str:  # type: ignore[override]
        """``"auto"``, or the integer; ``ArgumentTypeError`` naming both otherwise."""
        if text.strip().lower() == AUTO:
            return AUTO
        return super().__call__(text)

    def describe(self) -> str:
        """What the flag expects, e.g. ``'auto' or an integer in [1, 32]``."""
        return f"'{AUTO}' or {super().describe()}"

    @classmethod
    def of(cls, rng: IntRange) -> OrAuto:
        """``auto`` or what ``rng`` accepts."""
        return cls(rng.low, rng.high, rng.note)


# --------------------------------------------------------------------------- checks across flags


def policy_steps(physics_hz: float, policy_hz: float, policy_flag: str) -> int:
    """Physics steps per policy step (the decimation ``physics_hz / policy_hz``), the same test as
    the mujoco tier's (``engines.mujoco_engine``); ``UserError`` naming ``--physics-hz`` and
    ``policy_flag`` (e.g. ``--policy-hz 7``, or ``the checkpoint's 10 Hz policy``) when the policy
    step is not a whole number of physics steps or a rate is out of its bounds."""
    for rate, name, rng in ((physics_hz, "--physics-hz", PHYSICS_HZ), (policy_hz, policy_flag, POLICY_HZ)):
        try:
            rng(str(rate))
        except argparse.ArgumentTypeError as exc:
            raise UserError(f"{name}: {exc}") from None
    dt = 1.0 / policy_hz
    substeps = round(dt * physics_hz)
    if substeps < 1 or not math.isclose(substeps / physics_hz, dt, rel_tol=1e-6):
        k = max(math.ceil(MIN_PHYSICS_HZ / policy_hz), round(physics_hz / policy_hz), 1)
        raise UserError(
            f"--physics-hz {physics_hz:g} with {policy_flag}: a policy step must be a whole number of "
            f"physics steps; expected --physics-hz a multiple of {policy_hz:g} (e.g. {k * policy_hz:g})"
        )
    return substeps


def check_scene_range(split: str, first: int, count: int, flags: str) -> None:
    """``UserError`` naming ``flags`` unless procedural scenes ``first .. first + count − 1`` of
    ``split`` lie inside its seed range (``scenes.library``: ``SEEDS_PER_SPLIT`` per split), so a
    run never walks past it (a large ``--episodes`` used to hang building scenes first)."""
    last = first + count - 1
    if count > 0 and (first < 0 or last >= SEEDS_PER_SPLIT):
        base = SPLIT_SEED_BASE[split]
        name = "evaluation" if split == "eval" else "training"
        raise UserError(
            f"{flags}: needs {name} scenes {first}..{last}, past the {name} range of {SEEDS_PER_SPLIT} "
            f"scenes (seeds {base}..{base + SEEDS_PER_SPLIT - 1}); expected a smaller --seed or count"
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
    from scenefactory import drive  # its scene counts; drive imports this module

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
            from scenefactory.vehicles.validate import POLICY_HZ

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
        from scenefactory.grounding.fit import load_dynamics_model

        load_dynamics_model(Path(args.dynamics_model))
    if args.engine == "grounded" and args.grounding is not None:
        from scenefactory.grounding.artifact import load_grounding

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
    from scenefactory.drive import TRAIN_SCENES

    if args.train_scenes is not None:
        return int(args.train_scenes)
    return 0 if args.scenes else TRAIN_SCENES
