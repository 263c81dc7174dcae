"""Driving logs → transition dataset (``collect logs``): WOMD scenarios written in the real format,
converted, turned into transitions and read back; the numbers must be the logs' own."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from scenefactory.cli import main
from scenefactory.dynamics.bicycle import inverse_bicycle
from scenefactory.grounding.dataset import DATASET_FORMAT, load_transitions
from scenefactory.grounding.fit import bicycle_step_fn, build_histories
from scenefactory.grounding.log_dataset import log_transitions
from scenefactory.scenes.library import load_scene_dir
from scenefactory.scenes.womd.scenario_pb2 import Scenario, Track
from scenefactory.scenes.womd.tfrecord import write_records
from scenefactory.vehicles.params import VehicleParams
from test_womd_reader import STEPS, make_scenario

YAW_RATE = 0.08  # rad/s of the curving car
ACCEL = 0.6  # m/s² of the curving car


def _curving(scenario: Scenario) -> Scenario:
    """Make the self-driving car (track 0) accelerate along a steady left curve, as a kinematic car
    does: heading, speed and position integrated at 10 Hz."""
    track = Track(id=999, object_type=Track.TYPE_VEHICLE)
    x, y, yaw, v = -30.0, -1.75, 0.0, 6.0
    for _ in range(STEPS):
        track.states.add(
            center_x=x, center_y=y, center_z=0.8, length=4.6, width=1.9, height=1.6, heading=yaw,
            velocity_x=v * math.cos(yaw), velocity_y=v * math.sin(yaw), valid=True,
        )  # fmt: skip
        v_next = v + ACCEL * 0.1
        yaw_next = yaw + YAW_RATE * 0.1
        x += 0.5 * (v + v_next) * 0.1 * math.cos(0.5 * (yaw + yaw_next))
        y += 0.5 * (v + v_next) * 0.1 * math.sin(0.5 * (yaw + yaw_next))
        v, yaw = v_next, yaw_next
    del scenario.tracks[0]
    scenario.tracks.insert(0, track)
    return scenario


@pytest.fixture(scope="module")
def scenes_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two WOMD shards in the real TFRecord format, converted by the CLI into scene JSON."""
    root = tmp_path_factory.mktemp("womd")
    write_records(root / "a.tfrecord", [_curving(make_scenario("c0", 3)).SerializeToString()])
    write_records(root / "b.tfrecord", [make_scenario("c1", 2).SerializeToString()])
    assert main(["convert", str(root / "*.tfrecord"), "--out", str(root / "out")]) == 0
    return root / "out" / "json"


def test_collect_logs_round_trips_the_logged_states(scenes_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "logs"
    assert main(["collect", "logs", "--scenes", str(scenes_dir), "--out", str(out)]) == 0
    data, meta = load_transitions(out)
    scenes = load_scene_dir(scenes_dir)
    assert meta["format"] == DATASET_FORMAT and meta["engine"] == "log" and meta["policy_dt_s"] == 0.1
    assert meta["scenes"] == [s.name for s in scenes] == ["c0", "c1"]
    # every pair of consecutive valid logged steps is one transition
    pairs = sum(int((s.log.valid[:, :-1] & s.log.valid[:, 1:]).sum()) for s in scenes if s.log is not None)
    assert meta["transitions"] == len(data["episode"]) == pairs
    # the gap of WOMD track 1 (steps 60-61) splits that agent into two episodes in both scenes
    assert meta["episodes"] == len(np.unique(data["episode"])) == (3 + 1) + (2 + 1)
    params = VehicleParams()
    for si, sc in enumerate(scenes):
        log = sc.log
        assert log is not None
        mine = data["scene"] == si
        assert np.allclose(data["friction"][mine], sc.friction)
        # episodes are numbered agent by agent, each agent's runs in time order
        ordered = np.flatnonzero(mine)[np.lexsort((data["step"][mine], data["episode"][mine]))]
        taken = 0
        for a in range(sc.num_agents):
            steps = np.flatnonzero(log.valid[a, :-1] & log.valid[a, 1:])
            rows = ordered[taken : taken + len(steps)]
            taken += len(steps)
            assert data["step"][rows].tolist() == steps.tolist()
            st, nx = data["state"][rows], data["next_state"][rows]
            np.testing.assert_allclose(st[:, :2], log.xy[a, steps], atol=1e-4)
            np.testing.assert_allclose(st[:, 2], log.yaw[a, steps], atol=1e-5)
            np.testing.assert_allclose(st[:, 3], log.speed[a, steps], atol=1e-5)
            np.testing.assert_allclose(
                nx[:, :4],
                np.c_[log.xy[a, steps + 1], log.yaw[a, steps + 1], log.speed[a, steps + 1]],
                atol=1e-4,
            )
            acts, _ = inverse_bicycle(log.yaw[a], log.speed[a], log.valid[a], 0.1, params)
            np.testing.assert_allclose(data["action"][rows], acts[steps], atol=1e-6)
    # the curving car: yaw rate and acceleration come back, and a state's (yaw rate, wheel angle)
    # are those of the step that led into it — the next state of the step before
    c0 = (data["scene"] == 0) & (data["episode"] == data["episode"][data["scene"] == 0].min())
    rows = np.flatnonzero(c0)[np.argsort(data["step"][c0])]
    np.testing.assert_allclose(data["state"][rows, 4], YAW_RATE, atol=1e-4)
    np.testing.assert_allclose(data["action"][rows, 1], ACCEL / params.max_accel_mps2, atol=1e-4)
    assert (data["action"][rows, 0] > 0.01).all()  # steering left
    np.testing.assert_allclose(data["state"][rows[1:], 4:], data["next_state"][rows[:-1], 4:], atol=1e-6)


def test_log_transitions_feed_the_dynamics_fitting_code(scenes_dir: Path) -> None:
    """Histories rebuild one segment per episode, and the kinematic bicycle, given a logged state
    and the inferred action, lands within 2 cm of where the curving car went."""
    scenes = load_scene_dir(scenes_dir)
    data = log_transitions(scenes)
    h = build_histories(data, 4)
    assert len(np.unique(h.segment)) == len(np.unique(data["episode"]))
    params = VehicleParams()
    step = bicycle_step_fn(params, 0.1)
    curving = torch.from_numpy(np.flatnonzero(h.episode == h.episode.min()))
    pred = step(h.states[curving], h.actions[curving], h.friction[curving])
    err = (pred[:, :2] - h.next_state[curving, :2]).norm(dim=-1)
    assert float(err.max()) < 0.02


def test_collect_logs_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["collect", "logs", "--scenes", str(empty), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "holds no *.json scene files" in err and str(empty) in err and err.count("\n") == 1
    from scenefactory.scenes.library import procedural_scenes
    from scenefactory.scenes.scene_json import save_scene

    plain = tmp_path / "plain"
    save_scene(procedural_scenes("eval", 1, 2)[0], plain / "p.json")
    assert main(["collect", "logs", "--scenes", str(plain), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "carries a driving log" in err and str(plain) in err
    assert not (tmp_path / "o" / "meta.json").exists()
