"""Checkpoints: a malicious pickle is refused without running on every loader, hand-edited or
diverged checkpoints get one-line errors, a corrupt ``latest.pt`` falls back, and a killed run
resumes bit for bit."""

from __future__ import annotations

import io
import json
import os
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from scenefactory.checkpoint import load_checkpoint, safe_torch_load, save_checkpoint, to_plain
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import CheckpointError, UserError
from scenefactory.go1.config import Go1TaskConfig
from scenefactory.go1.train import Go1Trainer, Go1TrainSpec, go1_ppo_config
from scenefactory.grounding.dataset import _read_shard
from scenefactory.io import atomic_write_bytes
from scenefactory.rl.driving import Trainer, load_policy
from scenefactory.rl.driving_spec import TrainSpec, engine_of_saved_spec, resume_checkpoint
from scenefactory.rl.ppo import PPOConfig
from scenefactory.scenes.library import procedural_scenes
from scenefactory.tasks.driving.config import DrivingTaskConfig

MARKER_ENV = "SCENEFACTORY_TEST_PWNED"


class _Payload:
    """Unpickling this runs ``os.system`` (writes a marker file): what an attacker would plant."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _malicious(path: Path, marker: Path, legacy: bool = False) -> Path:
    """A file that looks like a scenefactory checkpoint and runs code if unpickled."""
    payload = {"format": "scenefactory.checkpoint/1", "task": "drive", "evil": _Payload(marker)}
    if legacy:
        path.write_bytes(pickle.dumps(payload))
    else:
        buf = io.BytesIO()
        torch.save(payload, buf)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(buf.getvalue())
    return path


def _tiny_spec(iterations: int, engine: EngineSpec = EngineSpec(), seed: int = 1) -> TrainSpec:
    task = DrivingTaskConfig(num_worlds=3, agents_per_world=2, episode_length_s=3.0)
    ppo = PPOConfig(num_steps_per_env=8, num_mini_batches=2, num_learning_epochs=2, save_interval=2)
    return TrainSpec(task=task, ppo=ppo, engine=engine, iterations=iterations, seed=seed, num_train_scenes=4)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-iteration kinematic run's folder."""
    out = tmp_path_factory.mktemp("ckpt")
    spec = _tiny_spec(2)
    Trainer(spec, procedural_scenes("train", spec.num_train_scenes, spec.task.agents_per_world), out).run()
    return out


# ------------------------------------------------------------------------------------ security


@pytest.mark.parametrize("legacy", [False, True])
def test_a_malicious_checkpoint_is_refused_without_running(tmp_path: Path, legacy: bool) -> None:
    marker = tmp_path / "pwned"
    path = _malicious(tmp_path / "evil.pt", marker, legacy)
    with pytest.raises(CheckpointError, match=r"refused|not a readable") as err:
        load_checkpoint(path)
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)
    assert not marker.exists()


def _commands(ckpt: Path, out: Path) -> list[list[str]]:
    """Every command that loads a checkpoint, pointed at ``ckpt``."""
    d = str(ckpt)
    return [
        ["eval", "drive", "--checkpoint", d, "--episodes", "1", "--out", str(out / "e")],
        [
            "benchmark",
            "wosac",
            "--scenes",
            str(out),
            "--policy",
            "checkpoint",
            "--checkpoint",
            d,
            "--out",
            str(out / "w"),
        ],
        ["render", "drive", "--checkpoint", d, "--out", str(out / "r.gif")],
        ["eval", "go1", "--checkpoint", d, "--out", str(out / "g")],
        ["render", "go1", "--checkpoint", d, "--out", str(out / "rg")],
        ["export", "go1", "--checkpoint", d, "--out", str(out / "x")],
        ["deploy", "go1", "--checkpoint", d, "--out", str(out / "d")],
        ["train", "go1", "--init-from", d, "--iterations", "1", "--envs", "4", "--out", str(out / "i")],
        ["train", "go1", "--teacher", d, "--iterations", "1", "--envs", "4", "--out", str(out / "t")],
        ["collect", "drive", "--engine", "kinematic", "--checkpoint", d, "--out", str(out / "c")],
        ["bench", "drive", "--engine", "learned", "--dynamics-model", d, "--out", str(out / "b.json")],
        [
            "eval",
            "drive",
            "--policy",
            "expert",
            "--engine",
            "learned",
            "--dynamics-model",
            d,
            "--out",
            str(out / "l"),
        ],
        ["experiment", "transfer", "--quick", "--checkpoint", f"kinematic={d}", "--out", str(out / "xp")],
    ]


