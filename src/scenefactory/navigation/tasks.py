"""Navigation tasks, defined once and run on the abstract engine and on the Go1.

A task (:class:`NavTask`) is a start pose, a goal, walls and obstacles as axis-aligned boxes
(centre x, y and half-sizes [m]; on the Go1 they are MuJoCo box geoms :data:`WALL_HEIGHT_M` tall)
and a route: a polyline from the start to the goal through the free space, which the navigation
policy follows (the task's corridor centreline, like a lane in driving; no planner runs). The
robot is a disc of :data:`ROBOT_RADIUS_M` (the Go1's footprint with its legs).

Terms, pure functions of batched tensors (E episodes; :class:`TaskBatch` holds the tasks' geometry,
boxes padded to a common count with a ``valid`` mask): the distance to the nearest box, a
collision (that distance below the robot's radius), the distance to the goal, reaching it (within
``goal_radius_m``), and the projection on the route (arc length covered). An episode ends on
reaching the goal (success, its time the time to goal), on a collision, or at the time limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from scenefactory.errors import UserError

ROBOT_RADIUS_M = 0.3
"""The robot's footprint radius for collisions (trunk 0.38 m long, feet ±0.13 m to the side)."""
WALL_HEIGHT_M = 0.5

Box = tuple[float, float, float, float]
"""An axis-aligned box: centre x, y and half-sizes x, y [m]."""


@dataclass(frozen=True)
class NavTask:
    """One navigation task (module docstring)."""

    name: str
    boxes: tuple[Box, ...]
    goal_xy: tuple[float, float]
    route: tuple[tuple[float, float], ...]
    """Polyline from the start (its first point, the robot's start position) to the goal."""
    start_yaw_rad: float
    time_limit_s: float
    goal_radius_m: float = 0.4

    def __post_init__(self) -> None:
        """The route must start at the origin (where the Go1 resets) and end at the goal."""
        if len(self.route) < 2 or self.route[0] != (0.0, 0.0):
            raise UserError(f"task {self.name}: the route must start at (0, 0), got {self.route[:1]}")
        if math.dist(self.route[-1], self.goal_xy) > 1e-9:
            raise UserError(f"task {self.name}: the route must end at the goal {self.goal_xy}")
        if self.time_limit_s <= 0.0 or self.goal_radius_m <= 0.0:
            raise UserError(f"task {self.name}: time limit and goal radius must be positive")
        if any(b[2] <= 0.0 or b[3] <= 0.0 for b in self.boxes):
            raise UserError(f"task {self.name}: box half-sizes must be positive")

    @property
    def route_length_m(self) -> float:
        """Length of the route [m]."""
        return sum(math.dist(a, b) for a, b in zip(self.route[:-1], self.route[1:], strict=True))


def _walls(x0: float, x1: float, y0: float, y1: float, t: float = 0.1) -> tuple[Box, ...]:
    """The four walls (half-thickness ``t``) around the interior [x0, x1] × [y0, y1]."""
    cx, cy, hx, hy = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2 + 2 * t, (y1 - y0) / 2
    return ((cx, y0 - t, hx, t), (cx, y1 + t, hx, t), (x0 - t, cy, t, hy), (x1 + t, cy, t, hy))


