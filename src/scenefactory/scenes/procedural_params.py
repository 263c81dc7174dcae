"""Parameters of the procedural road generators, with their valid and sampled ranges.

Each generator in :mod:`scenefactory.scenes.procedural` takes one frozen params dataclass from here;
every field documents its unit and the range the scene library samples it from (``_field``
metadata, drawn by ``sampled_values`` / ``sample_fields``), and construction validates every field
against its range (``UserError`` naming the field). ``_roundabout_mouth`` and ``_merge_layout``
derive layout positions from params; the validation and the generators both use them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from scenefactory.errors import UserError

_MAX_ARC_LENGTH_M = 180.0  # curved road: longest arc, keeps the scene within +-130 m
_MIN_MERGE_TAIL_M = 30.0  # merge: main road left after the ramp has merged
_MIN_RING_GAP_DEG = 5.0  # roundabout: ring arc kept between one arm's entry and the next exit
SIGNAL_YELLOW_S = 3.0
"""Yellow time of a procedural signal phase [s]."""
SIGNAL_ALL_RED_S = 1.0
"""All-red clearance after each yellow [s]."""
MIN_SIGNAL_GREEN_S = 5.0
"""Shortest green of a procedural signal phase [s]."""
MIN_SIGNAL_CYCLE_S = 2.0 * (MIN_SIGNAL_GREEN_S + SIGNAL_YELLOW_S + SIGNAL_ALL_RED_S)
"""Shortest signal cycle [s]: two phases of green, yellow and all-red."""
DEFAULT_SIGNAL_CYCLE_S = 40.0
"""The cycle ``train drive --signals`` gives signalled junctions [s]: 16 s green per direction."""

# ------------------------------------------------------------------------------------- parameters


def _field(default: Any, lo: float, hi: float, *, sample: bool = True) -> Any:
    """A params field valid in ``[lo, hi]``; ``sample`` says whether the library draws it from that range."""
    return field(default=default, metadata={"range": (lo, hi), "sample": sample})


def _check_signal_cycle(params: Any) -> None:
    """``signal_cycle_s`` is 0 (no signals) or at least :data:`MIN_SIGNAL_CYCLE_S`."""
    cycle = params.signal_cycle_s
    if 0.0 < cycle < MIN_SIGNAL_CYCLE_S:
        raise UserError(
            f"{type(params).__name__}.signal_cycle_s = {cycle!r}: 0 (no signals) or at least "
            f"{MIN_SIGNAL_CYCLE_S:g} s (two phases of {MIN_SIGNAL_GREEN_S:g} s green, {SIGNAL_YELLOW_S:g} s "
            f"yellow and {SIGNAL_ALL_RED_S:g} s all-red)"
        )


def _validate(params: Any) -> None:
    """Check every field against its declared range and type; raise ``UserError`` naming the field."""
    name = type(params).__name__
    for f in dataclasses.fields(params):
        value = getattr(params, f.name)
        lo, hi = f.metadata["range"]
        is_int = isinstance(f.default, int)
        ok_type = isinstance(value, int) if is_int else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type or not math.isfinite(value):
            kind = "an integer" if is_int else "a finite number"
            raise UserError(f"{name}.{f.name} must be {kind}, got {value!r}")
        if not lo <= value <= hi:
            raise UserError(f"{name}.{f.name} = {value!r} is outside its valid range [{lo}, {hi}]")


P = TypeVar("P")


def sampled_values(cls: type, rng: np.random.Generator, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Draw every sampled field of params class ``cls`` from its range (integers inclusive), by name."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.metadata["sample"] or f.name in skip:
            continue
        lo, hi = f.metadata["range"]
        is_int = isinstance(f.default, int)
        values[f.name] = int(rng.integers(lo, hi + 1)) if is_int else float(rng.uniform(lo, hi))
    return values


def sample_fields(cls: type[P], rng: np.random.Generator) -> P:
    """Params of class ``cls`` with every sampled field drawn from its range, defaults elsewhere."""
    return cls(**sampled_values(cls, rng))


@dataclass(frozen=True)
class StraightParams:
    """Two-way straight road along +x, centred on the origin.

    Attributes:
        length_m: road length, m; sampled from [150, 250].
        lanes_per_direction: lanes each way; sampled from [1, 3].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
    """

    length_m: float = _field(200.0, 150.0, 250.0)
    lanes_per_direction: int = _field(2, 1, 3)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges."""
        _validate(self)


