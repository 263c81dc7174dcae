"""Traffic signals and stop signs: conversion from the three WOMD forms, scene files, replay in the
environment, the observation, the violation rules and metrics, procedural cycles and renders.

The project ships no WOMD data, so the scenario here is built in code in the real layout: two
eastbound approach lanes meeting a junction at x = 0, each movement a lane of its own (through and
left turn from the right lane share one stop point, as WOMD writes them: the left turn on a red
arrow throughout, the through lanes red until step 60 then green), a bike lane with a signal (a
lane the converter drops), and a southbound side street with a stop sign. The self-driving car
waits at the line for the green; the second car drives through the red at 10 m/s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from scene_fixtures import straight_scene
from scenefactory.errors import SceneFormatError
from scenefactory.evaluation.record import EpisodeRecord
from scenefactory.evaluation.render import _build_figure
from scenefactory.evaluation.render_scene import SIGNAL_COLORS
from scenefactory.evaluation.rollout import EXPERT, evaluate
from scenefactory.scenes.procedural import get_generator, junction_signals
from scenefactory.scenes.routes import make_procedural_scene
from scenefactory.scenes.scene import GO_STATES, STOP_STATES, Scene, SignalLog, SignalState
from scenefactory.scenes.scene_json import load_scene, save_scene, scene_from_dict, scene_to_dict
from scenefactory.scenes.womd import iter_scenarios, write_records
from scenefactory.scenes.womd.convert import scenario_to_scene
from scenefactory.scenes.womd.gpudrive_json import json_to_scenario
from scenefactory.scenes.womd.scenario_pb2 import (
    DynamicMapState,
    LaneCenter,
    MapFeature,
    MapPoint,
    RoadEdge,
    Scenario,
    Track,
    TrafficSignalLaneState,
)
from scenefactory.scenes.womd.tf_example import example_to_scenario
from scenefactory.tasks.driving.config import DrivingTaskConfig, ObservationConfig, with_traffic_signals
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.metrics import EpisodeLog, summarize
from scenefactory.tasks.driving.observations import SIGNAL_FEATURES, observation_dim
from scenefactory.tasks.driving.signals import SIGNAL, STOP_SIGN, route_stops, stop_events
from test_gpudrive_json import make_json_scenario
from test_tf_example import make_example

STEPS = 91
CURRENT = 10
GREEN_AT = 60  # absolute step at which the through lanes turn green
STOP, GO, ARROW_STOP = (int(SignalState.STOP), int(SignalState.GO), int(SignalState.ARROW_STOP))


# ------------------------------------------------------------------------------------ WOMD record


def _line(x0: float, y0: float, x1: float, y1: float, n: int) -> list[MapPoint]:
    return [MapPoint(x=x0 + (x1 - x0) * i / (n - 1), y=y0 + (y1 - y0) * i / (n - 1)) for i in range(n)]


def _lane(
    points: list[MapPoint], exits: tuple[int, ...] = (), kind: int = LaneCenter.TYPE_SURFACE_STREET
) -> LaneCenter:
    return LaneCenter(type=kind, polyline=points, exit_lanes=list(exits))  # type: ignore[arg-type]


def _car(track_id: int, y: float, x_at: Callable[[float], float], v_at: Callable[[float], float]) -> Track:
    """An eastbound car; ``x_at(t_s)``/``v_at(t_s)`` give position and speed at time t (step 0 = 0 s)."""
    track = Track(id=track_id, object_type=Track.TYPE_VEHICLE)
    for step in range(STEPS):
        t = 0.1 * step
        track.states.add(
            center_x=x_at(t), center_y=y, center_z=0.8, length=4.6, width=1.9, height=1.6,
            heading=0.0, velocity_x=v_at(t), velocity_y=0.0, valid=True,
        )  # fmt: skip
    return track


def signal_scenario() -> Scenario:
    """The junction of the module docstring, 91 steps at 10 Hz."""
    sc = Scenario(
        scenario_id="signals-1",
        timestamps_seconds=[0.1 * s for s in range(STEPS)],
        current_time_index=CURRENT,
        sdc_track_index=0,
    )
    go_s = 0.1 * GREEN_AT
    # waits at x = -6 until the green, then accelerates at 3 m/s²
    sc.tracks.append(
        _car(100, -1.75, lambda t: -6.0 + 1.5 * max(0.0, t - go_s) ** 2, lambda t: 3.0 * max(0.0, t - go_s))
    )
    # 10 m/s through the red: x = 0 at step 50
    sc.tracks.append(_car(101, 1.75, lambda t: -50.0 + 10.0 * t, lambda t: 10.0))
    left = [
        MapPoint(x=15.0 * math.sin(a), y=13.25 - 15.0 * math.cos(a)) for a in np.linspace(0, math.pi / 2, 24)
    ]
    sc.map_features.extend(
        [
            MapFeature(id=11, lane=_lane(_line(-60, -1.75, 0, -1.75, 61), exits=(12, 13))),
            MapFeature(id=12, lane=_lane(_line(0, -1.75, 40, -1.75, 41))),
            MapFeature(id=13, lane=_lane(left)),
            MapFeature(id=21, lane=_lane(_line(-60, 1.75, 0, 1.75, 61), exits=(22,))),
            MapFeature(id=22, lane=_lane(_line(0, 1.75, 40, 1.75, 41))),
            MapFeature(id=14, lane=_lane(_line(0, -4.5, 40, -4.5, 9), kind=LaneCenter.TYPE_BIKE_LANE)),
            MapFeature(id=31, lane=_lane(_line(8, 40, 8, 5, 36))),
            MapFeature(id=40, stop_sign={"lane": [31], "position": MapPoint(x=10.5, y=6.0)}),
            MapFeature(
                id=50,
                road_edge=RoadEdge(
                    type=RoadEdge.TYPE_ROAD_EDGE_BOUNDARY, polyline=_line(-60, -3.5, 40, -3.5, 11)
                ),
            ),
        ]
    )
    for step in range(STEPS):
        through = STOP if step < GREEN_AT else GO
        states = [
            (12, through, (0.0, -1.75)),
            (13, ARROW_STOP, (0.0, -1.75)),
            (22, through, (0.0, 1.75)),
            (14, GO, (0.0, -4.5)),
        ]
        if step == 70:
            states = [s for s in states if s[0] != 13]  # not observed at this step: UNKNOWN
        sc.dynamic_map_states.append(
            DynamicMapState(
                lane_states=[
                    TrafficSignalLaneState(lane=lane, state=code, stop_point=MapPoint(x=x, y=y))  # type: ignore[arg-type]
                    for lane, code, (x, y) in states
                ]
            )
        )
    return sc


@pytest.fixture(scope="module")
def womd_scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    """The scenario written as a TFRecord shard, read back and converted."""
    path = tmp_path_factory.mktemp("womd") / "training.tfrecord-00000-of-00001"
    write_records(path, [signal_scenario().SerializeToString()])
    ((_, _, scenario),) = list(iter_scenarios(path))
    scene, _ = scenario_to_scene(scenario)
    return scene


def test_womd_record_converts_with_its_signals(womd_scene: Scene) -> None:
    sig, rg = womd_scene.signals, womd_scene.roadgraph
    assert sig is not None and not sig.loop and sig.dt_s == pytest.approx(0.1)
    origin = np.array(womd_scene.params["origin_xy"])
    np.testing.assert_allclose(origin, [-6.0, -1.75])
    # columns in order of first appearance: lanes 12, 13, 22, 14; steps from current_time_index on
    assert sig.state.shape == (STEPS - CURRENT, 4)
    np.testing.assert_allclose(sig.stop_xy, np.array([[0, -1.75], [0, -1.75], [0, 1.75], [0, -4.5]]) - origin)
    through = np.where(np.arange(CURRENT, STEPS) < GREEN_AT, STOP, GO)
    assert np.array_equal(sig.state[:, 0], through) and np.array_equal(sig.state[:, 2], through)
    left = np.full(STEPS - CURRENT, ARROW_STOP)
    left[70 - CURRENT] = int(SignalState.UNKNOWN)
    assert np.array_equal(sig.state[:, 1], left)
    # lane ids → road-graph lanes: each signal's lane starts at its stop point; the bike lane was dropped
    assert sig.lane[3] == -1 and (sig.lane[:3] >= 0).all()
    for col in range(3):
        np.testing.assert_allclose(rg.lane(int(sig.lane[col]))[0], sig.stop_xy[col], atol=1e-9)
    assert rg.lane(int(sig.lane[0]))[-1, 1] == pytest.approx(0.0)  # lane 12 runs straight on
    assert rg.lane(int(sig.lane[1]))[-1, 1] > 10.0  # lane 13 turns left
    # the stop sign: its stop point is on the lane it controls, nearest to the sign
    assert sig.sign_lane.shape == (1,)
    sign_lane = rg.lane(int(sig.sign_lane[0]))
    np.testing.assert_allclose(sign_lane[[0, -1]], np.array([[8, 40], [8, 5]]) - origin)
    np.testing.assert_allclose(sig.sign_xy[0], np.array([8.0, 6.0]) - origin, atol=1e-9)


def test_route_stops_pick_the_lane_each_route_follows(womd_scene: Scene) -> None:
    """The through and left-turn signals share a stop point: the waiting car's route goes straight,
    so its stop is the through lane's (column 0), not the red arrow's."""
    (wait,), (run,) = route_stops(womd_scene, 0), route_stops(womd_scene, 1)
    assert (wait.kind, wait.column, wait.right_turn) == (SIGNAL, 0, False)
    assert wait.s_m == pytest.approx(6.0, abs=0.05)
    assert (run.kind, run.column) == (SIGNAL, 2) and run.s_m == pytest.approx(40.0, abs=0.05)


def test_logged_drivers_through_the_expert_policy(womd_scene: Scene) -> None:
    """``eval drive --policy expert``: the car that waited for the green is clean, the one that drove
    through the red is a red-light violation."""
    cfg = DrivingTaskConfig(num_worlds=1, agents_per_world=2, episode_length_s=8.0)
    m, log = evaluate(EXPERT, cfg, [womd_scene])
    rec = log.cat()
    assert m["episodes"] == 2 and m["episodes_crossing_signals"] == 2
    assert rec.red_light_violations.tolist() == [0, 1]
    assert m["red_light_violation_rate"] == pytest.approx(0.5)
    lo, hi = m["red_light_violation_rate_ci95"]
    assert lo < 0.5 < hi
    assert m["stop_sign_violation_rate"] == 0.0 and m["episodes_crossing_stop_signs"] == 0


def test_tf_example_signals_convert() -> None:
    """tf_example ``traffic_light_state``: signal 0 controls lane 100 (red before, green from the
    current step on), its stop point at x = 49; the stop sign there names no lane."""
    scene, _ = scenario_to_scene(example_to_scenario(make_example("tfx").SerializeToString(), "mem"))
    sig = scene.signals
    assert sig is not None and sig.state.shape == (STEPS - CURRENT, 1)
    assert (sig.state[:, 0] == GO).all()
    origin = np.array(scene.params["origin_xy"])
    np.testing.assert_allclose(sig.stop_xy[0], np.array([49.0, 0.0]) - origin, atol=1e-4)
    lane = scene.roadgraph.lane(int(sig.lane[0]))
    np.testing.assert_allclose(lane[[0, -1]], np.array([[0.0, 0.0], [50.0, 0.0]]) - origin, atol=1e-4)
    assert sig.sign_lane.tolist() == [-1]
    np.testing.assert_allclose(sig.sign_xy[0], np.array([95.0, -3.0]) - origin, atol=1e-4)


def test_gpudrive_json_tl_states_convert() -> None:
    """GPUDrive's ``tl_states`` (lane id → per-step state names, stop point, time index)."""
    data = make_json_scenario()
    names = ["stop"] * 20 + ["caution"] * 5 + ["go"] * 66
    data["tl_states"] = {
        "101": {
            "state": names,
            "x": [59.0] * 91,
            "y": [0.0] * 91,
            "z": [0.0] * 91,
            "time_index": list(range(91)),
        }
    }
    scene, _ = scenario_to_scene(json_to_scenario(data, "mem.json"))
    sig = scene.signals
    assert sig is not None and sig.state.shape == (STEPS - CURRENT, 1)
    expected = [STOP] * 10 + [int(SignalState.CAUTION)] * 5 + [GO] * 66
    assert sig.state[:, 0].tolist() == expected
    origin = np.array(scene.params["origin_xy"])
    np.testing.assert_allclose(sig.stop_xy[0], np.array([59.0, 0.0]) - origin)
    lane = scene.roadgraph.lane(int(sig.lane[0]))  # lane 101 runs from x = 0 to 60
    np.testing.assert_allclose(lane[[0, -1]], np.array([[0.0, 0.0], [60.0, 0.0]]) - origin)


