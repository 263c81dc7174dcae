"""``eval drive --control``: who the policy drives on converted WOMD scenes (``evaluation.control``).
The SDC alone (the others replay their logs, PufferDrive's / Waymax's human-replay setting) and the
tracks to predict, on both engines, with the logged drivers measured in the same mode."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from scenefactory.cli import main
from scenefactory.errors import UserError
from scenefactory.evaluation.control import controlled_count, restrict_control
from scenefactory.scenes.womd.convert import scenario_to_scene
from scenefactory.scenes.womd.scenario_pb2 import RequiredPrediction
from scenefactory.scenes.womd.tfrecord import write_records
from womd_crossroads import crossroads_scenario, rotated


def test_modes_keep_the_sdc_and_the_tracks_to_predict() -> None:
    """The crossroads controls 4 vehicles; ``sdc`` keeps 1 and replays 3 more, ``tracks-to-predict``
    (SDC and track 2) keeps 2; ``all`` keeps the scene as it is."""
    sc = crossroads_scenario("ctl")
    sc.tracks_to_predict.append(RequiredPrediction(track_index=2, difficulty=1))
    scene, _ = scenario_to_scene(sc)
    assert scene.num_agents == 4
    replayed = scene.replay.num_objects if scene.replay is not None else 0
    (one,), rec = restrict_control([scene], "sdc", Path("."))
    assert one.num_agents == 1 and one.replay is not None and one.replay.num_objects == replayed + 3
    assert rec == {"mode": "sdc", "scenes": 1, "skipped_without_agent": 0, "agents": 1}
    assert controlled_count(scene, "tracks-to-predict") == 2
    assert restrict_control([scene], "all", None)[0][0] is scene


def test_scenes_without_the_ids_are_refused() -> None:
    """A scene converted before the ids were recorded names what to do."""
    scene, _ = scenario_to_scene(crossroads_scenario("old"))
    agents = {k: v for k, v in scene.params["agents"].items() if k != "sdc_track_id"}
    old = replace(scene, params={**scene.params, "agents": agents})
    with pytest.raises(UserError, match="convert its WOMD shard again"):
        controlled_count(old, "sdc")


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("control")
    base = crossroads_scenario("control-0")
    write_records(
        root / "x.tfrecord",
        [base.SerializeToString(), rotated(base, math.pi / 3, "control-60").SerializeToString()],
    )
    assert main(["--threads", "1", "convert", str(root / "x.tfrecord"), "--out", str(root / "out")]) == 0
    return root / "out" / "json"


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["kinematic", "mujoco"])
def test_sdc_mode_on_both_engines(converted: Path, tmp_path: Path, engine: str) -> None:
    """The logged SDC driven closed loop while the other vehicles replay: it reaches its goal without
    collision or off-road on either engine, and metrics.json says which mode was run."""
    argv = [
        "--threads",
        "1",
        "eval",
        "drive",
        "--policy",
        "expert",
        "--scenes",
        str(converted),
        "--control",
        "sdc",
    ]
    argv += ["--engine", engine, "--physics-hz", "100", "--out", str(tmp_path)]
    assert main(argv) == 0
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["control"] == {"mode": "sdc", "scenes": 2, "skipped_without_agent": 0, "agents": 2}
    assert m["agents"]["controlled"] == 2
    assert m["goal_reach_rate"] == 1.0 and m["collision_rate"] == 0.0 and m["offroad_rate"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["kinematic", "mujoco"])
def test_sdc_with_reactive_others_on_both_engines(converted: Path, tmp_path: Path, engine: str) -> None:
    """``--control sdc --others idm``: the logged SDC drives while the other logged vehicles react
    (IDM along their logs); it still reaches its goals without collision, and metrics.json records
    the mode with its IDM parameters and their source."""
    argv = ["--threads", "1", "eval", "drive", "--policy", "expert", "--scenes", str(converted)]
    argv += ["--control", "sdc", "--others", "idm", "--engine", engine, "--physics-hz", "100"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["others"]["mode"] == "idm" and m["others"]["idm"]["time_headway_s"] == 2.0
    assert "Waymax" in m["others"]["source"]
    assert m["goal_reach_rate"] == 1.0 and m["collision_rate"] == 0.0
    assert "IDM speed law" in (tmp_path / "metrics.md").read_text()


def test_unknown_others_mode_is_refused() -> None:
    """A mode other than log or idm names the flag and the choices."""
    from scenefactory.evaluation.control import with_others
    from scenefactory.tasks.driving.config import DrivingTaskConfig

    with pytest.raises(UserError, match="--others must be one of log, idm"):
        with_others(DrivingTaskConfig(), "reactive")
    assert with_others(DrivingTaskConfig(), "log")[0].replay_idm is None


@pytest.mark.slow
def test_rule_drivers_run_beside_the_logged_drivers(converted: Path, tmp_path: Path) -> None:
    """``--policy idm --control sdc --others idm``: the IDM driver's figures with the logged drivers'
    in the same mode beside them."""
    argv = ["--threads", "1", "eval", "drive", "--policy", "idm", "--scenes", str(converted), "--control"]
    argv += ["sdc", "--others", "idm", "--engine", "kinematic", "--out", str(tmp_path)]
    assert main(argv) == 0
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["policy"] == "idm" and m["human_baseline"]["policy"] == "expert"
    assert m["others"]["mode"] == "idm" and m["episodes"] == m["human_baseline"]["episodes"] == 2
    assert "| idm (kinematic) | logged drivers |" in (tmp_path / "metrics.md").read_text()
