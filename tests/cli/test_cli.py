"""End-to-end CLI on tiny settings: train → resume → eval → render → bench, and user errors."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
import torch

from scenefactory.checkpoint import load_checkpoint
from scenefactory.cli import main
from scenefactory.errors import CheckpointError
from scenefactory.io import atomic_write_bytes, write_json
from scenefactory.rl.driving import load_policy
from scenefactory.rl.driving_spec import TrainSpec
from scenefactory.rl.ppo import PPOConfig
from scenefactory.tasks.driving.config import DrivingTaskConfig

TINY = ["--worlds", "4", "--agents", "2", "--train-scenes", "3", "--seed", "3"]
METRIC_KEYS = (
    "goal_reach_rate",
    "collision_rate",
    "offroad_rate",
    "timeout_rate",
    "mean_peak_drac_mps2",
    "high_drac_rate",
    "near_miss_rate",
    "episodes",
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("train")
    assert (
        main(["train", "drive", "--engine", "kinematic", *TINY, "--iterations", "2", "--out", str(out)]) == 0
    )
    return out


def test_train_writes_checkpoint_history_config_and_curve(trained: Path) -> None:
    assert (trained / "checkpoints" / "latest.pt").is_file()
    assert (trained / "learning_curve.png").stat().st_size > 1000
    history = json.loads((trained / "history.json").read_text())
    assert [r["iteration"] for r in history] == [1, 2]
    cfg = json.loads((trained / "config.json").read_text())
    assert cfg["seed"] == 3 and cfg["task"]["num_worlds"] == 4
    assert any((trained / "tensorboard").iterdir())


def test_resume_continues_where_it_stopped(trained: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoints").mkdir()
    src = trained / "checkpoints" / "latest.pt"
    (out / "checkpoints" / "latest.pt").write_bytes(src.read_bytes())
    before = load_checkpoint(src)
    assert main(["train", "drive", *TINY, "--iterations", "3", "--out", str(out)]) == 0
    after = load_checkpoint(out / "checkpoints" / "latest.pt")
    assert after["iteration"] == 3
    assert [r["iteration"] for r in after["history"]] == [1, 2, 3]
    assert after["env_steps"] == before["env_steps"] * 3 // 2
    # a different setting refuses to resume into the same folder
    assert main(["train", "drive", *TINY[:-2], "--seed", "4", "--iterations", "4", "--out", str(out)]) == 2


def test_a_checkpoint_from_before_new_ppo_fields_still_resumes(trained: Path, tmp_path: Path) -> None:
    """Fields added to PPOConfig later (the recurrent actor's) take their defaults on resume."""
    data = load_checkpoint(trained / "checkpoints" / "latest.pt")
    for key in ("actor_rnn_type", "actor_rnn_hidden_dim"):
        del data["spec"]["ppo"][key]
    buf = io.BytesIO()
    torch.save(data, buf)
    atomic_write_bytes(tmp_path / "checkpoints" / "latest.pt", buf.getvalue())
    assert main(["train", "drive", *TINY, "--iterations", "3", "--out", str(tmp_path)]) == 0
    assert load_checkpoint(tmp_path / "checkpoints" / "latest.pt")["iteration"] == 3


def test_eval_writes_metrics_with_cis(trained: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    ckpt = trained / "checkpoints" / "latest.pt"
    assert (
        main(
            [
                "eval",
                "drive",
                "--checkpoint",
                str(ckpt),
                "--engine",
                "kinematic",
                "--episodes",
                "3",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    m = json.loads((out / "metrics.json").read_text())
    for key in METRIC_KEYS:
        assert key in m
    for key in METRIC_KEYS[:-1]:
        assert len(m[f"{key}_ci95"]) == 2
    assert m["scenes"] == 3 and m["episodes"] >= 3
    rates = sum(m[k] for k in ("goal_reach_rate", "collision_rate", "offroad_rate", "timeout_rate"))
    assert rates == pytest.approx(1.0)
    assert m["scene_split"] == "eval"  # held-out seeds; disjointness is tested in test_procedural


def test_render_writes_a_gif(trained: Path, tmp_path: Path) -> None:
    out = tmp_path / "video.gif"
    ckpt = trained / "checkpoints" / "latest.pt"
    assert main(["render", "drive", "--checkpoint", str(ckpt), "--panels", "2", "--out", str(out)]) == 0
    assert out.read_bytes()[:6] in (b"GIF89a", b"GIF87a")


@pytest.mark.slow
def test_render_and_eval_write_the_html_replay(trained: Path, tmp_path: Path) -> None:
    """``render drive --format html`` and ``eval drive --html-worlds`` write the replay page
    (``tests/evaluation/test_browser.py`` opens one in a browser)."""
    import base64
    import gzip
    import re

    def worlds(page: Path) -> list[dict]:
        blob = re.search(r'id="replay-data" type="application/octet-stream">([^<]*)<', page.read_text())
        assert blob is not None
        return json.loads(gzip.decompress(base64.b64decode(blob.group(1))))["worlds"]

    ckpt = str(trained / "checkpoints" / "latest.pt")
    page = tmp_path / "replay.html"
    assert (
        main(
            ["render", "drive", "--checkpoint", ckpt, "--panels", "1", "--format", "html", "--out", str(page)]
        )
        == 0
    )
    assert len(worlds(page)) == 1 and not (tmp_path / "replay.gif").exists()
    out = tmp_path / "eval"
    argv = ["eval", "drive", "--checkpoint", ckpt, "--episodes", "1", "--html-worlds", "1", "--out", str(out)]
    assert main(argv) == 0
    shown = worlds(out / "episodes.html")
    assert len(shown) == 1 and shown[0]["agents"]["slot"]


@pytest.mark.parametrize("engine", ["kinematic", "mujoco"])
@pytest.mark.parametrize("baseline", [False, True])
def test_bench_reports_casps(tmp_path: Path, baseline: bool, engine: str) -> None:
    out = tmp_path / "bench.json"
    args = ["bench", "drive", "--engine", engine, "--worlds", "2", "--agents", "2", "--steps", "2"]
    rates = ["--physics-hz", "120", "--policy-hz", "30"]
    assert main([*args, *rates, *(["--baseline"] if baseline else []), "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["casps"] > 0 and r["baseline"] is baseline
    assert r["worlds"] == 2 and r["agents_per_world"] == 2 and r["engine"] == engine
    assert r["policy_hz"] == 30.0
    assert "cpu_count" in r["machine"]


def test_bench_random_actions_time_the_simulator_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scenefactory.cli.drive import BENCH_ACTIONS
    from scenefactory.evaluation.bench import BENCH_ACTIONS as EVALUATION_BENCH_ACTIONS

    assert BENCH_ACTIONS == EVALUATION_BENCH_ACTIONS  # the CLI's copy (start-up time) is the same
    out = tmp_path / "bench.json"
    args = ["bench", "drive", "--worlds", "3", "--agents", "2", "--steps", "3", "--actions", "random"]
    assert main([*args, "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["actions"] == "random" and r["casps"] > 0 and r["active_slot_fraction"] > 0
    assert r["torch_threads"] == torch.get_num_threads()
    assert main([*args, "--baseline", "--out", str(out)]) == 2
    assert "--baseline steps the policy agent by agent" in capsys.readouterr().err


def test_user_errors_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "drive", "--worlds", "0", "--out", str(tmp_path)]) == 2
    assert "argument --worlds: expected an integer in [1, 8192], got 0" in capsys.readouterr().err
    assert main(["bench", "drive", "--engine", "warp9", "--out", str(tmp_path / "b.json")]) == 2
    assert "unknown engine 'warp9'" in capsys.readouterr().err
    missing = tmp_path / "nope.pt"
    assert main(["eval", "drive", "--checkpoint", str(missing), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "checkpoint not found" in err and "Traceback" not in err
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    assert main(["eval", "drive", "--checkpoint", str(junk), "--out", str(tmp_path)]) == 2
    assert "not a readable torch" in capsys.readouterr().err
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": 1}, foreign)
    assert main(["render", "drive", "--checkpoint", str(foreign), "--out", str(tmp_path / "v.gif")]) == 2
    assert "not a scenefactory checkpoint" in capsys.readouterr().err


def test_incompatible_checkpoint_task_is_refused(trained: Path, tmp_path: Path) -> None:
    data = load_checkpoint(trained / "checkpoints" / "latest.pt")
    data["task"] = "go1"
    path = tmp_path / "go1.pt"
    torch.save(data, path)
    with pytest.raises(Exception, match="task 'go1', expected 'drive'"):
        load_policy(path)


def test_recurrent_driving_actors_are_refused(trained: Path, tmp_path: Path) -> None:
    """Driving rollouts keep no hidden state, so a recurrent driving actor is an error, not a
    policy that silently carries its memory across episode resets."""
    with pytest.raises(ValueError, match=r"ppo\.actor_rnn_type must be None for driving, got 'gru'"):
        TrainSpec(task=DrivingTaskConfig(), ppo=PPOConfig(actor_rnn_type="gru"))
    data = load_checkpoint(trained / "checkpoints" / "latest.pt")
    data["ppo_cfg"] = {**data["ppo_cfg"], "actor_rnn_type": "gru"}
    path = tmp_path / "gru.pt"
    torch.save(data, path)
    with pytest.raises(CheckpointError, match=r"gru\.pt: a recurrent \(gru\) driving actor"):
        load_policy(path)


def test_atomic_writes_get_a_plain_files_permissions(tmp_path: Path) -> None:
    """Not the owner-only 0o600 of the temporary file they are written through."""
    old = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "a.pt", b"x")
        write_json(tmp_path / "b.json", {"x": 1})
        assert (tmp_path / "a.pt").stat().st_mode & 0o777 == 0o644
        assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        atomic_write_bytes(tmp_path / "c.pt", b"x")
        assert (tmp_path / "c.pt").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_atomic_write_keeps_the_old_file_when_the_write_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "latest.pt"
    atomic_write_bytes(target, b"good")

    def boom(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_bytes(target, b"half")
    assert target.read_bytes() == b"good"
    assert [p.name for p in tmp_path.iterdir()] == ["latest.pt"]  # no temp file left behind


@pytest.mark.slow
def test_transfer_experiment_writes_the_two_by_two_table(trained: Path, tmp_path: Path) -> None:
    ckpt = trained / "checkpoints" / "latest.pt"
    mj = tmp_path / "mj"  # the mujoco tier's kind takes a mujoco-trained policy
    tiny = [*TINY, "--iterations", "1", "--out", str(mj)]
    assert main(["train", "drive", "--engine", "mujoco", "--physics-hz", "100", *tiny]) == 0
    out = tmp_path / "transfer"
    mj_ckpt = mj / "checkpoints" / "latest.pt"
    args = [
        "experiment",
        "transfer",
        "--checkpoint",
        f"kinematic={ckpt}",
        "--checkpoint",
        f"mujoco={mj_ckpt}",
    ]
    assert main([*args, "--episodes", "2", "--out", str(out)]) == 0
    result = json.loads((out / "transfer.json").read_text())
    assert sorted(result["cells"]) == [
        "kinematic->kinematic",
        "kinematic->mujoco",
        "mujoco->kinematic",
        "mujoco->mujoco",
    ]
    assert all(c["episodes"] >= 2 for c in result["cells"].values())
    assert (out / "transfer.md").read_text().count("\n") == 6
    assert (out / "mujoco_on_mujoco" / "metrics.json").is_file()


def test_validate_vehicle_cli(tmp_path: Path) -> None:
    assert main(["validate", "vehicle", "--surface", "dry", "--surface", "ice", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "validation.json").read_text())
    assert set(result["conditions"]) == {"dry", "ice"} and result["passed"]
    assert (tmp_path / "validation.png").stat().st_size > 10_000


def test_scenes_folder_for_train_eval_render_and_malformed_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scenefactory.scenes.library import procedural_scenes
    from scenefactory.scenes.scene_json import save_scene

    folder = tmp_path / "scenes"
    for sc in procedural_scenes("eval", 2, 2, kinds=("straight", "roundabout")):
        save_scene(sc, folder / f"{sc.name}.json")
    run = tmp_path / "run"
    args = ["--worlds", "2", "--agents", "2", "--iterations", "1", "--scenes", str(folder), "--out", str(run)]
    assert main(["train", "drive", *args]) == 0
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["scene_source"].startswith("dir:") and cfg["num_train_scenes"] == 0
    ckpt = str(run / "checkpoints" / "latest.pt")
    out = tmp_path / "eval"
    assert main(["eval", "drive", "--checkpoint", ckpt, "--scenes", str(folder), "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["scenes"] == 2 and m["scene_split"].startswith("dir:")
    gif = tmp_path / "v.gif"
    assert main(["render", "drive", "--checkpoint", ckpt, "--scenes", str(folder), "--out", str(gif)]) == 0
    # a malformed scene file: one line naming the file and the field, exit 2
    bad = folder / "zz-bad.json"
    data = json.loads((folder / "straight-1000000.json").read_text())
    data["roadgraph"]["lanes"][0]["width_m"][0] = -3.5
    bad.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["eval", "drive", "--checkpoint", ckpt, "--scenes", str(folder), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "zz-bad.json" in err and "roadgraph.lanes[0].width_m" in err and "Traceback" not in err