# ------------------------------------------------------------------------------------- scene files


def test_scene_file_round_trip_and_checks(womd_scene: Scene, tmp_path: Path) -> None:
    save_scene(womd_scene, tmp_path / "s.json")
    back = load_scene(tmp_path / "s.json").signals
    sig = womd_scene.signals
    assert back is not None and sig is not None and back.loop == sig.loop and back.dt_s == sig.dt_s
    for name in ("stop_xy", "lane", "state", "sign_xy", "sign_lane"):
        assert np.array_equal(getattr(back, name), getattr(sig, name)), name
    data = scene_to_dict(womd_scene)
    del data["signals"]
    assert scene_from_dict(data).signals is None  # files without the section load as before
    for path, value, field in (
        (("lights", 0, "state", 3), 9, "signals.lights[0].state"),
        (("lights", 1, "lane"), 99, "signals.lights[1].lane"),
        (("stop_signs", 0, "stop_xy", 0), 1e300, "signals.stop_signs[0].stop_xy[0]"),
    ):
        bad = scene_to_dict(womd_scene)
        node = bad["signals"]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(SceneFormatError, match=f"field '{re_escape(field)}'"):
            scene_from_dict(bad, "bad.json")


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


# ------------------------------------------------------------------------- environment and rules


def _signal_road(states: np.ndarray, stop_x: float = 30.0, loop: bool = False, **sign: np.ndarray) -> Scene:
    """One eastbound agent per scene on the straight two-lane road, a signal stop point at ``stop_x``."""
    scene = straight_scene([(10.0, 0.0, 0.0, 10.0)], goal_s=60.0)
    sig = SignalLog(
        stop_xy=np.array([[stop_x, 0.0]]),
        lane=np.array([0]),
        state=np.asarray(states, dtype=np.int64).reshape(-1, 1),
        loop=loop,
        **sign,
    )
    return replace(scene, signals=sig)


