"""``scenefactory convert``: shards in parallel, summaries, corrupt input, and use of the output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scenefactory.cli import main
from scenefactory.scenes.womd.scenario_pb2 import MapPoint, RoadLine, Scenario
from scenefactory.scenes.womd.tfrecord import write_records
from test_womd_reader import make_scenario


def _shards(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    nolanes = Scenario(scenario_id="nolanes", current_time_index=10)
    nolanes.map_features.add(id=1, road_line=RoadLine(polyline=[MapPoint(x=0, y=0), MapPoint(x=1, y=0)]))
    a, b = folder / "a.tfrecord", folder / "b.tfrecord"
    write_records(a, [make_scenario(f"a{i}", 2).SerializeToString() for i in range(3)])
    write_records(b, [make_scenario("b0", 3).SerializeToString(), nolanes.SerializeToString()])
    return [a, b]


def test_convert_two_shards_with_workers_then_train_and_expert_eval(tmp_path: Path) -> None:
    _shards(tmp_path / "in")
    out = tmp_path / "out"
    assert main(["convert", str(tmp_path / "in" / "*.tfrecord"), "--out", str(out), "--workers", "2"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["files"] == 2 and summary["scenarios_read"] == 5 and summary["converted"] == 4
    assert len(summary["skipped"]) == 1 and "no drivable lanes" in summary["skipped"][0]["reason"]
    index = json.loads((out / "index.json").read_text())
    assert sorted(index["scenes"]) == ["a0", "a1", "a2", "b0"]
    assert len(list((out / "json").glob("*.json"))) == 4
    m_out = tmp_path / "expert"
    args = ["eval", "drive", "--policy", "expert", "--scenes", str(out / "json"), "--agents", "3"]
    assert main([*args, "--out", str(m_out)]) == 0
    assert json.loads((m_out / "metrics.json").read_text())["episodes_with_log"] == 9
    gif = tmp_path / "converted.gif"
    render = ["render", "drive", "--policy", "expert", "--scenes", str(out / "json"), "--agents", "3"]
    assert main([*render, "--panels", "2", "--out", str(gif)]) == 0
    assert gif.read_bytes()[:6] == b"GIF89a"
    run = tmp_path / "run"
    train = ["train", "drive", "--worlds", "2", "--agents", "2", "--iterations", "1"]
    assert main([*train, "--scenes", str(out / "json"), "--out", str(run)]) == 0


def test_corrupt_shard_keeps_what_was_good_and_exits_nonzero(tmp_path: Path) -> None:
    a, _ = _shards(tmp_path / "in")
    data = bytearray(a.read_bytes())
    data[-30] ^= 0xFF  # inside the last record's data: its CRC fails
    a.write_bytes(bytes(data))
    out = tmp_path / "out"
    assert main(["convert", str(a), "--out", str(out)]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["converted"] == 2 and len(summary["errors"]) == 1
    error = summary["errors"][0]
    assert error["record"] == 2 and error["file"].endswith("a.tfrecord")
    assert f"record 2 at byte offset {error['offset']}" in error["error"] and "a.tfrecord" in error["error"]
    assert main(["convert", str(a), "--out", str(out), "--skip-bad"]) == 0
    assert main(["convert", str(tmp_path / "nothing*.tfrecord"), "--out", str(out)]) == 2
    assert main(["convert", str(a), "--format", "json,obj", "--out", str(out)]) == 2


def test_convert_to_mjcf_and_usd_that_load_and_carry_friction(tmp_path: Path) -> None:
    import mujoco
    import numpy as np
    from pxr import Usd, UsdPhysics, UsdShade

    from scenefactory.scenes.scene_json import load_scene

    _shards(tmp_path / "in")
    out = tmp_path / "out"
    files = str(tmp_path / "in" / "a.tfrecord")
    assert main(["convert", files, "--format", "json,mjcf,usd", "--out", str(out)]) == 0
    scene = load_scene(out / "json" / "a0.json")
    model = mujoco.MjModel.from_xml_path(str(out / "mjcf" / "a0.xml"))
    data = mujoco.MjData(model)
    mujoco.mj_step(model, data, nstep=240)  # 2 s at 120 Hz with zero controls
    assert np.isfinite(data.qpos).all()
    car0 = model.body("car0_chassis").id
    assert np.allclose(data.xpos[car0, :2], scene.spawn_pose[0, :2], atol=0.5)  # still where it spawned
    ground = model.geom("ground").id
    assert model.geom_friction[ground, 0] == scene.friction
    stage = Usd.Stage.Open(str(out / "usd" / "a0.usda"))
    mats = [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.MaterialAPI)]
    assert len(mats) == 1
    api = UsdPhysics.MaterialAPI(mats[0])
    assert abs(api.GetStaticFrictionAttr().Get() - scene.friction) < 1e-6
    assert abs(api.GetDynamicFrictionAttr().Get() - scene.friction) < 1e-6
    assert any(p.IsA(UsdPhysics.Scene) for p in stage.Traverse())
    assert UsdShade.Material(mats[0]) is not None


@pytest.mark.slow
def test_convert_on_a_local_ray_instance(tmp_path: Path) -> None:
    """--ray ADDRESS runs the same conversion as Ray tasks (a local instance stands in for a cluster)."""
    import ray

    _shards(tmp_path / "in")
    ctx = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        address = ctx.address_info["gcs_address"]
        out = tmp_path / "out"
        assert (
            main(["convert", str(tmp_path / "in" / "*.tfrecord"), "--out", str(out), "--ray", address]) == 0
        )
        summary = json.loads((out / "summary.json").read_text())
        assert summary["converted"] == 4 and summary["scenarios_read"] == 5
        assert sorted(json.loads((out / "index.json").read_text())["scenes"]) == ["a0", "a1", "a2", "b0"]
    finally:
        ray.shutdown()


def test_convert_reads_the_tf_example_flavour(tmp_path: Path) -> None:
    from test_tf_example import make_example

    shard = tmp_path / "ex.tfrecord"
    write_records(shard, [make_example(f"ex{i}").SerializeToString() for i in range(2)])
    out = tmp_path / "out"
    assert main(["convert", str(shard), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenarios_read"] == 2 and summary["converted"] == 2
