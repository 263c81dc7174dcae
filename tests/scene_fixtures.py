"""Tiny hand-built scenes for tests (no generator needed)."""

from __future__ import annotations

import numpy as np

from scenefactory.scenes.roadgraph import RoadEdgeType, RoadGraph, RoadLineType
from scenefactory.scenes.scene import Scene, make_scene


def two_lane_road(length_m: float = 120.0) -> RoadGraph:
    """Two 3.5 m lanes along +x (y = 0 eastbound, y = 3.5 westbound), edges and a centre line."""
    xs = np.arange(0.0, length_m + 1e-9, 2.0)
    east = np.stack([xs, np.zeros_like(xs)], axis=1)
    west = np.stack([xs[::-1], np.full_like(xs, 3.5)], axis=1)
    return RoadGraph.from_lists(
        lanes=[east, west],
        lane_widths_m=[3.5, 3.5],
        lane_entries=[[], []],
        lane_exits=[[], []],
        lines=[np.stack([xs, np.full_like(xs, 1.75)], axis=1)],
        line_types=[int(RoadLineType.SOLID_DOUBLE_YELLOW)],
        edges=[
            np.stack([xs, np.full_like(xs, -1.75)], axis=1),
            np.stack([xs, np.full_like(xs, 5.25)], axis=1),
        ],
        edge_types=[int(RoadEdgeType.BOUNDARY)] * 2,
    )


def straight_scene(spawns: list[tuple[float, float, float, float]], goal_s: float = 20.0) -> Scene:
    """Agents at ``(x, y, yaw, speed)``; each route runs straight along its heading, goal at ``goal_s``."""
    routes, goals = [], []
    for x, y, yaw, _ in spawns:
        s = np.arange(0.0, goal_s + 20.0, 1.0)
        route = np.stack([x + s * np.cos(yaw), y + s * np.sin(yaw)], axis=1)
        routes.append(route)
        goals.append(route[int(goal_s)])
    return make_scene(
        name="two-lane",
        roadgraph=two_lane_road(),
        spawn_pose=[np.array(p[:3]) for p in spawns],
        spawn_speed_mps=[p[3] for p in spawns],
        routes=routes,
        goal_xy=goals,
        goal_s_m=[goal_s] * len(spawns),
        length_m=[4.5] * len(spawns),
        width_m=[1.9] * len(spawns),
        friction=0.8,
    )