def _env(scenes: list[Scene], **obs: bool) -> DrivingEnv:
    cfg = with_traffic_signals(
        DrivingTaskConfig(num_worlds=len(scenes), agents_per_world=1, episode_length_s=10.0)
    )
    cfg = replace(cfg, observations=replace(cfg.observations, **obs))
    return DrivingEnv(cfg, scenes, sequential_scenes=True)


def _speeds(env: DrivingEnv) -> torch.Tensor:
    return env.engine.state().speed


def test_env_replays_the_state_of_each_step_and_loops() -> None:
    codes = [STOP] * 5 + [int(SignalState.CAUTION)] * 3 + [GO] * 4  # 12 steps
    log_scene = _signal_road(np.array(codes))
    cycle_scene = _signal_road(np.array(codes), loop=True)
    env = _env([log_scene, cycle_scene])
    onehot = {STOP: [1, 0, 0, 0], int(SignalState.CAUTION): [0, 1, 0, 0], GO: [0, 0, 1, 0], 0: [0, 0, 0, 1]}
    hold = torch.tensor([[[0.0, -1.0]], [[0.0, -1.0]]])  # brake: both stay short of the line
    for step in range(20):
        obs = env.observations()[:, 0, -SIGNAL_FEATURES:]
        expected_log = codes[step] if step < len(codes) else 0  # UNKNOWN after the log
        assert obs[0, 1:5].tolist() == onehot[expected_log], step
        assert obs[1, 1:5].tolist() == onehot[codes[step % len(codes)]], step
        env.step(hold)


