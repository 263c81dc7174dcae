"""Renderer and result plots: GIF frames and colours, scene still, learning curve and metric bars."""

from __future__ import annotations

import dataclasses
import math

import imageio.v3 as iio
import numpy as np
import pytest
from matplotlib.colors import to_rgb
from PIL import Image

from scenefactory.evaluation.plots import plot_learning_curve, plot_metric_bars, rolling_nanmean
from scenefactory.evaluation.record import EpisodeRecord
from scenefactory.evaluation.render import (
    STATUS_COLORS,
    render_episodes_gif,
    render_frames,
    render_scene_png,
)
from scenefactory.scenes.roadgraph import RoadEdgeType, RoadGraph, RoadLineType
from scenefactory.scenes.scene import Scene, make_scene
from scenefactory.tasks.driving.status import AgentStatus

LANE_W = 3.7
T = 12
COLLIDE_AT = 8


def _straight(y: float, x0: float, x1: float, n: int = 13) -> np.ndarray:
    return np.stack([np.linspace(x0, x1, n), np.full(n, y)], axis=1)


def _scene() -> Scene:
    """A 60 m two-lane road (one lane each way) with 2 agents driving towards each other."""
    rg = RoadGraph.from_lists(
        lanes=[_straight(-LANE_W / 2, 0.0, 60.0), _straight(LANE_W / 2, 60.0, 0.0)],
        lane_widths_m=[LANE_W, LANE_W],
        lane_entries=[[], []],
        lane_exits=[[], []],
        lines=[_straight(0.0, 0.0, 60.0)],
        line_types=[RoadLineType.SOLID_DOUBLE_YELLOW],
        edges=[_straight(-LANE_W, 0.0, 60.0), _straight(LANE_W, 0.0, 60.0)],
        edge_types=[RoadEdgeType.BOUNDARY, RoadEdgeType.BOUNDARY],
    )
    routes = [_straight(-LANE_W / 2, 5.0, 60.0), _straight(LANE_W / 2, 55.0, 0.0)]
    return make_scene(
        name="straight_60m",
        roadgraph=rg,
        spawn_pose=[np.array([5.0, -LANE_W / 2, 0.0]), np.array([55.0, LANE_W / 2, math.pi])],
        spawn_speed_mps=[8.0, 8.0],
        routes=routes,
        goal_xy=[np.array([45.0, -LANE_W / 2]), np.array([15.0, LANE_W / 2])],
        goal_s_m=[40.0, 40.0],
        length_m=[4.5, 4.5],
        width_m=[1.9, 1.9],
    )


def _episode(scene: Scene, steps: int = T, title: str = "") -> EpisodeRecord:
    k = scene.max_agents
    t = np.arange(steps, dtype=np.float64)[:, None]
    pos = np.zeros((steps, k, 2))
    pos[:, 0, 0] = 5.0 + 2.0 * t[:, 0]
    pos[:, 0, 1] = -LANE_W / 2
    pos[:, 1, 0] = 55.0 - 2.0 * np.minimum(t[:, 0], COLLIDE_AT)
    pos[:, 1, 1] = LANE_W / 2
    yaw = np.zeros((steps, k))
    yaw[:, 1] = math.pi - 0.05 * t[:, 0]  # turning slowly
    status = np.full((steps, k), int(AgentStatus.ACTIVE))
    status[COLLIDE_AT:, 1] = int(AgentStatus.COLLISION)
    if k > 2:  # padding slots: garbage that must never be drawn
        pos[:, 2:] = (30.0, 0.0)
        status[:, 2:] = int(AgentStatus.OFFROAD)
    return EpisodeRecord(scene, pos, yaw, np.full((steps, k), 8.0), status, dt_s=0.1, title=title)


def _near(frame: np.ndarray, color: str, tol: float = 40.0) -> int:
    rgb = np.asarray(to_rgb(color)) * 255.0
    return int((np.linalg.norm(frame[..., :3].astype(np.float64) - rgb, axis=-1) < tol).sum())