@dataclass(frozen=True)
class CurvedParams:
    """Two-way road: a straight lead-in, a left-turning circular arc, a straight lead-out; centred.

    The two straight leads share equally what the arc leaves of ``length_m``.

    Attributes:
        length_m: total length of the road centre line, m; sampled from [170, 230].
        radius_m: arc radius of the road centre line, m; sampled from [50, 200].
        turn_deg: turning angle of the arc, degrees; sampled from [45, 120] with at most
            ``min(180 m, length_m)`` of arc (so larger turns for tighter radii).
        lanes_per_direction: lanes each way; sampled from [1, 2].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
    """

    length_m: float = _field(200.0, 170.0, 230.0)
    radius_m: float = _field(100.0, 50.0, 200.0)
    turn_deg: float = _field(90.0, 45.0, 120.0)
    lanes_per_direction: int = _field(2, 1, 2)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges and the arc-length limit."""
        _validate(self)
        arc_m = self.radius_m * math.radians(self.turn_deg)
        if arc_m > min(_MAX_ARC_LENGTH_M, self.length_m) + 1e-9:
            raise UserError(
                f"CurvedParams: radius_m * turn = {arc_m:.1f} m of arc exceeds min({_MAX_ARC_LENGTH_M} m, "
                "length_m) (the road must hold the arc and fit in +-130 m); lower radius_m or turn_deg"
            )

    @classmethod
    def sample(cls, rng: np.random.Generator) -> CurvedParams:
        """Sample fields; the turn is drawn from [45, min(120, min(180 m, length) / radius)] degrees."""
        values = sampled_values(cls, rng, skip=("turn_deg",))
        hi = min(120.0, math.degrees(min(_MAX_ARC_LENGTH_M, values["length_m"]) / values["radius_m"]))
        return cls(**values, turn_deg=float(rng.uniform(45.0, hi)))


@dataclass(frozen=True)
class IntersectionParams:
    """Four-way junction of two-way arms, with connector lanes for every left/straight/right movement.

    Attributes:
        arm_length_m: length of each arm from the junction mouth outwards, m; sampled from [50, 70].
        lanes_per_direction: lanes each way on every arm; sampled from [1, 2].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        corner_radius_m: radius of the kerb at each corner, m; sampled from [5, 9].
        arm_angle_jitter_deg: each arm's direction is 90 deg * k plus U(-j, j) drawn from ``rng``,
            degrees, in [0, 15].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
        signal_cycle_s: traffic-signal cycle, s: 0 (default) for an unsignalled junction, else in
            [18, 120]: the two crossing directions take turns, each green, 3 s yellow and 1 s all-red
            for half the cycle (``procedural.junction_signals``); not sampled.
    """

    arm_length_m: float = _field(60.0, 50.0, 70.0)
    lanes_per_direction: int = _field(2, 1, 2)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    corner_radius_m: float = _field(7.0, 5.0, 9.0)
    arm_angle_jitter_deg: float = _field(10.0, 0.0, 15.0, sample=False)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)
    signal_cycle_s: float = _field(0.0, 0.0, 120.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges and the signal cycle."""
        _validate(self)
        _check_signal_cycle(self)


