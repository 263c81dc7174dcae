"""Go1 rough terrain: the tile generator (shapes and heights per kind and level, seeding), the
height field in MuJoCo (it compiles, its surface is the one the scan reads, a robot stands on a
tile), the level curriculum, the height scan, the config round trip, and the flat default that
older policies rely on."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from scenefactory.checkpoint import load_checkpoint
from scenefactory.cli.go1 import TILE_KINDS
from scenefactory.errors import CheckpointError, UserError
from scenefactory.go1 import evaluation as ev
from scenefactory.go1 import robot as go1
from scenefactory.go1 import terrain as tr
from scenefactory.go1.config import (
    TERRAIN_KINDS,
    Go1TaskConfig,
    TerrainConfig,
    nominal,
    task_config_from_dict,
    task_config_to_dict,
)
from scenefactory.go1.curriculum import TerrainCurriculum, initial_columns, next_levels
from scenefactory.go1.env import Go1Env
from scenefactory.go1.jobs import SHIPPED_POLICY, Go1ExportArgs, export, terrain_progress
from scenefactory.go1.observations import CRITIC_DIM, FRAME_DIM
from scenefactory.go1.rewards import TRACKING_SIGMA
from scenefactory.go1.terrain_eval import (
    TerrainEvalConfig,
    Walk,
    cell_row,
    swings,
    terrain_report,
    terrain_table,
)
from scenefactory.go1.train import (
    Go1Trainer,
    Go1TrainSpec,
    Go1VecEnv,
    actor_obs_dim,
    carry_terrain_levels,
    go1_ppo_config,
    load_go1_policy,
)

SMALL = TerrainConfig(
    kind="rough",
    num_levels=3,
    num_cols=6,
    tile_size_m=4.0,
    border_m=1.0,
    platform_m=1.0,
    edge_m=0.5,
    proportions=tuple((k, 1.0) for k in TERRAIN_KINDS),
)
"""Three levels of 4 m tiles, one column per kind: small enough to build in a few ms."""


def axis_profile(cfg: TerrainConfig, kind: str, level: int) -> tuple[np.ndarray, np.ndarray]:
    """(u, h) the tile's heights along its +x half-axis (the row through the centre)."""
    h = tr.tile_heights(cfg, kind, level, np.random.default_rng(0))
    m = h.shape[0]
    u = (np.arange(m) + 0.5) * cfg.horizontal_scale_m - cfg.tile_size_m / 2
    row = h[m // 2]
    return u[m // 2 :], row[m // 2 :]


@pytest.mark.parametrize("level", [0, 2])
@pytest.mark.parametrize("kind", ["slope_up", "slope_down"])
def test_slopes_rise_at_the_level_angle_and_meet_the_neighbours_at_zero(kind: str, level: int) -> None:
    angle = tr.level_value(SMALL.slope_deg, level, SMALL.num_levels)
    u, h = axis_profile(SMALL, kind, level)
    face = (u > SMALL.platform_m / 2 + 0.05) & (u < SMALL.tile_size_m / 2 - SMALL.edge_m - 0.05)
    slope = np.polyfit(u[face], h[face], 1)[0]
    sign = -1.0 if kind == "slope_down" else 1.0  # up: the ground rises walking out from the centre
    assert slope == pytest.approx(sign * math.tan(math.radians(angle)), rel=1e-9)
    assert h[-1] == 0.0  # the flat edge of every tile is at 0
    rise = math.tan(math.radians(angle)) * (SMALL.tile_size_m / 2 - SMALL.edge_m - SMALL.platform_m / 2)
    assert abs(h[0]) == pytest.approx(rise)


@pytest.mark.parametrize("kind", ["stairs_up", "stairs_down"])
def test_stairs_have_the_level_step_height_and_tread(kind: str) -> None:
    for level in range(SMALL.num_levels):
        step = tr.level_value(SMALL.step_height_m, level, SMALL.num_levels)
        _, h = axis_profile(SMALL, kind, level)
        rises = np.diff(h)[np.abs(np.diff(h)) > 1e-9]
        want = step if kind == "stairs_up" else -step
        np.testing.assert_allclose(rises, want)  # every riser is one step high, the right way
        n_steps = math.floor(
            (SMALL.tile_size_m / 2 - SMALL.edge_m - SMALL.platform_m / 2) / SMALL.step_width_m
        )
        assert len(rises) == n_steps
        treads = np.diff(np.nonzero(np.abs(np.diff(h)) > 1e-9)[0]) * SMALL.horizontal_scale_m
        np.testing.assert_allclose(treads, SMALL.step_width_m)
        assert h[-1] == 0.0 and abs(h[0]) == pytest.approx(n_steps * step)


def test_step_heights_match_the_issue_targets_at_default_levels() -> None:
    cfg = TerrainConfig()
    assert tr.level_parameter(cfg, "stairs_up", 3) == ("step_height_m", pytest.approx(0.10))
    assert tr.level_parameter(cfg, "stairs_down", 5) == ("step_height_m", pytest.approx(0.15))
    assert tr.level_parameter(cfg, "slope_up", 7) == ("slope_deg", pytest.approx(20.0))
    assert tr.level_parameter(cfg, "random", 4) == ("amplitude_m", pytest.approx(0.05))


def test_random_ground_and_blocks_stay_within_their_level_amplitude() -> None:
    for level in range(SMALL.num_levels):
        amp = tr.level_value(SMALL.rough_amplitude_m, level, SMALL.num_levels)
        h = tr.tile_heights(SMALL, "random", level, np.random.default_rng(level))
        assert np.abs(h).max() <= amp + 1e-12 and np.abs(h).max() > 0.7 * amp
        block = tr.level_value(SMALL.block_height_m, level, SMALL.num_levels)
        h = tr.tile_heights(SMALL, "steps", level, np.random.default_rng(level))
        assert np.abs(h).max() <= block + 1e-12 and len(np.unique(h)) > 10
        _, _, r = tr._tile_coords(SMALL)
        assert (h[r < SMALL.platform_m / 2] == 0).all()  # a flat platform to start on
        assert (h[r > SMALL.tile_size_m / 2 - SMALL.edge_m] == 0).all()


def test_generation_is_seeded_and_lays_out_levels_and_kinds() -> None:
    a, b = tr.generate(SMALL), tr.generate(SMALL)
    np.testing.assert_array_equal(a.heights_m, b.heights_m)
    c = tr.generate(replace(SMALL, seed=1))
    assert not np.array_equal(a.heights_m, c.heights_m)
    tiles = SMALL.tile_size_m / SMALL.horizontal_scale_m
    border = SMALL.border_m / SMALL.horizontal_scale_m
    assert a.heights_m.shape == (SMALL.num_cols * tiles + 2 * border, SMALL.num_levels * tiles + 2 * border)
    assert a.kinds == TERRAIN_KINDS  # equal shares of the six kinds over six columns
    lv, col = a.tile_of(a.origins_m[..., :2])
    np.testing.assert_array_equal(lv, np.arange(SMALL.num_levels)[:, None].repeat(SMALL.num_cols, 1))
    np.testing.assert_array_equal(col, np.arange(SMALL.num_cols)[None].repeat(SMALL.num_levels, 0))
    stairs_down = a.kinds.index("stairs_down")
    step = tr.level_value(SMALL.step_height_m, 2, SMALL.num_levels)
    assert a.origins_m[2, stairs_down, 2] == pytest.approx(3 * step)  # the top platform of the pyramid


def test_columns_follow_the_proportions_as_isaac_lab() -> None:
    cfg = TerrainConfig(kind="rough", num_cols=10)
    assert tr.column_kinds(cfg) == (
        "random", "random", "slope_up", "slope_down", "stairs_up", "stairs_up",
        "stairs_down", "stairs_down", "steps", "steps",
    )  # fmt: skip
    assert tr.column_kinds(replace(cfg, kind="stairs_up")) == ("stairs_up",) * 10


@pytest.fixture(scope="module")
def small_terrain() -> tr.Terrain:
    return tr.generate(SMALL)


def test_the_height_field_compiles_and_is_the_surface_the_scan_reads(small_terrain: tr.Terrain) -> None:
    model = tr.go1_model(0.005, small_terrain)
    assert model.geom("floor").type == mujoco.mjtGeom.mjGEOM_HFIELD
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    rng = np.random.default_rng(0)
    sx, sy = small_terrain.size_m
    points = rng.uniform([0.5, 0.5], [sx - 0.5, sy - 0.5], (300, 2))
    geom = np.zeros(1, np.int32)
    floor = model.geom("floor").id
    for p in points:
        dist = mujoco.mj_ray(
            model, data, np.array([p[0], p[1], 10.0]), np.array([0, 0, -1.0]), None, 1, -1, geom
        )
        assert geom[0] == floor
        assert 10.0 - dist == pytest.approx(float(small_terrain.height_at(p)), abs=1e-5)


def terrain_task(n: int = 6, **kw: object) -> Go1TaskConfig:
    return nominal(replace(Go1TaskConfig(num_envs=n), terrain=replace(SMALL, **kw)))  # type: ignore[arg-type]


def test_a_robot_stands_on_its_tile_at_the_right_height() -> None:
    """Robots start at their tile's origin and, holding the home pose, stand on the height field as
    on the flat floor: trunk about 0.24 m above the ground under it (see robot.DEFAULT_KP)."""
    env = Go1Env(terrain_task(6), seed=0)
    assert env.terrain is not None and env.curriculum is not None
    np.testing.assert_array_equal(env.curriculum.cols, np.arange(6))  # one robot on each kind
    env.curriculum.levels[:] = [0, 2, 2, 2, 2, 2]  # the top level but for random ground (±10 cm)
    env.reset(np.arange(6))
    origins = env.terrain.origins_m[env.curriculum.levels, env.curriculum.cols]
    qpos = env.sim.bind("qpos")
    np.testing.assert_allclose(qpos[:, 0:2], origins[:, :2])
    for _ in range(50):
        res = env.step(torch.zeros(6, 12))
        assert not res.terminated.any()
    height = res.state.height_m.numpy()
    np.testing.assert_allclose(height, 0.24, atol=0.03)
    np.testing.assert_allclose(qpos[:, 2] - origins[:, 2], height, atol=0.03)


def test_curriculum_promotes_demotes_and_recycles_the_top() -> None:
    rng = np.random.default_rng(0)
    levels = np.array([0, 3, 3, 3, 9, 0])
    dist = np.array([5.0, 4.1, 1.0, 3.0, 4.5, 0.0])
    commanded = np.array([10.0, 10.0, 4.0, 4.0, 1.0, 4.0])
    new = next_levels(levels, dist, commanded, tile_size_m=8.0, num_levels=10, rng=rng)
    assert new[0] == 1  # walked more than half a tile (4 m): promoted
    assert new[1] == 4  # promotion wins over "less than half of what it was asked"
    assert new[2] == 2  # 1 m of 4 commanded: demoted
    assert new[3] == 3  # 3 m of 4: stays
    assert 0 <= new[4] < 10  # promoted beyond the top: a random level
    assert new[5] == 0  # never below 0
    tops = next_levels(np.full(2000, 9), np.full(2000, 5.0), np.zeros(2000), 8.0, 10, rng)
    assert set(np.unique(tops)) == set(range(10))


def test_levels_by_kind_average_each_kinds_columns() -> None:
    cur = TerrainCurriculum(
        6, num_levels=5, num_cols=3, max_init_level=0, tile_size_m=8.0, rng=np.random.default_rng(0)
    )
    np.testing.assert_array_equal(cur.cols, [0, 0, 1, 1, 2, 2])
    cur.levels[:] = [0, 1, 4, 2, 3, 3]
    by_kind = cur.mean_levels_by_kind(("stairs_up", "random", "stairs_up"))
    assert list(by_kind) == ["stairs_up", "random"]
    assert by_kind == {"stairs_up": pytest.approx(1.75), "random": pytest.approx(3.0)}
    with pytest.raises(ValueError, match="2 column kinds for columns 0 … 2"):
        cur.mean_levels_by_kind(("random", "steps"))


def test_curriculum_reads_the_commanded_distance_of_the_episode() -> None:
    rng = np.random.default_rng(0)
    cur = TerrainCurriculum(4, num_levels=5, num_cols=2, max_init_level=2, tile_size_m=8.0, rng=rng)
    np.testing.assert_array_equal(initial_columns(4, 2), [0, 0, 1, 1])
    assert set(cur.levels) <= {0, 1, 2}
    cur.levels[:] = 2
    ids = np.arange(4)
    cur.begin(ids, np.zeros((4, 2)), np.zeros(4))
    for _ in range(100):  # 2 s at 1 m/s: 2 m commanded so far
        cur.advance(np.array([[1.0, 0.0, 0.0]] * 4), 0.02)
    end = np.array([[1.5, 0.0], [0.9, 0.0], [1.5, 0.0], [4.5, 0.0]])
    fell = np.array([False, False, True, False])
    cur.end(ids, end, fell, episode_s=20.0, rng=rng)
    # 1.5 of 2 m: stays; 0.9 of 2: demoted; fell, so 20 m asked and 1.5 done: demoted; 4.5 m: promoted
    np.testing.assert_array_equal(cur.levels, [2, 1, 1, 3])


def test_a_robot_commanded_to_walk_a_circle_is_not_demoted_for_walking_it() -> None:
    """The commanded distance is where the commands lead, not the path length: 1 m/s at
    0.9 rad/s for 20 s is a circle of radius 1.11 m, 20 m long but ending 1.0 m from the start."""
    rng = np.random.default_rng(0)
    cur = TerrainCurriculum(3, num_levels=5, num_cols=1, max_init_level=0, tile_size_m=8.0, rng=rng)
    cur.levels[:] = 2
    ids = np.arange(3)
    cur.begin(ids, np.zeros((3, 2)), np.array([0.0, 2.0, -1.0]))  # headings do not matter
    cmd = np.array([[1.0, 0.0, 0.9], [0.0, 1.0, 0.9], [1.0, 0.0, 0.0]])  # circles forward, sideways; straight
    for _ in range(1000):
        cur.advance(cmd, 0.02)
    r = 1.0 / 0.9
    chord = 2 * r * abs(math.sin(0.9 * 20.0 / 2))  # the exact circle's end point
    np.testing.assert_allclose(np.linalg.norm(cur.commanded_xy, axis=1), [chord, chord, 20.0], rtol=1e-4)
    walked = np.array([[chord, 0.0], [0.0, chord], [3.0, 0.0]])  # on the circle; 3 of 20 m straight
    cur.end(ids, walked, np.zeros(3, dtype=bool), episode_s=20.0, rng=rng)
    np.testing.assert_array_equal(cur.levels, [2, 2, 1])


def test_a_curriculum_saved_with_path_lengths_loads() -> None:
    rng = np.random.default_rng(0)
    cur = TerrainCurriculum(2, num_levels=5, num_cols=1, max_init_level=3, tile_size_m=8.0, rng=rng)
    old = {k: v for k, v in cur.state_dict().items() if k not in ("commanded_xy", "heading_rad")}
    old["commanded_m"] = torch.ones(2)
    old["levels"] = torch.tensor([4, 1])
    cur.load_state_dict(old)
    np.testing.assert_array_equal(cur.levels, [4, 1])
    assert not cur.commanded_xy.any()
    with pytest.raises(ValueError, match="'commanded_xy'"):
        cur.load_state_dict({k: v for k, v in cur.state_dict().items() if k != "commanded_xy"})


def test_training_env_moves_robots_between_levels(tmp_path: Path) -> None:
    """A robot that falls is demoted when its episode ends and restarts at its new tile."""
    env = Go1Env(terrain_task(4, max_init_level=2), seed=0)
    assert env.curriculum is not None and env.terrain is not None
    env.curriculum.levels[:] = 2
    env.reset(np.arange(4))
    env.hold_commands(np.array([[1.0, 0.0, 0.0]] * 4))
    res = None
    for _ in range(200):  # random flailing falls
        res = env.step(torch.full((4, 12), 3.0) * torch.sign(torch.randn(4, 12)))
        if res.terminated.any():
            break
    assert res is not None and res.terminated.any()
    fell = np.nonzero(res.terminated.numpy())[0]
    np.testing.assert_array_equal(env.curriculum.levels[fell], 1)
    origins = env.terrain.origins_m[1, env.curriculum.cols[fell]]
    np.testing.assert_allclose(env.sim.bind("qpos")[fell, 0:2], origins[:, :2])


def test_height_scan_of_a_plane_rotates_with_yaw() -> None:
    points = tr.scan_points_b(TerrainConfig())
    assert points.shape == (187, 2)
    a, b, c = 0.3, -0.2, 0.05

    def plane(xy: np.ndarray) -> np.ndarray:
        return a * xy[..., 0] + b * xy[..., 1] + c

    pos = np.array([[1.0, 2.0, 1.0], [-3.0, 0.5, 0.2]])
    yaw = np.array([0.0, 2.0])
    scan = tr.height_scan(plane, pos, yaw, points, offset_m=0.28, clip_m=10.0)
    for i in range(2):
        cy, sy = math.cos(yaw[i]), math.sin(yaw[i])
        xw = pos[i, 0] + cy * points[:, 0] - sy * points[:, 1]
        yw = pos[i, 1] + sy * points[:, 0] + cy * points[:, 1]
        np.testing.assert_allclose(scan[i], pos[i, 2] - (a * xw + b * yw + c) - 0.28)
    clipped = tr.height_scan(plane, pos, yaw, points, offset_m=0.28, clip_m=0.1)
    assert np.abs(clipped).max() == pytest.approx(0.1)


def test_height_scan_on_a_slope_tile(small_terrain: tr.Terrain) -> None:
    """On a slope_up face the ground rises tan(angle) per metre outward: the scan of a base
    standing there, facing outward, falls by that much per metre ahead."""
    col = small_terrain.kinds.index("slope_up")
    angle = tr.level_value(SMALL.slope_deg, 2, SMALL.num_levels)
    centre = small_terrain.origins_m[2, col, :2]
    pos = np.array([[centre[0] + 1.25, centre[1], 0.0]])  # on the +x face, 0.75 m from its ends
    points = np.array([[-0.1, 0.0], [0.0, 0.0], [0.2, 0.0], [0.2, 0.1]])
    scan = tr.height_scan(small_terrain.height_at, pos, np.zeros(1), points, offset_m=0.0, clip_m=10.0)
    tan = math.tan(math.radians(angle))
    np.testing.assert_allclose(scan[0] - scan[0, 1], [0.1 * tan, 0.0, -0.2 * tan, -0.2 * tan], atol=1e-9)


def test_observations_carry_the_scan_for_the_critic_and_optionally_the_actor() -> None:
    blind = Go1Env(terrain_task(3), seed=0)
    actor, critic = blind.observations()
    assert actor.shape == (3, 3 * FRAME_DIM) and critic.shape == (3, CRITIC_DIM + 187)
    params = Go1VecEnv(blind).get_observations()["params"]
    assert params.shape == (3, 20)  # the randomized parameters only, not the scan after them
    seeing = Go1Env(terrain_task(3, height_scan_actor=True), seed=0)
    actor, critic = seeing.observations()
    assert actor.shape == (3, actor_obs_dim(seeing.cfg)) == (3, 3 * FRAME_DIM + 187)
    torch.testing.assert_close(actor[:, -187:], critic[:, -187:])  # nominal task: no scan noise
    assert float(critic[:, -187:].abs().max()) < 0.2  # standing on the start platforms
    ids = np.array([2, 0])
    np.testing.assert_array_equal(seeing.height_scan(ids), seeing.height_scan()[ids])
    # a step computes the scan once for both; robot 1 times out and restarts inside the first
    seeing.step_count[1] = seeing.cfg.max_steps - 1
    timed_out = []
    for _ in range(3):
        out = seeing.step(torch.full((3, 12), 0.3))
        timed_out.append(bool(out.time_out[1]))
        scan = out.critic_obs[:, -187:]
        torch.testing.assert_close(out.actor_obs[:, -187:], scan)
        torch.testing.assert_close(scan, torch.as_tensor(seeing.height_scan(), dtype=torch.float32))
    assert timed_out == [True, False, False] and int(seeing.step_count[1]) == 2


def test_env_state_round_trip_keeps_levels_and_refuses_a_flat_state() -> None:
    env = Go1Env(terrain_task(4), seed=0)
    assert env.curriculum is not None
    env.curriculum.levels[:] = [0, 1, 2, 1]
    state = env.state_dict()
    other = Go1Env(terrain_task(4), seed=5)
    other.load_state_dict(state)
    assert other.curriculum is not None
    np.testing.assert_array_equal(other.curriculum.levels, [0, 1, 2, 1])
    flat_state = Go1Env(Go1TaskConfig(num_envs=4), seed=0).state_dict()
    with pytest.raises(ValueError, match="terrain"):
        other.load_state_dict(flat_state)


def test_a_state_saved_before_the_leg_sensors_resumes_with_no_leg_down() -> None:
    """Runs saved before the thigh and calf touch sensors (the last 8 in ``sensordata``) resume;
    any other width is refused."""
    env = Go1Env(terrain_task(4), seed=0)
    env.step(torch.zeros(4, 12))
    state = env.state_dict()
    sensors = state["sim"]["sensordata"]
    old = {**state, "sim": {**state["sim"], "sensordata": sensors[:, : -go1.LEG_TOUCH_SENSORS]}}
    other = Go1Env(terrain_task(4), seed=5)
    other.load_state_dict(old)
    np.testing.assert_array_equal(
        other._sensordata[:, : -go1.LEG_TOUCH_SENSORS], sensors[:, : -go1.LEG_TOUCH_SENSORS]
    )
    assert (other._sensordata[:, -go1.LEG_TOUCH_SENSORS :] == 0).all()
    other.step(torch.zeros(4, 12))  # and steps on
    cut = {**state, "sim": {**state["sim"], "sensordata": sensors[:, :-1]}}
    with pytest.raises(ValueError, match="sensordata"):
        other.load_state_dict(cut)


def test_config_round_trip_and_old_dicts_load_as_flat() -> None:
    cfg = replace(
        Go1TaskConfig(), terrain=replace(SMALL, height_scan_actor=True, proportions=(("steps", 1.0),))
    )
    data = json.loads(json.dumps(task_config_to_dict(cfg)))
    assert task_config_from_dict(data) == cfg
    old = task_config_to_dict(Go1TaskConfig())
    del old["terrain"]
    assert task_config_from_dict(old).terrain == TerrainConfig()
    assert not TerrainConfig().enabled and not TerrainConfig().scans
    with pytest.raises(ValueError, match="terrain kind"):
        TerrainConfig(kind="lava")
    with pytest.raises(ValueError, match="proportions"):
        TerrainConfig(proportions=(("lava", 1.0),))
    with pytest.raises(ValueError, match="whole multiple"):
        TerrainConfig(tile_size_m=8.05)
    assert TILE_KINDS == TERRAIN_KINDS  # the CLI's spelled-out names


def test_flat_ground_stays_as_before_and_the_shipped_policy_loads() -> None:
    env = Go1Env(Go1TaskConfig(num_envs=2), seed=0)
    assert env.terrain is None and env.curriculum is None and env.model.nhfield == 0
    assert env.model.geom("floor").type == mujoco.mjtGeom.mjGEOM_PLANE
    actor, critic = env.observations()
    assert actor.shape == (2, 3 * FRAME_DIM) and critic.shape == (2, CRITIC_DIM)
    assert env.state_dict()["terrain"] is None
    policy = load_go1_policy(SHIPPED_POLICY)
    assert policy.task_cfg.terrain == TerrainConfig()
    # the velocity and push tables of a terrain policy run on flat ground
    assert ev._eval_env(terrain_task(2), 2, 1.0, 0, ev.EvalConfig()).terrain is None


def test_terrain_table_of_the_shipped_policy_on_gentle_ground() -> None:
    """The flat-trained policy walks 1 m across level-0 random ground (±1 cm) at 1 m/s."""
    policy = load_go1_policy(SHIPPED_POLICY)
    cfg = TerrainEvalConfig(
        kinds=("random",), levels=(0,), speeds_mps=(1.0,), episodes=3, episode_s=2.5, traverse_m=1.0
    )
    task = replace(policy.task_cfg, terrain=SMALL)
    rows = terrain_table(task, policy, cfg, seed=0)
    assert len(rows) == 1
    row = rows[0]
    assert (row["kind"], row["level"], row["parameter"]) == ("random", 0, "amplitude_m")
    assert row["successes"] == 3 and row["falls"] == 0 and row["stalls"] == 0
    assert row["lin_vel_error_mps"] < 0.3 and row["mean_distance_m"] == pytest.approx(1.0)
    assert 0.01 < row["swing_height_p90_m"] < 0.2  # the flat policy lifts its feet about 2 cm
    assert 0.003 < row["swing_apex_p50_m"] < 0.2 and row["swings"] > 12 and row["held_foot_rate"] == 0.0
    assert row["leg_contact_share"] == 0.0  # on its feet throughout
    assert 1.0 < row["step_rate_hz"] < 6.0  # a trot: each foot touches down a few times a second
    got_there = row["reward_per_s"]["got_there"]
    assert row["reward_per_s"]["stalled"] == {} and set(got_there) == {t.name for t in task.rewards}
    assert got_there["track_lin_vel_xy"] > 1.0 and got_there["fall"] == 0.0  # of 1.5: it walked


def test_swing_apexes_count_each_swing_once_and_a_foot_held_up_is_named() -> None:
    """``swings`` splits each foot's heights at its touchdowns; the cell row's swing apex counts each
    swing once, where the swing-height percentile weighs a foot held up at every step it is held."""
    nan = math.nan
    h = np.array([[nan, 0.1, 0.3, nan, 0.2, 0.2], [0.05, nan, nan, nan, nan, 0.4]]).T[:, :, None]
    apex, length, episode = swings(h)  # (6 steps, 2 episodes, 1 foot)
    np.testing.assert_allclose(apex, [0.3, 0.2, 0.05, 0.4])
    assert length.tolist() == [2, 2, 1, 1] and episode.tolist() == [0, 0, 1, 1]
    assert [a.size for a in swings(np.full((3, 2, 4), nan))] == [0, 0, 0]
    # 2 s at 50 Hz: robot 0 trots (diagonal pairs 0.1 s up, 0.1 s down, 10 cm high); robot 1 stands
    # on three legs with its front-right foot 20 cm up all along
    steps, dt = 100, 0.02
    up = np.arange(steps) % 10 < 5
    swing = np.full((steps, 2, 4), nan)
    swing[up, 0, 0] = swing[up, 0, 3] = swing[~up, 0, 1] = swing[~up, 0, 2] = 0.1
    swing[:, 1, 0] = 0.2
    walk = Walk(
        reached=np.full(2, steps),
        fell=np.full(2, steps),
        farthest=np.zeros(2),
        along=np.zeros((steps, 2)),
        errors=np.zeros((steps, 2, 2)),
        swing_height=swing,
        leg_contact=np.zeros((steps, 2), dtype=bool),
        reward=np.zeros((steps, 2, 0)),
    )
    cfg = TerrainEvalConfig(kinds=("random",), episode_s=2.0)
    row = cell_row("random", 0, 0.5, SMALL, walk, 0, cfg, 3.5, dt, ())
    assert row["stalls"] == 2 and row["held_foot_rate"] == 0.5
    assert row["swings"] == 41  # 4 feet × 10 swings of the trot, one held
    assert row["swing_apex_p50_m"] == pytest.approx(0.1)  # the trot's swings
    assert row["swing_height_p90_m"] == pytest.approx(0.2)  # a third of the airborne samples held
    # a second held is enough: the same foot down after 1 s (50 steps) is still held, 0.98 s is not
    swing[50:, 1, 0] = nan
    assert cell_row("random", 0, 0.5, SMALL, walk, 0, cfg, 3.5, dt, ())["held_foot_rate"] == 0.5
    swing[49:, 1, 0] = nan
    assert cell_row("random", 0, 0.5, SMALL, walk, 0, cfg, 3.5, dt, ())["held_foot_rate"] == 0.0


class StandStill:
    """Zero actions: PD to the home pose, whatever the command."""

    params_dim = 0

    def act(self, obs: torch.Tensor, params: torch.Tensor | None = None) -> torch.Tensor:
        return torch.zeros(obs.shape[0], 12)

    def reset(self, done: torch.Tensor | None = None) -> None:
        pass


def test_a_robot_that_stands_under_a_forward_command_stalls() -> None:
    """Standing at home on level ground neither gets there nor falls: every episode is a stall, and
    with no foot off the ground there is no swing height to report."""
    task = replace(Go1TaskConfig(), terrain=SMALL)
    cfg = TerrainEvalConfig(kinds=("random",), levels=(0,), speeds_mps=(0.5,), episodes=3, episode_s=2.0)
    (row,) = terrain_table(task, StandStill(), cfg, seed=0)
    assert row["successes"] == 0 and row["falls"] == 0
    assert row["stalls"] == 3 and row["stall_rate"] == 1.0 and row["stall_rate_ci95"][0] > 0.3
    assert math.isnan(row["swing_height_p90_m"]) and row["step_rate_hz"] == 0.0
    assert row["swings"] == 0 and math.isnan(row["swing_apex_p50_m"]) and row["held_foot_rate"] == 0.0
    # standing still under 0.5 m/s earns the linear-tracking kernel at a 0.5 m/s error, every second
    stalled = row["reward_per_s"]["stalled"]
    assert row["reward_per_s"]["got_there"] == {}
    kernel = math.exp(-(0.5**2) / TRACKING_SIGMA)
    assert stalled["track_lin_vel_xy"] == pytest.approx(1.5 * kernel, abs=0.05)
    assert stalled["track_ang_vel_z"] == pytest.approx(1.0, abs=0.05)
    report = "\n".join(terrain_report([row]))
    assert f"| – · {sum(stalled.values()):.2f} |" in report
    # a walk shorter than the look-back is refused, as is a non-positive distance
    with pytest.raises(ValueError, match="stall_s"):
        TerrainEvalConfig(episode_s=1.5, stall_s=2.0)
    with pytest.raises(ValueError, match="stall_m"):
        TerrainEvalConfig(stall_m=0.0)


def tiny_spec(task: Go1TaskConfig, iterations: int = 1, **kw: object) -> Go1TrainSpec:
    ppo = replace(go1_ppo_config(), num_steps_per_env=4, save_interval=1, num_mini_batches=2)
    return Go1TrainSpec(task=replace(task, num_envs=8), ppo=ppo, iterations=iterations, seed=5, **kw)  # type: ignore[arg-type]


def test_training_on_terrain_logs_the_level_resumes_and_fine_tunes_a_flat_policy(tmp_path: Path) -> None:
    flat = Go1Trainer(tiny_spec(Go1TaskConfig()), tmp_path / "flat", nthread=1)
    flat.run()
    rough = replace(Go1TaskConfig(), terrain=SMALL)
    t = Go1Trainer(tiny_spec(rough), tmp_path / "rough", nthread=1)
    t.run()
    row = json.loads((tmp_path / "rough" / "history.json").read_text())[-1]
    assert 0.0 <= row["terrain_level"] <= SMALL.num_levels - 1
    assert t.env.curriculum is not None
    kind_of_robot = np.asarray(tr.column_kinds(SMALL))[t.env.curriculum.cols]
    for kind in set(kind_of_robot):  # each kind's mean level over its robots, in the history
        assert row[f"terrain_level_{kind}"] == pytest.approx(
            t.env.curriculum.levels[kind_of_robot == kind].mean()
        )
    again = Go1Trainer(tiny_spec(rough, iterations=2), tmp_path / "rough", nthread=1)
    assert again.iteration == 1 and again.env.curriculum is not None and t.env.curriculum is not None
    np.testing.assert_array_equal(again.env.curriculum.levels, t.env.curriculum.levels)  # exact resume
    with pytest.raises(CheckpointError, match="'task' differs"):
        Go1Trainer(tiny_spec(Go1TaskConfig(), iterations=2), tmp_path / "rough", nthread=1)
    src = str(tmp_path / "flat" / "checkpoints" / "latest.pt")
    saved = load_checkpoint(src)["actor_state_dict"]
    with pytest.raises(CheckpointError, match="critic-warmup"):  # the critic now reads the scan
        Go1Trainer(tiny_spec(rough, init_from=src), tmp_path / "blind", nthread=1)
    blind = Go1Trainer(tiny_spec(rough, init_from=src, critic_warmup=1), tmp_path / "blind", nthread=1)
    for k, v in blind.alg.get_policy().state_dict().items():  # a blind fine-tune keeps the actor
        torch.testing.assert_close(v, saved[k])
    seeing_task = replace(rough, terrain=replace(SMALL, height_scan_actor=True))
    seeing = Go1Trainer(
        tiny_spec(seeing_task, init_from=src, critic_warmup=1), tmp_path / "seeing", nthread=1
    )
    obs = seeing.vec.get_observations()
    before = load_go1_policy(src).act(obs["policy"][:, : 3 * FRAME_DIM])
    with torch.no_grad():  # the scan's inputs start at zero weight: the same actions
        after = seeing.alg.get_policy()(obs)
    torch.testing.assert_close(after, before)
    seeing.run()
    blind_rough = str(tmp_path / "rough" / "checkpoints" / "latest.pt")  # its critic reads the scan
    from_rough = Go1Trainer(tiny_spec(seeing_task, init_from=blind_rough), tmp_path / "seeing2", nthread=1)
    saved_critic = load_checkpoint(blind_rough)["critic_state_dict"]
    for k, v in from_rough.alg.critic.state_dict().items():  # kept, though the actor gained the scan
        torch.testing.assert_close(v, saved_critic[k])
    top = load_checkpoint(blind_rough)  # its robots all on the top level
    top["env_state"]["terrain"]["levels"][:] = SMALL.num_levels - 1
    torch.save(top, tmp_path / "top.pt")
    lifted = Go1Trainer(
        tiny_spec(seeing_task, init_from=str(tmp_path / "top.pt")), tmp_path / "up", nthread=1
    )
    cur = lifted.env.curriculum  # the actor's scan leaves the tiles as they were: the levels are carried
    assert cur is not None and lifted.env.terrain is not None
    assert lifted.start_note is not None and "carried" in lifted.start_note
    assert (cur.levels == SMALL.num_levels - 1).all()
    origins = lifted.env.terrain.origins_m[cur.levels, cur.cols][:, :2]
    np.testing.assert_allclose(cur.start_xy, origins)  # the robots restarted on their tiles
    for levels, why in ((torch.zeros(3), "levels of (3,) robots"), (torch.full((8,), 7), "outside 0 … 2")):
        note = carry_terrain_levels(
            lifted.env, seeing_task.terrain, {"env_state": {"terrain": {"levels": levels}}}
        )
        assert note is not None and why in note and "afresh" in note
    assert (cur.levels == SMALL.num_levels - 1).all()  # left as they were
    assert blind.start_note is not None and "flat ground" in blind.start_note
    moved = replace(seeing_task, terrain=replace(seeing_task.terrain, tile_size_m=6.0, max_init_level=1))
    other = Go1Trainer(tiny_spec(moved, init_from=blind_rough), tmp_path / "moved", nthread=1)
    assert other.start_note is not None and "differs in max_init_level, tile_size_m" in other.start_note
    with pytest.raises(UserError, match="height scan"):
        export(
            Go1ExportArgs(
                out=tmp_path / "export", checkpoint=tmp_path / "seeing" / "checkpoints" / "latest.pt"
            )
        )


def test_eval_levels_default_to_the_targets_and_need_a_terrain(tmp_path: Path) -> None:
    from scenefactory.cli import main
    from scenefactory.cli.go1 import TARGET_LEVELS, eval_levels

    assert eval_levels("rough", None) == TARGET_LEVELS == (3, 4, 5, 7)
    assert eval_levels("stairs_up", [5]) == (5,)
    assert eval_levels("none", None) is None
    assert main(["eval", "go1", "--terrain", "none", "--level", "3", "--out", str(tmp_path / "e")]) == 2
    assert not (tmp_path / "e").exists()


def test_progress_line_names_the_kind_lowest_on_the_curriculum() -> None:
    row = {"terrain_level": 2.0, "terrain_level_random": 3.0, "terrain_level_stairs_up": 0.5}
    assert terrain_progress(row) == "  terrain level 2.00 (lowest stairs_up 0.50)"
    assert terrain_progress({"terrain_level": 1.0, "terrain_level_steps": 1.0}) == "  terrain level 1.00"
    assert terrain_progress({"mean_return": 1.0}) == ""


def test_eval_runs_only_the_tables_asked_for(tmp_path: Path) -> None:
    from scenefactory.cli import main
    from scenefactory.cli.go1 import EVAL_TABLES
    from scenefactory.go1.jobs import TABLES

    assert EVAL_TABLES == TABLES  # the CLI's spelled-out names
    out = tmp_path / "e"
    argv = ["eval", "go1", "--tables", "terrain", "--terrain", "random", "--level", "0", "--quick"]
    assert main([*argv, "--episodes", "2", "--out", str(out)]) == 0
    result = json.loads((out / "metrics.json").read_text())
    assert result["tables"] == ["terrain"] and result["tracking"] == [] and result["push_recovery"] == []
    assert "whole_body" not in result and [r["kind"] for r in result["terrain"]] == ["random", "random"]
    assert set(result["summary"]) == {"terrain_random_success_rate"}
    report = (out / "report.md").read_text()
    assert "Push recovery" not in report and "| vx m/s |" not in report and "| random | 0 |" in report
    no_terrain = ["eval", "go1", "--tables", "push", "--level", "3", "--out", str(tmp_path / "f")]
    assert main(no_terrain) == 2 and not (tmp_path / "f").exists()


def test_eval_terrain_spacing_rebuilds_the_tiles_and_is_checked(tmp_path: Path) -> None:
    from scenefactory.cli import main

    out = tmp_path / "e"
    argv = ["eval", "go1", "--tables", "terrain", "--terrain", "stairs_up", "--level", "3", "--quick"]
    assert main([*argv, "--episodes", "2", "--terrain-spacing", "0.05", "--out", str(out)]) == 0
    result = json.loads((out / "metrics.json").read_text())
    assert "terrain height field every 0.05 m for the terrain table" in result["world"]
    assert "flat floor" not in result["world"]  # no flat-floor table ran
    assert [r["parameter_value"] for r in result["terrain"]] == pytest.approx([0.1, 0.1])
    assert main([*argv, "--terrain-spacing", "0.07", "--out", str(tmp_path / "f")]) == 2  # 8 m tiles
    velocity_only = ["eval", "go1", "--tables", "velocity", "--terrain-spacing", "0.05", "--quick"]
    assert main([*velocity_only, "--out", str(tmp_path / "g")]) == 2
    assert not (tmp_path / "f").exists() and not (tmp_path / "g").exists()


def test_robots_start_at_the_centres_of_the_tiles_asked_for() -> None:
    from scenefactory.go1.terrain_eval import eval_terrain, start_on_tiles

    task = replace(Go1TaskConfig(num_envs=3), terrain=SMALL)
    world = replace(task, terrain=eval_terrain(task, ("stairs_up", "slope_down"), seed=0))
    env = Go1Env(world, seed=0, nthread=1)
    assert env.terrain is not None
    cols, heading = np.array([1, 0]), np.array([0.0, math.pi / 2])
    start = start_on_tiles(env, 1, cols, heading)
    np.testing.assert_allclose(start, env.terrain.origins_m[1, cols, 0:2])
    yaw = tr.yaw_of(env.sim.bind("qpos")[:2, 3:7])
    np.testing.assert_allclose(yaw, heading, atol=1e-12)


def test_render_crosses_one_tile(tmp_path: Path) -> None:
    from scenefactory.cli import main

    out = tmp_path / "r"
    argv = ["render", "go1", "--terrain", "stairs_down", "--level", "0", "--seconds", "0.4"]
    argv += ["--out", str(out)]
    assert main(argv) == 0
    assert (out / "go1.mp4").stat().st_size > 0 and (out / "go1_frames.png").stat().st_size > 0
    assert main(["render", "go1", "--terrain", "stairs_down", "--out", str(tmp_path / "a")]) == 2
    too_high = ["render", "go1", "--terrain", "steps", "--level", "10", "--out", str(tmp_path / "b")]
    assert main(too_high) == 2
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