def test_observation_shows_red_ahead_at_its_distance() -> None:
    env = _env([_signal_road(np.full(50, STOP))])
    cfg_dim = observation_dim(5, 24, 8, True, traffic_signals=True)
    assert env.obs_dim == cfg_dim == observation_dim(5, 24, 8, True) + SIGNAL_FEATURES
    feats = env.observations()[0, 0, -SIGNAL_FEATURES:].tolist()
    # 20 m to the line / 50 m, red, not stopped; no stop sign within range
    assert feats == pytest.approx([0.4, 1, 0, 0, 0, 0, 1.0, 0])


def _drive(env: DrivingEnv, policy: Callable[[DrivingEnv], torch.Tensor], steps: int) -> list:
    log = EpisodeLog()
    terms = []
    for _ in range(steps):
        res = env.step(policy(env))
        log.add(res.finished)
        terms.append({k: v.clone() for k, v in res.reward_terms.items()})
    return [log, terms]


def _wait_for_green(env: DrivingEnv, stop_x: float = 30.0) -> torch.Tensor:
    """Brake to a stop 4 m before the line while the light is red; go once it is green."""
    st = env.engine.state()
    red = env.observations()[:, 0, -SIGNAL_FEATURES + 1] > 0.5
    gap = stop_x - 4.0 - st.pos_xy[:, 0, 0]
    brake = red & (st.speed[:, 0] ** 2 / (2 * gap.clamp(min=0.1)) > 3.0)
    accel = torch.where(brake | (red & (gap < 1.0)), -1.0, torch.where(red, 0.0, 0.5))
    return torch.stack((torch.zeros_like(accel), accel), dim=-1).unsqueeze(1)