def test_gif_frames_size_and_status_colours(tmp_path):
    path = render_episodes_gif([_episode(_scene(), title="two cars")], tmp_path / "out" / "ep.gif", fps=10)
    assert path.exists()
    assert sorted(p.name for p in path.parent.iterdir()) == ["ep.gif"]  # no temp file left behind
    frames = iio.imread(path, index=None, mode="RGB")
    assert frames.shape[0] == T
    h, w = frames.shape[1:3]
    assert 300 <= h < w <= 1400  # a wide road in one panel
    with Image.open(path) as im:
        assert im.info.get("loop") == 0  # loops forever
        assert im.size == (w, h)
    red = STATUS_COLORS[AgentStatus.COLLISION]
    blue = STATUS_COLORS[AgentStatus.ACTIVE]
    before, after = frames[COLLIDE_AT - 2], frames[COLLIDE_AT + 2]
    # The collided car (>= ~20 x 8 px at this scale) turns from blue to red; the legend stays constant.
    assert _near(after, red) - _near(before, red) > 80
    assert _near(before, blue) - _near(after, blue) > 80
    for i in range(COLLIDE_AT):
        assert _near(frames[i], red) == _near(frames[0], red)


def test_frames_match_between_gif_and_renderer():
    frames = list(render_frames([_episode(_scene())]))
    assert len(frames) == T
    assert all(f.shape == frames[0].shape and f.dtype == np.uint8 for f in frames)
    assert not np.array_equal(frames[0], frames[-1])
    zoomed = list(render_frames([_episode(_scene())], crop="agents", frame_stride=6))
    assert len(zoomed) == 3


def test_invalid_agents_are_not_drawn():
    scene = _scene()
    padded = dataclasses.replace(
        scene,
        spawn_pose=np.concatenate([scene.spawn_pose, [[30.0, 0.0, 0.0]]]),
        spawn_speed_mps=np.append(scene.spawn_speed_mps, 0.0),
        route_xy=np.concatenate([scene.route_xy, scene.route_xy[:1]]),
        route_valid=np.concatenate([scene.route_valid, scene.route_valid[:1]]),
        goal_xy=np.concatenate([scene.goal_xy, [[30.0, 0.0]]]),
        goal_s_m=np.append(scene.goal_s_m, 10.0),
        length_m=np.append(scene.length_m, 4.5),
        width_m=np.append(scene.width_m, 1.9),
        agent_valid=np.array([True, True, False]),
    )
    plain = list(render_frames([_episode(scene)], frame_stride=5))
    with_pad = list(render_frames([_episode(padded)], frame_stride=5))
    assert len(plain) == len(with_pad) == 4  # steps 0, 5, 10 and the last step 11
    for a, b in zip(plain, with_pad, strict=True):
        assert np.array_equal(a, b)


def test_panels_advance_together_and_hold_last_frame(tmp_path):
    scene = _scene()
    eps = [_episode(scene, T, "long"), _episode(scene, 5, "short"), _episode(scene, 7), _episode(scene, 3)]
    path = render_episodes_gif(eps + eps, tmp_path / "grid.gif", max_panels=4, frame_stride=2)
    frames = iio.imread(path, index=None, mode="RGB")
    assert frames.shape[0] == 7  # steps 0, 2, 4, 6, 8, 10 and the last step 11
    h, w = frames.shape[1:3]
    short_panel = frames[:, int(0.12 * h) : int(0.45 * h), int(0.55 * w) : int(0.95 * w)]  # top right
    long_panel = frames[:, int(0.12 * h) : int(0.45 * h), int(0.05 * w) : int(0.45 * w)]  # top left
    assert not np.array_equal(short_panel[0], short_panel[2])
    for i in range(3, 7):  # the 5-step episode ended at step 4 (frame 2) and holds its last frame
        assert np.array_equal(short_panel[i], short_panel[2])
        assert not np.array_equal(long_panel[i], long_panel[i - 1])
    one = iio.imread(
        render_episodes_gif(eps[:1], tmp_path / "one.gif", frame_stride=4), index=None, mode="RGB"
    )
    assert frames.shape[2] > one.shape[2]  # 2x2 grid is wider than a single panel
    assert frames.shape[1] > one.shape[1]