def test_every_command_refuses_a_malicious_checkpoint(
    tmp_path: Path, cli_error: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "pwned"
    evil = _malicious(tmp_path / "evil.pt", marker)
    for argv in _commands(evil, tmp_path):
        line = cli_error(*argv)
        assert "evil.pt" in line, (argv, line)
        assert not marker.exists(), argv


def test_grounding_weights_and_dataset_shards_are_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = _malicious(tmp_path / "weights.pt", marker)
    with pytest.raises(CheckpointError, match="refused"):
        safe_torch_load(evil, evil.read_bytes())
    shard = tmp_path / "shard_00000.npz"
    np.savez(shard, obs=np.array([_Payload(marker)], dtype=object))
    with pytest.raises(UserError, match=r"shard_00000.npz: not a readable dataset shard"):
        _read_shard(shard)
    assert not marker.exists()


def test_train_resume_refuses_a_planted_latest(tmp_path: Path, cli_error: Any) -> None:
    marker = tmp_path / "pwned"
    _malicious(tmp_path / "run" / "checkpoints" / "latest.pt", marker)
    tiny = ["--worlds", "2", "--agents", "2", "--train-scenes", "2", "--iterations", "1"]
    line = cli_error("train", "drive", *tiny, "--out", str(tmp_path / "run"))
    assert "refused" in line and not marker.exists()
    _malicious(tmp_path / "go1" / "checkpoints" / "latest.pt", marker)
    line = cli_error("train", "go1", "--envs", "4", "--iterations", "1", "--out", str(tmp_path / "go1"))
    assert "refused" in line and not marker.exists()


def test_every_checkpoint_written_is_plain_data(trained: Path) -> None:
    """What training writes loads with the restricted reader (load_checkpoint uses nothing else)."""
    for f in sorted((trained / "checkpoints").glob("*.pt")):
        data = torch.load(f, map_location="cpu", weights_only=True)
        assert data["format"] == "scenefactory.checkpoint/1"
        assert "env_state" in data and "rng" in data


def test_save_refuses_objects_and_converts_numpy() -> None:
    assert to_plain({"a": np.float64(1.5), "b": [np.int32(2)]}) == {"a": 1.5, "b": [2]}
    assert type(to_plain({"a": np.float64(1.5)})["a"]) is float
    with pytest.raises(TypeError, match=r"checkpoint\.cfg is a .*Path"):
        to_plain({"cfg": Path("x")})


# ------------------------------------------------------------------- hand-edited and diverged


def _edited(trained: Path, tmp_path: Path, edit: Any) -> Path:
    data = load_checkpoint(trained / "checkpoints" / "latest.pt")
    edit(data)
    path = tmp_path / "edited.pt"
    buf = io.BytesIO()
    torch.save(data, buf)
    atomic_write_bytes(path, buf.getvalue())
    return path


def _drop(key: str) -> Any:
    return lambda d: d.pop(key)


def _nan_weights(d: dict[str, Any]) -> None:
    first = next(k for k, v in d["actor_state_dict"].items() if v.is_floating_point() and v.dim() == 2)
    d["actor_state_dict"][first][0, 0] = float("nan")


def _wider_obs(d: dict[str, Any]) -> None:
    d["obs_dim"] += 3


def _unknown_task_field(d: dict[str, Any]) -> None:
    d["task_cfg"]["not_a_field"] = 1


def _unknown_ppo_field(d: dict[str, Any]) -> None:
    d["ppo_cfg"]["not_a_field"] = 1


def _bad_ppo_value(d: dict[str, Any]) -> None:
    d["ppo_cfg"]["gamma"] = 7.0


def _string_obs(d: dict[str, Any]) -> None:
    d["obs_dim"] = "many"


def _missing_layer(d: dict[str, Any]) -> None:
    d["actor_state_dict"].pop(next(iter(d["actor_state_dict"])))


EDITS = {
    "actor_state_dict": _drop("actor_state_dict"),
    "task_cfg": _drop("task_cfg"),
    "ppo_cfg": _drop("ppo_cfg"),
    "obs_dim": _drop("obs_dim"),
    "NaN": _nan_weights,
    "wider": _wider_obs,
    "task field": _unknown_task_field,
    "ppo field": _unknown_ppo_field,
    "gamma": _bad_ppo_value,
    "string": _string_obs,
    "lacks": _missing_layer,
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_hand_edited_checkpoints_get_one_line_errors(
    name: str, trained: Path, tmp_path: Path, cli_error: Any
) -> None:
    path = _edited(trained, tmp_path, EDITS[name])
    with pytest.raises(CheckpointError) as err:
        load_policy(path)
    msg = str(err.value)
    assert msg.startswith(str(path)) and "\n" not in msg
    line = cli_error(
        "eval", "drive", "--checkpoint", str(path), "--episodes", "1", "--out", str(tmp_path / "e")
    )
    assert str(path) in line


@given(
    key=st.sampled_from(["task_cfg", "ppo_cfg", "obs_dim", "actor_state_dict", "iteration"]),
    value=st.one_of(
        st.none(),
        st.integers(-5, 5),
        st.floats(allow_nan=True),
        st.text(max_size=5),
        st.lists(st.integers(), max_size=3),
    ),
)
def test_any_value_in_any_policy_field_is_a_checkpoint_error(
    key: str, value: Any, trained: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Fuzz: whatever a field holds, loading fails with a CheckpointError or succeeds; never another
    exception (which the CLI would show as a traceback)."""
    tmp = tmp_path_factory.mktemp("fuzz")

    def edit(d: dict[str, Any]) -> None:
        d[key] = value

    path = _edited(trained, tmp, edit)
    try:
        load_policy(path)
    except CheckpointError as exc:
        assert "\n" not in str(exc)


def test_resume_with_diverged_weights_is_refused(trained: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    path = _edited(trained, tmp_path, _nan_weights)
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "latest.pt").write_bytes(path.read_bytes())
    spec = _tiny_spec(3)
    with pytest.raises(CheckpointError, match="NaN"):
        Trainer(spec, procedural_scenes("train", 4, 2), run)


# -------------------------------------------------------------------- corrupt latest, config


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "missing"])
def test_a_corrupt_latest_falls_back_to_the_newest_readable_model(
    damage: str, trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    for f in (trained / "checkpoints").glob("*.pt"):
        (ckpts / f.name).write_bytes(f.read_bytes())
    latest = ckpts / "latest.pt"
    blob = latest.read_bytes()
    if damage == "missing":
        latest.unlink()
    else:
        latest.write_bytes(
            {"truncate": blob[: len(blob) // 2], "garbage": os.urandom(999), "empty": b""}[damage]
        )
    data = load_checkpoint(tmp_path)
    assert data["iteration"] == 2
    err = capsys.readouterr().err
    assert "warning" in err and "model_2.pt" in err and err.count("\n") == 1
    # the newest is damaged too: the one before it
    (ckpts / "model_2.pt").write_bytes(b"")
    (ckpts / "model_1.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"no model_<N>\.pt beside it is readable"):
        load_checkpoint(tmp_path)


def test_a_smaller_iterations_rerun_changes_nothing(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for f in ("config.json", "checkpoints/latest.pt", "checkpoints/model_2.pt"):
        (run / f).write_bytes((trained / f).read_bytes())
    before = {f: (run / f).read_bytes() for f in ("config.json", "checkpoints/latest.pt")}
    spec = _tiny_spec(1)
    Trainer(spec, procedural_scenes("train", 4, 2), run).run()
    assert {f: (run / f).read_bytes() for f in before} == before
    assert "already holds 2 iterations" in capsys.readouterr().err


# ------------------------------------------------------------------------------ exact resume


def _weights(path: Path) -> dict[str, torch.Tensor]:
    data = load_checkpoint(path)
    out = {f"actor.{k}": v for k, v in data["actor_state_dict"].items()}
    out.update({f"critic.{k}": v for k, v in data["critic_state_dict"].items()})
    return out


@pytest.mark.parametrize("engine", ["kinematic", "mujoco"])
def test_a_killed_and_resumed_run_is_bit_identical(engine: str, tmp_path: Path) -> None:
    """Run A trains 6 iterations straight; run B stops after 2 (its last checkpoint) and a new process
    state resumes it to 6: every saved model and the history match exactly."""
    spec = _tiny_spec(6, EngineSpec(engine, physics_hz=100.0) if engine == "mujoco" else EngineSpec(engine))
    scenes = procedural_scenes("train", spec.num_train_scenes, spec.task.agents_per_world)
    Trainer(spec, scenes, tmp_path / "a").run()
    Trainer(replace(spec, iterations=2), scenes, tmp_path / "b").run()
    torch.manual_seed(12345)  # a new process: the global generators are elsewhere
    resumed = Trainer(spec, scenes, tmp_path / "b")
    assert resumed.iteration == 2
    resumed.run()
    for it in (4, 6):
        a = _weights(tmp_path / "a" / "checkpoints" / f"model_{it}.pt")
        b = _weights(tmp_path / "b" / "checkpoints" / f"model_{it}.pt")
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), (it, k)
    ha = load_checkpoint(tmp_path / "a" / "checkpoints" / "latest.pt")["history"]
    hb = load_checkpoint(tmp_path / "b" / "checkpoints" / "latest.pt")["history"]
    strip = ("steps_per_s", "collect_s", "learn_s")

    def same(rows: list[dict[str, Any]]) -> str:  # NaN != NaN, but its text is equal
        return json.dumps([{k: v for k, v in r.items() if k not in strip} for r in rows])

    assert same(ha) == same(hb)


def test_checkpoints_with_an_env_state_of_another_size_are_refused(trained: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "latest.pt").write_bytes((trained / "checkpoints" / "latest.pt").read_bytes())
    data = load_checkpoint(run)
    data["env_state"]["episode"]["s_prev"] = torch.zeros(7, 7)
    save_checkpoint(run / "checkpoints" / "latest.pt", data)
    with pytest.raises(CheckpointError, match="s_prev"):
        Trainer(_tiny_spec(3), procedural_scenes("train", 4, 2), run)


@pytest.mark.parametrize("legacy", [False, True])
def test_a_killed_and_resumed_go1_run_is_bit_identical(legacy: bool, tmp_path: Path) -> None:
    """The same for the Go1 task (randomized physics, pushes, curriculum, MuJoCo state); also from
    a checkpoint that names the running sums as Go1 runs did before the loop was shared."""
    ppo = replace(go1_ppo_config(), num_steps_per_env=4, save_interval=1, num_mini_batches=2)
    spec = Go1TrainSpec(task=Go1TaskConfig(num_envs=6), ppo=ppo, iterations=3, seed=5)
    Go1Trainer(spec, tmp_path / "a", nthread=1).run()
    Go1Trainer(replace(spec, iterations=1), tmp_path / "b", nthread=1).run()
    latest = tmp_path / "b" / "checkpoints" / "latest.pt"
    if legacy:
        data = load_checkpoint(latest)
        data["ret_sum"], data["ep_len_sum"] = data.pop("return_sum"), data.pop("length_sum")
        save_checkpoint(latest, data)
    torch.manual_seed(999)
    resumed = Go1Trainer(spec, tmp_path / "b", nthread=1)
    assert resumed.iteration == 1
    saved = load_checkpoint(tmp_path / "b" / "checkpoints" / "model_1.pt")
    assert bool((resumed.length_sum > 0).all())
    assert torch.equal(resumed.return_sum, saved["return_sum"])
    assert torch.equal(resumed.length_sum, saved["length_sum"])
    resumed.run()
    for it in (2, 3):
        a = _weights(tmp_path / "a" / "checkpoints" / f"model_{it}.pt")
        b = _weights(tmp_path / "b" / "checkpoints" / f"model_{it}.pt")
        for k in a:
            assert torch.equal(a[k], b[k]), (it, k)
    strip = ("steps_per_s", "collect_s", "learn_s")
    ha, hb = (json.loads((tmp_path / r / "history.json").read_text()) for r in ("a", "b"))
    assert [{k: v for k, v in r.items() if k not in strip} for r in ha] == [
        {k: v for k, v in r.items() if k not in strip} for r in hb
    ]


# --------------------------------------------------------------- specs written before EngineSpec


def _flat_engine(d: dict[str, Any]) -> None:
    """The run's spec as runs wrote it before the engine was one EngineSpec entry."""
    engine = d["spec"].pop("engine")
    d["spec"].update(
        engine=engine["tier"], physics_hz=engine["physics_hz"], dynamics_model=engine["dynamics_model"]
    )


def test_a_run_with_the_flat_engine_spec_resumes_and_evaluates(trained: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    _edited(trained, tmp_path, _flat_engine).rename(run / "checkpoints" / "latest.pt")
    assert load_checkpoint(run)["spec"]["engine"] == "kinematic"
    policy = load_policy(run / "checkpoints" / "latest.pt")
    assert policy.engine == EngineSpec() and policy.meta["engine"] == "kinematic"
    with pytest.raises(CheckpointError, match="the saved run's 'engine' differs"):
        resume_checkpoint(_tiny_spec(3, EngineSpec(action_lag_steps=1)), run)
    trainer = Trainer(_tiny_spec(3), procedural_scenes("train", 4, 2), run)
    assert trainer.iteration == 2
    trainer.run()
    data = load_checkpoint(run)
    assert data["iteration"] == 3 and data["spec"]["engine"] == EngineSpec().to_dict()
    assert json.loads((run / "config.json").read_text())["engine"] == EngineSpec().to_dict()


def test_a_flat_spec_keeps_every_engine_setting() -> None:
    flat = {
        "engine": "grounded",
        "physics_hz": 120.0,
        "dynamics_model": None,
        "grounding": "g",
        "action_lag_steps": 2,
    }
    assert engine_of_saved_spec("x.pt", flat) == EngineSpec(
        "grounded", grounding=Path("g"), action_lag_steps=2
    )
    learned = {"engine": {"tier": "learned", "dynamics_model": "m.pt", "physics_hz": 60.0}}
    assert engine_of_saved_spec("x.pt", learned) == EngineSpec("learned", 60.0, dynamics_model=Path("m.pt"))
    for bad in ({"engine": "warp"}, {"engine": 3}, {"engine": {"tier": "mujoco", "hz": 1}}, {}):
        with pytest.raises(CheckpointError, match=r"^x\.pt: the run's 'spec\.engine'"):
            engine_of_saved_spec("x.pt", bad)


def _nan_critic(d: dict[str, Any]) -> None:
    first = next(k for k, v in d["critic_state_dict"].items() if v.is_floating_point() and v.dim() == 2)
    d["critic_state_dict"][first][0, 0] = float("nan")


def _huge_log_std(d: dict[str, Any]) -> None:
    key = next(k for k in d["actor_state_dict"] if "log_std" in k)
    d["actor_state_dict"][key] = torch.full_like(d["actor_state_dict"][key], 1e30)


def _short_rng(d: dict[str, Any]) -> None:
    d["rng"]["torch"] = torch.zeros(10, dtype=torch.uint8)


def _env_state_shape(d: dict[str, Any]) -> None:
    d["env_state"]["episode"]["scene_id"] = torch.zeros(7, dtype=torch.long)


def _activation(d: dict[str, Any]) -> None:
    d["ppo_cfg"]["activation"] = "sparkle"


RESUME_EDITS = {
    "critic NaN": _nan_critic,
    "log_std": _huge_log_std,
    "rng": _short_rng,
    "env_state": _env_state_shape,
    "activation": _activation,
    "optimizer": _drop("optimizer_state_dict"),
    "iteration": lambda d: d.update(iteration=-1),
    "env_steps": lambda d: d.update(env_steps="many"),
    "obs_dim": _wider_obs,
    "task": lambda d: d.update(task="go1"),
    "engine": lambda d: d.update(engine="warp"),
}


@pytest.mark.parametrize("name", sorted(RESUME_EDITS))
def test_a_hand_edited_checkpoint_is_refused_at_resume_before_any_scene(
    name: str, trained: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    _edited(trained, tmp_path, RESUME_EDITS[name]).rename(run / "checkpoints" / "latest.pt")
    with pytest.raises(CheckpointError) as err:
        resume_checkpoint(_tiny_spec(3), run)
    assert "\n" not in str(err.value)


def test_resume_refuses_a_checkpoints_file(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").write_text("not a folder")
    with pytest.raises(CheckpointError, match="is a file"):
        resume_checkpoint(_tiny_spec(3), tmp_path)


def test_experiment_refuses_a_policy_of_another_engine_as_its_kind(
    trained: Path, tmp_path: Path, cli_error: Any
) -> None:
    ckpt = str(trained / "checkpoints" / "latest.pt")
    line = cli_error(
        "experiment",
        "transfer",
        "--checkpoint",
        f"kinematic={ckpt}",
        "--checkpoint",
        f"mujoco={ckpt}",
        "--episodes",
        "1",
        "--out",
        str(tmp_path / "x"),
    )
    assert "trained on kinematic" in line