def test_running_a_red_light_is_counted_and_waiting_for_green_is_not() -> None:
    states = np.array([STOP] * 60 + [GO] * 100)
    env = _env([_signal_road(states), _signal_road(states)])

    def policy(e: DrivingEnv) -> torch.Tensor:
        keep = torch.zeros(2, 1, 2)  # world 0 keeps 10 m/s through the red
        return torch.cat((keep[:1], _wait_for_green(e)[1:]), dim=0)

    log, terms = _drive(env, policy, 100)
    rec = log.cat()
    by_world = {int(w): i for i, w in enumerate(rec.world)}
    assert rec.red_light_violations[by_world[0]] == 1 and rec.red_light_violations[by_world[1]] == 0
    assert rec.signals_crossed[by_world[0]] == 1 and rec.signals_crossed[by_world[1]] == 1
    fired = torch.stack([t["red_light"][0, 0] for t in terms[:60]])  # world 0's first episode
    assert fired.sum() == 1 and int(fired.argmax()) == 19  # x = 10 + 10 t reaches 30 at step 20
    m = summarize(rec)
    assert m["red_light_violation_rate"] == pytest.approx(0.5) and m["episodes_crossing_signals"] == 2


def test_stop_signs_need_a_stop() -> None:
    sign = {"sign_xy": np.array([[30.0, 0.0]]), "sign_lane": np.array([0])}
    scenes = [_signal_road(np.full(1, GO), stop_x=80.0, **sign) for _ in range(2)]
    env = _env(scenes)

    def policy(e: DrivingEnv) -> torch.Tensor:
        st = e.engine.state()
        halted = e.stop_stopped[:, 0].any(-1)
        gap = 29.0 - st.pos_xy[:, 0, 0]
        brake = ~halted & (st.speed[:, 0] ** 2 / (2 * gap.clamp(min=0.1)) > 3.0)
        accel = torch.where(brake | (~halted & (gap < 1.0)), -1.0, torch.where(halted, 0.3, 0.0))
        accel[0] = 0.0  # world 0 rolls through at 10 m/s
        return torch.stack((torch.zeros_like(accel), accel), dim=-1).unsqueeze(1)

    assert env.observations()[:, 0, -2].tolist() == pytest.approx([0.4, 0.4])  # the sign 20 m ahead
    log, _ = _drive(env, policy, 100)
    rec = log.cat()
    order = rec.world.argsort()
    assert rec.stop_sign_violations[order].tolist() == [1, 0]
    assert rec.stop_signs_crossed[order].tolist() == [1, 1]
    assert rec.red_light_violations.sum() == 0