@dataclass(frozen=True)
class TJunctionParams:
    """Three-arm junction: a through road along x and a side arm towards +y.

    Attributes:
        arm_length_m: length of each arm from the junction mouth outwards, m; sampled from [50, 70].
        lanes_per_direction: lanes each way on every arm; sampled from [1, 2].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        corner_radius_m: radius of the kerb at each corner, m; sampled from [5, 9].
        arm_angle_jitter_deg: the side arm points at 90 deg plus U(-j, j) drawn from ``rng``,
            degrees, in [0, 25].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
        signal_cycle_s: traffic-signal cycle, s: 0 (default) for an unsignalled junction, else in
            [18, 120]: the two crossing directions take turns, each green, 3 s yellow and 1 s all-red
            for half the cycle (``procedural.junction_signals``); not sampled.
    """

    arm_length_m: float = _field(60.0, 50.0, 70.0)
    lanes_per_direction: int = _field(2, 1, 2)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    corner_radius_m: float = _field(7.0, 5.0, 9.0)
    arm_angle_jitter_deg: float = _field(15.0, 0.0, 25.0, sample=False)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)
    signal_cycle_s: float = _field(0.0, 0.0, 120.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges and the signal cycle."""
        _validate(self)
        _check_signal_cycle(self)


@dataclass(frozen=True)
class RoundaboutParams:
    """Single-lane roundabout (counter-clockwise) with 3 or 4 two-way single-lane arms.

    Entry and exit lanes are circular arcs tangent to the arm lane and to the ring, so the arm
    mouth distance follows from ``ring_radius_m`` and ``entry_radius_m``.

    Attributes:
        ring_radius_m: radius of the ring lane centre, m; sampled from [15, 25].
        num_arms: number of arms; sampled from [3, 4].
        entry_radius_m: radius of the entry/exit arcs, m; sampled from [8, 11].
        arm_length_m: length of each arm, m; sampled from [50, 70].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        arm_angle_jitter_deg: arm k points at 360 deg * k / num_arms plus U(-j, j) drawn from
            ``rng``, degrees, in [0, 8].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
    """

    ring_radius_m: float = _field(20.0, 15.0, 25.0)
    num_arms: int = _field(4, 3, 4)
    entry_radius_m: float = _field(10.0, 8.0, 11.0)
    arm_length_m: float = _field(60.0, 50.0, 70.0)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    arm_angle_jitter_deg: float = _field(8.0, 0.0, 8.0, sample=False)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges and that entries and exits of neighbouring arms leave ring between them."""
        _validate(self)
        _, _, alpha = _roundabout_mouth(self)
        spare = 360.0 / self.num_arms - 2.0 * self.arm_angle_jitter_deg - 2.0 * math.degrees(alpha)
        if spare < _MIN_RING_GAP_DEG:
            raise UserError(
                f"RoundaboutParams: arms too close for their entries ({spare:.1f} deg of ring left between "
                f"arms, need {_MIN_RING_GAP_DEG}); raise ring_radius_m or lower entry_radius_m or num_arms"
            )


@dataclass(frozen=True)
class MergeParams:
    """One-way highway along +x with an on-ramp from the lower left joining the rightmost lane.

    The ramp rises at ``ramp_angle_deg``, bends parallel to the main road as an acceleration lane
    right of the rightmost lane, then tapers (a smoothstep) into the rightmost lane, whose
    downstream segment it exits into.

    Attributes:
        main_length_m: main road length, m; sampled from [200, 240].
        num_main_lanes: main lanes; sampled from [2, 3].
        lane_width_m: lane width, m; sampled from [3.3, 3.75].
        ramp_angle_deg: approach angle of the ramp to the main road, degrees; sampled from [15, 25].
        ramp_drop_m: lateral offset of the ramp start below the acceleration lane, m; sampled from [8, 12].
        accel_length_m: length of the parallel acceleration lane, m; sampled from [20, 40].
        taper_length_m: length of the taper into the rightmost lane, m; sampled from [40, 60].
        shoulder_m: gap between the outer lane boundary and the road edge, m, in [0, 2].
        point_spacing_m: spacing of polyline points, m, in [0.25, 2].
    """

    main_length_m: float = _field(220.0, 200.0, 240.0)
    num_main_lanes: int = _field(3, 2, 3)
    lane_width_m: float = _field(3.5, 3.3, 3.75)
    ramp_angle_deg: float = _field(20.0, 15.0, 25.0)
    ramp_drop_m: float = _field(10.0, 8.0, 12.0)
    accel_length_m: float = _field(30.0, 20.0, 40.0)
    taper_length_m: float = _field(50.0, 40.0, 60.0)
    shoulder_m: float = _field(0.5, 0.0, 2.0, sample=False)
    point_spacing_m: float = _field(1.0, 0.25, 2.0, sample=False)

    def __post_init__(self) -> None:
        """Validate ranges and that the merge ends at least 30 m before the main road does."""
        _validate(self)
        tail = self.main_length_m - _merge_layout(self)["merge_end_x"]
        if tail < _MIN_MERGE_TAIL_M:
            raise UserError(
                f"MergeParams: only {tail:.1f} m of main road after the merge (need {_MIN_MERGE_TAIL_M}); "
                "raise main_length_m or shorten the ramp (ramp_drop_m, accel_length_m, taper_length_m)"
            )


# ---------------------------------------------------------------------------------------- layouts


def _roundabout_mouth(p: RoundaboutParams) -> tuple[float, float, float]:
    """``(r_arm, cy, alpha)`` in an arm's frame (x out along the arm, y to its left).

    The entry arc (radius ``Re``) is tangent to the inbound lane (``y = w/2``) and externally
    tangent to the ring (radius ``R``): its centre is ``(r_arm, cy)`` with ``cy = w/2 + Re`` and
    ``|centre| = R + Re``; the arm lanes end at ``x = r_arm`` and the entry meets the ring at the
    polar angle ``alpha`` (the exit mirrors it at ``-alpha``).
    """
    cy = p.lane_width_m / 2.0 + p.entry_radius_m
    r_arm = math.sqrt((p.ring_radius_m + p.entry_radius_m) ** 2 - cy**2)
    return r_arm, cy, math.atan2(cy, r_arm)


def _merge_layout(p: MergeParams) -> dict[str, float]:
    """Key positions of the merge, in a frame with the main road from x=0 and the rightmost lane at y=0."""
    w, phi = p.lane_width_m, math.radians(p.ramp_angle_deg)
    y_acc = -w
    corner_x = p.ramp_drop_m / math.tan(phi)  # where the ramp line meets the acceleration lane line
    bend = min(12.0, 0.5 * p.ramp_drop_m / math.sin(phi))  # tangent length of the bend on each side
    accel_x = corner_x + bend
    taper_x = accel_x + p.accel_length_m
    return {
        "y_acc": y_acc,
        "corner_x": corner_x,
        "bend": bend,
        "accel_x": accel_x,
        "taper_x": taper_x,
        "merge_end_x": taper_x + p.taper_length_m,
    }