def _span(x0: float, x1: float, y0: float, y1: float) -> Box:
    """The box covering [x0, x1] × [y0, y1]."""
    return ((x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2)


OPEN = NavTask(
    name="open",
    boxes=(),
    goal_xy=(4.0, 2.0),
    route=((0.0, 0.0), (4.0, 2.0)),
    start_yaw_rad=0.0,
    time_limit_s=10.0,
)
U_MAZE = NavTask(  # corridors 1.0 m wide; out along y = 0, back along y = 1.2
    name="u_maze",
    boxes=(*_walls(-0.5, 3.4, -0.5, 1.7), _span(-0.5, 2.4, 0.5, 0.7)),
    goal_xy=(0.0, 1.2),
    route=((0.0, 0.0), (2.9, 0.0), (2.9, 1.2), (0.0, 1.2)),
    start_yaw_rad=0.0,
    time_limit_s=20.0,
)
MAZE = NavTask(  # a serpentine of three 1.0 m corridors and two U-turns
    name="maze",
    boxes=(
        *_walls(-0.5, 5.6, -0.5, 3.5),
        _span(-0.5, 4.6, 0.5, 1.0),
        _span(0.5, 5.6, 2.0, 2.5),
    ),
    goal_xy=(4.6, 3.0),
    route=((0.0, 0.0), (5.1, 0.0), (5.1, 1.5), (0.0, 1.5), (0.0, 3.0), (4.6, 3.0)),
    start_yaw_rad=0.0,
    time_limit_s=30.0,
)
ROOM = NavTask(  # a 6.7 × 5 m room with six pillars between the start and the goal
    name="room",
    boxes=(
        *_walls(-0.7, 6.0, -2.5, 2.5),
        _span(1.2, 1.7, -0.3, 0.6),
        _span(2.0, 2.5, -2.5, -1.2),
        _span(2.4, 2.9, 1.3, 1.8),
        _span(3.3, 3.8, -0.9, 0.3),
        _span(4.3, 4.8, 1.0, 2.5),
        _span(4.6, 5.1, -1.7, -1.1),
    ),
    goal_xy=(5.4, 0.0),
    route=((0.0, 0.0), (0.9, -0.9), (2.6, -0.8), (2.9, 0.75), (4.0, 0.75), (5.4, 0.0)),
    start_yaw_rad=0.0,
    time_limit_s=15.0,
)
TASKS: dict[str, NavTask] = {t.name: t for t in (OPEN, U_MAZE, MAZE, ROOM)}
"""Task name → task."""


@dataclass(frozen=True)
class TaskBatch:
    """The geometry of E episodes' tasks as padded tensors.

    ``boxes`` (E, K, 4) and ``box_valid`` (E, K); ``goal`` (E, 2); ``route`` (E, M, 2) padded by
    repeating the goal; ``start_yaw`` (E,); ``goal_radius`` (E,); ``time_limit_s`` (E,);
    ``task_index`` (E,) into ``names``."""

    boxes: torch.Tensor
    box_valid: torch.Tensor
    goal: torch.Tensor
    route: torch.Tensor
    start_yaw: torch.Tensor
    goal_radius: torch.Tensor
    time_limit_s: torch.Tensor
    task_index: torch.Tensor
    names: tuple[str, ...]

    @classmethod
    def of(cls, tasks: Sequence[NavTask], episodes: int) -> TaskBatch:
        """``episodes`` episodes of each task, task by task (E = len(tasks) · episodes)."""
        if not tasks or episodes < 1:
            raise UserError(f"need at least one task and one episode, got {len(tasks)} and {episodes}")
        k = max(1, max(len(t.boxes) for t in tasks))
        m = max(len(t.route) for t in tasks)
        boxes = torch.zeros(len(tasks), k, 4)
        valid = torch.zeros(len(tasks), k, dtype=torch.bool)
        route = torch.zeros(len(tasks), m, 2)
        for i, t in enumerate(tasks):
            if t.boxes:
                boxes[i, : len(t.boxes)] = torch.tensor(t.boxes)
                valid[i, : len(t.boxes)] = True
            pts = list(t.route) + [t.route[-1]] * (m - len(t.route))
            route[i] = torch.tensor(pts)

        def rep(x: torch.Tensor) -> torch.Tensor:
            return x.repeat_interleave(episodes, dim=0)

        return cls(
            boxes=rep(boxes),
            box_valid=rep(valid),
            goal=rep(torch.tensor([t.goal_xy for t in tasks])),
            route=rep(route),
            start_yaw=rep(torch.tensor([t.start_yaw_rad for t in tasks])),
            goal_radius=rep(torch.tensor([t.goal_radius_m for t in tasks])),
            time_limit_s=rep(torch.tensor([t.time_limit_s for t in tasks])),
            task_index=rep(torch.arange(len(tasks))),
            names=tuple(t.name for t in tasks),
        )

    @property
    def size(self) -> int:
        """E."""
        return int(self.goal.shape[0])


def box_distance(pos: torch.Tensor, boxes: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(E,) distance [m] from ``pos`` (E, 2) to the nearest valid box of ``boxes`` (E, K, 4) (0 inside
    one; +inf with no box)."""
    outside = ((pos[:, None, :] - boxes[..., :2]).abs() - boxes[..., 2:]).clamp_min(0.0)
    d = outside.norm(dim=-1)
    return torch.where(valid, d, torch.full_like(d, math.inf)).min(dim=-1).values


def collided(pos: torch.Tensor, batch: TaskBatch) -> torch.Tensor:
    """(E,) bool: the robot's disc at ``pos`` (E, 2) touches a box."""
    return box_distance(pos, batch.boxes, batch.box_valid) < ROBOT_RADIUS_M


def goal_distance(pos: torch.Tensor, batch: TaskBatch) -> torch.Tensor:
    """(E,) distance [m] from ``pos`` (E, 2) to the goal."""
    return (pos - batch.goal).norm(dim=-1)


def reached(pos: torch.Tensor, batch: TaskBatch) -> torch.Tensor:
    """(E,) bool: within the goal radius."""
    return goal_distance(pos, batch) < batch.goal_radius


def route_geometry(route: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per segment of ``route`` (E, M, 2): start (E, M−1, 2), direction × length (E, M−1, 2), and the
    arc length at its start (E, M−1)."""
    a, seg = route[:, :-1], route[:, 1:] - route[:, :-1]
    length = seg.norm(dim=-1)
    start_s = torch.cumsum(length, dim=-1) - length
    return a, seg, start_s


def route_progress(pos: torch.Tensor, route: torch.Tensor) -> torch.Tensor:
    """(E,) arc length [m] of the closest point of ``route`` (E, M, 2) to ``pos`` (E, 2)."""
    a, seg, start_s = route_geometry(route)
    len2 = (seg * seg).sum(-1).clamp_min(1e-12)
    t = (((pos[:, None, :] - a) * seg).sum(-1) / len2).clamp(0.0, 1.0)
    closest = a + t[..., None] * seg
    d = (pos[:, None, :] - closest).norm(dim=-1)
    best = d.argmin(dim=-1, keepdim=True)
    s = start_s + t * len2.sqrt()
    return s.gather(1, best).squeeze(1)


def route_point(route: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """(E, 2) the point at arc length ``s`` (E,) along ``route`` (E, M, 2), clamped to its ends."""
    a, seg, start_s = route_geometry(route)
    length = seg.norm(dim=-1)
    total = length.sum(-1)
    s = torch.minimum(s.clamp_min(0.0), total)
    idx = ((start_s <= s[:, None]) & (length > 0)).long().cumsum(-1).argmax(-1, keepdim=True)
    t = ((s[:, None] - start_s.gather(1, idx)) / length.gather(1, idx).clamp_min(1e-12)).clamp(0.0, 1.0)
    return a.gather(1, idx[..., None].expand(-1, 1, 2)).squeeze(1) + t * seg.gather(
        1, idx[..., None].expand(-1, 1, 2)
    ).squeeze(1)


def route_length(route: torch.Tensor) -> torch.Tensor:
    """(E,) total length [m] of ``route`` (E, M, 2)."""
    return (route[:, 1:] - route[:, :-1]).norm(dim=-1).sum(-1)


def route_clearance(task: NavTask, samples_per_m: int = 50) -> float:
    """The smallest distance [m] from the task's route to a box (checks a task is passable)."""
    if not task.boxes:
        return math.inf
    pts = []
    for a, b in zip(task.route[:-1], task.route[1:], strict=True):
        n = max(2, int(math.dist(a, b) * samples_per_m))
        t = torch.linspace(0.0, 1.0, n)[:, None]
        pts.append(torch.tensor(a) + t * (torch.tensor(b) - torch.tensor(a)))
    p = torch.cat(pts)
    boxes = torch.tensor(task.boxes)[None].expand(len(p), -1, -1)
    valid = torch.ones(boxes.shape[:2], dtype=torch.bool)
    return float(box_distance(p, boxes, valid).min())