def test_bad_episode_shapes_are_rejected(tmp_path):
    ep = _episode(_scene())
    bad = dataclasses.replace(ep, yaw=ep.yaw[:, :1])
    with pytest.raises(ValueError, match="yaw"):
        render_episodes_gif([bad], tmp_path / "bad.gif")
    with pytest.raises(ValueError, match="no episodes"):
        render_episodes_gif([], tmp_path / "none.gif")
    with pytest.raises(ValueError, match="max_panels"):
        render_episodes_gif([ep], tmp_path / "zero.gif", max_panels=0)
    assert not any(tmp_path.iterdir())


def test_scene_png_still(tmp_path):
    path = render_scene_png(_scene(), tmp_path / "scene.png")
    with Image.open(path) as im:
        im.load()
        w, h = im.size
        rgb = np.asarray(im.convert("RGB"))
    assert w > h > 200
    assert _near(rgb, STATUS_COLORS[AgentStatus.ACTIVE]) > 200  # both cars, blue at spawn
    assert _near(rgb, STATUS_COLORS[AgentStatus.COLLISION]) < _near(rgb, STATUS_COLORS[AgentStatus.ACTIVE])


def _history(n: int = 40) -> list[dict[str, float]]:
    rows = []
    for i in range(n):
        goal = min(1.0, i / n + 0.1)
        rows.append(
            {
                "iteration": i,
                "env_steps": (i + 1) * 24_576,
                "mean_reward": -5.0 + 0.3 * i + math.sin(i),
                "goal_reach_rate": goal if i % 7 else float("nan"),
                "collision_rate": (1.0 - goal) * 0.5 if i % 7 else float("nan"),
                "offroad_rate": (1.0 - goal) * 0.3 if i % 7 else float("nan"),
                "timeout_rate": (1.0 - goal) * 0.2 if i % 7 else float("nan"),
            }
        )
    return rows


def test_learning_curve_png_tolerates_nan(tmp_path):
    path = plot_learning_curve(_history(), tmp_path / "plots" / "curve.png", title="PPO on straight_60m")
    with Image.open(path) as im:
        im.load()
        assert im.size[0] > 400 and im.size[1] > 300
    assert sorted(p.name for p in path.parent.iterdir()) == ["curve.png"]
    # all-NaN rates (no episode finished yet), rates missing entirely, and an empty history
    rows = [
        {"iteration": i, "env_steps": i * 100, "mean_reward": float("nan"), "goal_reach_rate": float("nan")}
        for i in range(3)
    ]
    plot_learning_curve(rows, tmp_path / "nan.png")
    plot_learning_curve([{"iteration": 0, "env_steps": 10, "mean_reward": 1.0}], tmp_path / "one.png")
    plot_learning_curve([], tmp_path / "empty.png")
    for name in ("nan.png", "one.png", "empty.png"):
        with Image.open(tmp_path / name) as im:
            im.load()


def test_metric_bars_png(tmp_path):
    metrics = {
        "goal_reach_rate": 0.72,
        "collision_rate": 0.11,
        "offroad_rate": float("nan"),
        "timeout_rate": 0.17,
    }
    ci = {"goal_reach_rate": (0.65, 0.78), "collision_rate": (0.07, 0.16), "timeout_rate": (0.12, 0.23)}
    path = plot_metric_bars(metrics, ci, tmp_path / "bars.png", title="evaluation, 200 episodes")
    with Image.open(path) as im:
        im.load()
        assert im.size[0] > 300


def test_rolling_nanmean():
    x = np.array([1.0, np.nan, 3.0, np.nan, np.nan, np.nan, 5.0])
    out = rolling_nanmean(x, 2)
    np.testing.assert_allclose(out[:3], [1.0, 1.0, 3.0])
    assert math.isnan(out[4]) and math.isnan(out[5])
    assert out[6] == 5.0
    np.testing.assert_array_equal(rolling_nanmean(x, 1), x)