def test_rules_for_flashing_red_right_turns_and_a_light_turning_red() -> None:
    """One step, four stops crossed by one agent (W = K = 1, M = 4), each case by hand."""
    s_now, speed, active = torch.tensor([[10.0]]), torch.tensor([[5.0]]), torch.tensor([[True]])
    stop_s = torch.full((1, 1, 4), 9.5)
    kind = torch.full((1, 1, 4), SIGNAL)
    right = torch.tensor([[[True, True, False, False]]])
    before = torch.tensor([[[STOP, ARROW_STOP, int(SignalState.FLASHING_STOP), int(SignalState.CAUTION)]]])
    now = torch.tensor([[[STOP, ARROW_STOP, int(SignalState.FLASHING_STOP), STOP]]])
    none = torch.zeros(1, 1, 4, dtype=torch.bool)

    def runs(stopped: list[bool], case: int) -> bool:
        one = torch.zeros(1, 1, 4, dtype=torch.long)
        one[..., case] = SIGNAL
        ev, _, passed = stop_events(
            s_now, speed, active, stop_s, one, right, before, now, torch.tensor([[stopped]]), none
        )
        assert bool(passed[0, 0, case])
        return bool(ev.red_light[0, 0])

    # right on red (STOP) is legal after a stop, a red arrow never; flashing red acts as a stop sign
    assert runs([False] * 4, 0) and not runs([True] * 4, 0)
    assert runs([False] * 4, 1) and runs([True] * 4, 1)
    assert runs([False] * 4, 2) and not runs([True] * 4, 2)
    assert not runs([False] * 4, 3)  # yellow when the step began: not run
    ev, _, _ = stop_events(s_now, speed, active, stop_s, kind, right, before, now, none, none)
    assert bool(ev.crossed_signal[0, 0]) and not bool(ev.stop_sign[0, 0])
    sign_kind = torch.full((1, 1, 4), STOP_SIGN)
    ev, _, _ = stop_events(s_now, speed, active, stop_s, sign_kind, right, before, now, none, none)
    assert bool(ev.stop_sign[0, 0]) and not bool(ev.red_light[0, 0])


def test_exact_resume_with_signals() -> None:
    scenes = [_signal_road(np.array([STOP] * 30 + [GO] * 30), loop=True)] * 2
    a, b = _env(scenes), _env(scenes)
    act = torch.tensor([[[0.0, 0.2]], [[0.0, -0.3]]])
    for _ in range(15):
        a.step(act)
    b.load_state_dict(a.state_dict())
    assert set(DrivingEnv.SIGNAL_STATE) <= set(a.state_dict()["episode"])
    for _ in range(30):
        ra, rb = a.step(act), b.step(act)
        assert torch.equal(ra.obs, rb.obs) and torch.equal(ra.reward, rb.reward)
    assert torch.equal(a.red_light_violations, b.red_light_violations)


