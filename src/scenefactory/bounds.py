"""Bounds of every user-set value, and the range checks shared by the CLI and the jobs.

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
import math
from dataclasses import dataclass
from typing import Any

from scenefactory import inputs
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
"""Timed benchmark steps (the benchmark figures in benchmarks/results use 30)."""
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

    def check(self, value: Any, name: str) -> int:
        """The same bounds on a Python value (the API and config fields): ``value`` as an ``int``;
        ``ArgumentError`` naming ``name`` for a float, string, bool or a value out of range."""
        return inputs.integer(value, name, self.low, self.high, self.note)


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

    def contains(self, value: float) -> bool:
        """Whether the finite ``value`` is inside the bounds."""
        above = value > self.high or (self.high_open and value == self.high)
        below = value < self.low or (self.low_open and value == self.low)
        return not (above or below)

    def check(self, value: Any, name: str) -> float:
        """The same bounds on a Python value (the API and config fields): ``value`` as a ``float``;
        ``ArgumentError`` naming ``name`` for a string, bool, NaN, infinity or a value out of range."""
        return inputs.number(value, name, self.describe(), self.contains)


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

WORLDS = positive(MAX_WORLDS)
"""``--worlds``, ``DrivingTaskConfig.num_worlds``."""
AGENTS = positive(MAX_AGENTS, "procedural scenes place up to 32")
"""``--agents`` of procedural scenes (``make_driving_env`` without scenes)."""
SCENE_AGENTS = positive(MAX_SCENE_AGENTS)
"""``--agents`` with a ``--scenes`` folder, ``DrivingTaskConfig.agents_per_world``."""
ENVS = positive(MAX_ENVS)
"""``--envs`` of the Go1 commands, ``make_go1_env(num_envs=)``."""
SCENE_COUNT = positive(MAX_SCENES, "scenes are built up front, ~20 ms each")
"""``--train-scenes``, ``make_driving_env(num_scenes=)``."""

API_ARGUMENTS: dict[str, tuple[IntRange | FloatRange, str]] = {
    "EngineSpec.physics_hz (mujoco, mujoco-warp)": (PHYSICS_HZ, "--physics-hz"),
    "EngineSpec.action_lag_steps": (LAG_STEPS, "--action-lag-steps"),
    "DrivingTaskConfig.num_worlds": (WORLDS, "--worlds"),
    "DrivingTaskConfig.agents_per_world": (SCENE_AGENTS, "--agents (with --scenes)"),
    "DrivingTaskConfig.min_active_fraction": (MIN_ACTIVE_FRACTION, "--min-active-fraction"),
    "make_driving_env(agents_per_world, procedural scenes)": (AGENTS, "--agents"),
    "make_driving_env(seed, procedural scenes)": (DRIVE_SEED, "--seed (train/eval drive)"),
    "make_driving_env(seed, given scenes)": (SEED, "--seed (other commands)"),
    "make_driving_env(num_scenes)": (SCENE_COUNT, "--train-scenes"),
    "make_go1_env(num_envs)": (ENVS, "--envs"),
    "make_go1_env(seed)": (SEED, "--seed (go1)"),
    "reset(seed) (Gymnasium, PettingZoo)": (SEED, "--seed"),
}
"""Every bound the Python API applies, with the CLI flag it shares it with: the API checks a value
with the flag's own range (``IntRange.check``/``FloatRange.check``), so nothing the CLI refuses
passes through the API. ``tests/api/test_bounds_api.py`` tries each bound through the API, and the
bounds table of ``docs/concepts/scene-checks.md`` is generated from this dict."""


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


# ------------------------------------------------------------------------------- the docs table


def docs_tables() -> str:
    """The bounds tables of ``docs/concepts/scene-checks.md`` (Markdown), generated from this module
    and :mod:`scenefactory.scenes.plausibility`, so the page cannot drift from the code
    (``tests/api/test_bounds_api.py`` compares them; rewrite the page's block with this text)."""
    from scenefactory.scenes import plausibility as pl

    rows = ["| Python API argument | CLI flag | expected |", "|---|---|---|"]
    rows += [f"| `{name}` | `{flag}` | {rng.describe()} |" for name, (rng, flag) in API_ARGUMENTS.items()]
    scene = ["| quantity in a scene file | bound |", "|---|---|"]
    for name in (
        "COORDINATE", "SPEED", "SPAWN_SPEED", "ANGLE", "LENGTH", "WIDTH", "LANE_WIDTH",
        "ROUTE_LENGTH", "FRICTION", "WATER_FILM", "LOG_STEP", "CURRENT_TIME_INDEX",
    ):  # fmt: skip
        scene.append(f"| `{name}` | {getattr(pl, name).describe()} |")
    whole = [
        "| scene as a whole | bound |",
        "|---|---|",
        f"| extent (everything placed) | at most {pl.MAX_SCENE_EXTENT_M:g} m a side |",
        f"| log, replay, signal steps | at most {pl.MAX_LOG_STEPS} |",
        f"| JSON nesting | at most {pl.MAX_JSON_DEPTH} levels |",
    ]
    refused = ["| refused | when |", "|---|---|"] + [f"| {k} | {why} |" for k, why in pl.REFUSED]
    warned = ["| warned and counted (`scene_warnings`) | what |", "|---|---|"]
    warned += [f"| `{k}` | {why} |" for k, why in pl.WARNED]
    return "\n\n".join("\n".join(t) for t in (rows, scene, whole, refused, warned)) + "\n"
