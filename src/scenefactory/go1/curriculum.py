"""The terrain curriculum (Isaac Lab's ``terrain_levels_vel``) and each robot's tile.

Every robot has a tile: a level (row of the grid, its difficulty) and a column (its kind); it
starts each episode at that tile's origin. Columns are dealt out evenly over the robots in order
(robot ``i`` of ``N`` gets column ``⌊i·C/N⌋``, as Isaac Lab) and stay; initial levels are uniform
in ``0 … max_init_level``. When an episode ends (:func:`next_levels`):

* a robot whose base ended farther than half a tile from where it started is **promoted** one level;
* else one that covered less than half its commanded distance is **demoted** one level (not below 0).
  The commanded distance is how far the commands lead from the start: ``‖∫ R(ψ*) v*_xy dt‖``, the
  body-frame velocity commands turned by the commanded heading ``ψ* = ψ₀ + ∫ω* dt`` (``ψ₀`` the
  robot's heading at the start). Isaac Lab's rule, ``‖v*_xy‖·T``, assumes heading commands that
  keep robots walking straight; with yaw-rate commands a robot told to walk a circle would cover
  a small fraction of that length and be demoted however well it walked. For a robot that fell
  the commanded displacement is extended at its mean rate to the full episode length (it did not
  finish);
* a robot promoted beyond the top level is sent to a uniformly random level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

IntArray = npt.NDArray[np.int64]
Array = npt.NDArray[np.float64]


def initial_levels(num_envs: int, max_init_level: int, rng: np.random.Generator) -> IntArray:
    """(N,) levels uniform in ``0 … max_init_level``."""
    return rng.integers(0, max_init_level + 1, num_envs).astype(np.int64)


def initial_columns(num_envs: int, num_cols: int) -> IntArray:
    """(N,) columns dealt out evenly in robot order: ``⌊i·C/N⌋``."""
    return (np.arange(num_envs) * num_cols // num_envs).astype(np.int64)


def next_levels(
    levels: IntArray,
    distance_m: Array,
    commanded_m: Array,
    tile_size_m: float,
    num_levels: int,
    rng: np.random.Generator,
) -> IntArray:
    """(n,) levels after episodes that ended at ``distance_m`` (n,) from their start, having been
    commanded ``commanded_m`` (n,) (module docstring); ``rng`` draws the random level of each robot
    promoted beyond the top (and nothing else)."""
    up = distance_m > tile_size_m / 2
    down = (distance_m < 0.5 * commanded_m) & ~up
    new = levels + up.astype(np.int64) - down.astype(np.int64)
    top = new >= num_levels
    if top.any():
        new[top] = rng.integers(0, num_levels, int(top.sum()))
    return np.maximum(new, 0)


class TerrainCurriculum:
    """Each robot's tile and the running sums its episode's promotion reads; arrays are (N, ...)."""

    STATE = ("levels", "cols", "start_xy", "commanded_xy", "heading_rad", "elapsed_s")
    """The arrays the next steps read (saved with the environment)."""

    def __init__(
        self,
        num_envs: int,
        num_levels: int,
        num_cols: int,
        max_init_level: int,
        tile_size_m: float,
        rng: np.random.Generator,
    ) -> None:
        """Deal the columns and draw the initial levels from ``rng``."""
        self.num_levels, self.tile_size_m = num_levels, tile_size_m
        self.levels = initial_levels(num_envs, min(max_init_level, num_levels - 1), rng)
        self.cols = initial_columns(num_envs, num_cols)
        self.start_xy = np.zeros((num_envs, 2))
        """Where each robot started its episode [m]."""
        self.commanded_xy = np.zeros((num_envs, 2))
        """``∫ R(ψ*) v*_xy dt`` over each robot's episode so far [m]: where its commands lead."""
        self.heading_rad = np.zeros(num_envs)
        """The commanded heading ``ψ*`` [rad]: the start heading plus ``∫ω* dt``."""
        self.elapsed_s = np.zeros(num_envs)

    def begin(self, ids: IntArray, start_xy: Array, yaw_rad: Array) -> None:
        """Robots ``ids`` start an episode at ``start_xy`` (n, 2) heading ``yaw_rad`` (n,)."""
        self.start_xy[ids] = start_xy
        self.commanded_xy[ids] = 0.0
        self.heading_rad[ids] = yaw_rad
        self.elapsed_s[ids] = 0.0

    def advance(self, command: Array, dt: float) -> None:
        """Every robot was commanded ``command`` (N, 3) (vx, vy [m/s] in its body frame, yaw rate
        [rad/s]) for ``dt`` seconds: the commanded heading turns at the mid-point of the step."""
        mid = self.heading_rad + 0.5 * command[:, 2] * dt
        c, s = np.cos(mid), np.sin(mid)
        self.commanded_xy[:, 0] += (c * command[:, 0] - s * command[:, 1]) * dt
        self.commanded_xy[:, 1] += (s * command[:, 0] + c * command[:, 1]) * dt
        self.heading_rad += command[:, 2] * dt
        self.elapsed_s += dt

    def end(
        self,
        ids: IntArray,
        end_xy: Array,
        fell: npt.NDArray[np.bool_],
        episode_s: float,
        rng: np.random.Generator,
    ) -> None:
        """Promote or demote robots ``ids`` whose episodes ended at ``end_xy`` (n, 2), ``fell`` (n,)
        telling which fell (module docstring)."""
        if ids.size == 0:
            return
        distance = np.linalg.norm(end_xy - self.start_xy[ids], axis=1)
        commanded = np.linalg.norm(self.commanded_xy[ids], axis=1)
        elapsed = np.maximum(self.elapsed_s[ids], 1e-9)
        commanded = np.where(fell, commanded / elapsed * episode_s, commanded)
        self.levels[ids] = next_levels(
            self.levels[ids], distance, commanded, self.tile_size_m, self.num_levels, rng
        )

    @property
    def mean_level(self) -> float:
        """Mean level over the robots (Isaac Lab logs it as the curriculum's progress)."""
        return float(self.levels.mean())

    def mean_levels_by_kind(self, kinds: Sequence[str]) -> dict[str, float]:
        """Mean level of the robots on each tile kind, ``kinds`` naming every column's kind
        (``terrain.column_kinds``), in the order the kinds first appear: a mean level hides a kind
        stuck at the bottom (blind stairs up) behind kinds at the top."""
        if len(kinds) <= int(self.cols.max(initial=0)):
            raise ValueError(f"{len(kinds)} column kinds for columns 0 … {int(self.cols.max())}")
        of_robot = np.asarray(kinds)[self.cols]
        return {
            k: float(self.levels[of_robot == k].mean()) for k in dict.fromkeys(kinds) if (of_robot == k).any()
        }

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Copies of :data:`STATE`."""
        return {f: torch.from_numpy(np.array(getattr(self, f), copy=True)) for f in self.STATE}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (every array checked before any is written); ``ValueError``
        names what does not fit. A state saved before the commanded displacement (its path length
        ``commanded_m`` instead) restarts the sums of the episodes in flight at zero (a constant
        heading offset rotates the commanded displacement without changing its length)."""
        if "commanded_m" in state and "commanded_xy" not in state:
            state = {k: v for k, v in state.items() if k != "commanded_m"}
            state |= {"commanded_xy": torch.zeros(self.commanded_xy.shape, dtype=torch.float64)}
            state |= {"heading_rad": torch.zeros(self.heading_rad.shape, dtype=torch.float64)}
        pairs = []
        for f in self.STATE:
            arr, value = getattr(self, f), state.get(f)
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != arr.shape:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"terrain curriculum state '{f}' is {got}, this one holds {arr.shape}")
            pairs.append((arr, value.numpy()))
        for arr, value in pairs:
            arr[...] = value