def test_signals_off_leaves_the_observation_and_config_unchanged() -> None:
    cfg = DrivingTaskConfig()
    assert (
        observation_dim(5, 24, 8, True)
        == DrivingEnv(
            replace(cfg, num_worlds=1, agents_per_world=1), [_signal_road(np.full(3, STOP))]
        ).obs_dim
    )
    from scenefactory.tasks.driving.config import task_config_from_dict, task_config_to_dict

    assert "traffic_signals" not in task_config_to_dict(cfg)["observations"]
    on = with_traffic_signals(cfg)
    back = task_config_from_dict(task_config_to_dict(on))
    assert back.observations.traffic_signals and [t.name for t in back.rewards][-2:] == [
        "red_light",
        "stop_sign",
    ]
    assert with_traffic_signals(on) == on
    assert ObservationConfig().traffic_signals is False


# -------------------------------------------------------------------------------- procedural cycle


@given(
    seed=st.integers(0, 10_000),
    cycle=st.sampled_from([18.0, 30.0, 40.0, 75.5]),
    kind=st.sampled_from(["intersection", "t_junction"]),
)
def test_procedural_cycles_never_give_crossing_directions_green_together(
    seed: int, cycle: float, kind: str
) -> None:
    gen = get_generator(kind)
    rng = np.random.default_rng(seed)
    params = replace(gen.sample(rng), signal_cycle_s=cycle)
    rg = gen.make(params, rng)
    sig = junction_signals(rg, cycle, rng)
    assert sig.loop and sig.num_steps == round(cycle / 0.1)
    dirs = np.array([_unit(rg.lane(int(ln))[1] - rg.lane(int(ln))[0]) for ln in sig.lane])
    crossing = np.abs(dirs[:, None, 0] * dirs[None, :, 1] - dirs[:, None, 1] * dirs[None, :, 0]) > math.sin(
        math.radians(45)
    )
    approach = np.array([np.allclose(rg.lane(int(ln))[0], sig.stop_xy[i]) for i, ln in enumerate(sig.lane)])
    assert approach.all()
    not_red = ~np.isin(sig.state, [int(c) for c in STOP_STATES])
    for t in range(sig.num_steps):
        on = np.flatnonzero(not_red[t])
        assert not crossing[np.ix_(on, on)].any(), t
    green = np.isin(sig.state, [int(c) for c in GO_STATES])
    assert green.any(axis=0).all()  # every movement gets its green in each cycle
    assert (~not_red).all(axis=1).any()  # and there is an all-red clearance


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_procedural_signals_are_off_by_default_and_leave_the_scene_as_it_was() -> None:
    plain = make_procedural_scene("intersection", 5, 8)
    signalled = make_procedural_scene("intersection", 5, 8, signal_cycle_s=40.0)
    assert plain.signals is None and signalled.signals is not None
    assert np.array_equal(plain.spawn_pose, signalled.spawn_pose)
    assert np.array_equal(plain.roadgraph.lane_xy, signalled.roadgraph.lane_xy)
    assert make_procedural_scene("roundabout", 5, 8).signals is None
    with pytest.raises(Exception, match="signal_cycle_s"):
        make_procedural_scene("t_junction", 5, 8, signal_cycle_s=10.0)


# ------------------------------------------------------------------------------------------ render


def test_render_colours_stop_points_by_state() -> None:
    scene = _signal_road(np.array([STOP] * 3 + [int(SignalState.CAUTION)] * 3 + [GO] * 3))
    k = scene.max_agents
    ep = EpisodeRecord(
        scene=scene,
        pos_xy=np.tile(scene.spawn_pose[None, :, :2], (9, 1, 1)),
        yaw=np.zeros((9, k)),
        speed=np.zeros((9, k)),
        status=np.zeros((9, k), dtype=np.int64),
        dt_s=0.1,
    )
    panel = _build_figure([ep], 60.0, 3.0, "roadgraph", animated=False).panels[0]
    assert panel.signal_dots is not None and panel.signal_dots in panel.artists
    from matplotlib.colors import to_rgba

    for step, name in ((0, "red"), (4, "yellow"), (8, "green")):
        panel.update(step)
        assert tuple(panel.signal_dots.get_facecolor()[0]) == pytest.approx(to_rgba(SIGNAL_COLORS[name]))
