"""Go1 end to end on tiny settings: train → resume → eval → export (ONNX = torch) → torch-free
deploy runner → sim-to-sim check, and the user errors of the go1 commands."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from scenefactory.checkpoint import HALF_MIN_NUMEL, load_checkpoint, save_checkpoint
from scenefactory.cli import main
from scenefactory.errors import CheckpointError, UserError
from scenefactory.go1 import evaluation as ev
from scenefactory.go1 import jobs as go1_jobs
from scenefactory.go1 import recipe as go1_recipe
from scenefactory.go1 import robot as go1
from scenefactory.go1.config import Go1TaskConfig, task_config_from_dict, task_config_to_dict
from scenefactory.go1.deploy.export import DeployPolicy, export_go1
from scenefactory.go1.deploy.robot import SIM2SIM, MujocoGo1
from scenefactory.go1.deploy.runner import OnnxPolicyRunner
from scenefactory.go1.observations import FRAME_DIM, frame_dim
from scenefactory.go1.recipes import GO1_RECIPES
from scenefactory.go1.terrain import column_kinds
from scenefactory.go1.train import Go1Trainer, Go1TrainSpec, go1_ppo_config, load_go1_policy
from scenefactory.rl.checkpoints import MAX_STAGE_BYTES, write_stage_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def tiny_spec(iterations: int = 2) -> Go1TrainSpec:
    ppo = replace(go1_ppo_config(), num_steps_per_env=4, save_interval=1, num_mini_batches=2)
    return Go1TrainSpec(task=Go1TaskConfig(num_envs=8), ppo=ppo, iterations=iterations, seed=5)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("go1")
    Go1Trainer(tiny_spec(2), out, nthread=1).run()
    return out


def test_training_writes_checkpoints_and_history(trained: Path) -> None:
    data = load_checkpoint(trained / "checkpoints" / "latest.pt")
    assert data["task"] == "go1" and data["iteration"] == 2
    assert (trained / "checkpoints" / "model_1.pt").is_file()
    hist = json.loads((trained / "history.json").read_text())
    assert [h["iteration"] for h in hist] == [1, 2]
    assert all(np.isfinite(h["loss_surrogate"]) for h in hist)
    assert data["ppo_cfg"]["critic_obs_group"] == "critic"


def test_resume_continues_and_refuses_other_settings(trained: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    out.mkdir()
    (out / "checkpoints").mkdir()
    (out / "checkpoints" / "latest.pt").write_bytes((trained / "checkpoints" / "latest.pt").read_bytes())
    t = Go1Trainer(tiny_spec(3), out, nthread=1)
    assert t.iteration == 2
    t.run()
    assert load_checkpoint(out / "checkpoints" / "latest.pt")["iteration"] == 3
    other = replace(tiny_spec(3), seed=6)
    with pytest.raises(CheckpointError, match="'seed' differs"):
        Go1Trainer(other, out, nthread=1)


def test_a_stage_checkpoint_resumes_the_run_with_a_fresh_optimizer(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file a long chain commits between sessions (``rl.checkpoints.write_stage_checkpoint``):
    well under 1 MB, no optimizer moments or saved worlds; copied to a run's ``latest.pt`` it resumes
    that run where it stopped, networks and learning rate as saved."""
    src = trained / "checkpoints" / "latest.pt"
    out = tmp_path / "resumed"
    (out / "checkpoints").mkdir(parents=True)
    size = write_stage_checkpoint(src, out / "checkpoints" / "latest.pt")
    assert size == (out / "checkpoints" / "latest.pt").stat().st_size < MAX_STAGE_BYTES
    stage = load_checkpoint(out / "checkpoints" / "latest.pt")
    full = load_checkpoint(src)
    assert "optimizer_state_dict" not in stage and "env_state" not in stage and stage["stage_checkpoint"]
    assert stage["learning_rate"] == full["optimizer_state_dict"]["param_groups"][0]["lr"]
    t = Go1Trainer(tiny_spec(3), out, nthread=1)
    assert t.iteration == 2
    assert "optimizer's moments start fresh" in capsys.readouterr().err
    actor = t.alg.get_policy().state_dict()
    for name, value in full["actor_state_dict"].items():  # weight matrices rounded to float16, the rest exact
        want = value.half().float() if value.numel() >= HALF_MIN_NUMEL and "normalizer" not in name else value
        assert actor[name].dtype == value.dtype and torch.equal(actor[name], want), name
    assert any(not torch.equal(actor[k], v) for k, v in full["actor_state_dict"].items())  # rounding happened
    assert json.dumps(stage["history"]) == json.dumps(full["history"])  # NaN != NaN
    assert t.alg.optimizer.param_groups[0]["lr"] == stage["learning_rate"]
    t.run()
    hist = json.loads((out / "history.json").read_text())
    assert [h["iteration"] for h in hist] == [1, 2, 3]
    # a checkpoint that is not a training checkpoint is refused, naming the field
    del full["optimizer_state_dict"]
    torch.save(full, tmp_path / "policy.pt")
    with pytest.raises(CheckpointError, match="optimizer_state_dict"):
        write_stage_checkpoint(tmp_path / "policy.pt", tmp_path / "stage.pt")


@pytest.mark.parametrize(("recipe", "stage"), [("rough", "run14"), ("rough-scan", "run32")])
def test_the_longest_terrain_stages_fit_the_stage_limit(
    trained: Path, tmp_path: Path, recipe: str, stage: str
) -> None:
    """The stage files a terrain chain commits fit 1 MB at the stage's full length: the 25-frame blind
    actor with the rough chain's longest history (850 iterations) and the scan actor with the
    rough-scan chain's (600). The networks are the stages' own (built for 2 robots); the history rows
    are this run's, each value jittered by 1e-3 so that no row repeats (as in a real run)."""
    picked = next(s for s in GO1_RECIPES[recipe].stages if s.name == stage)
    start = tmp_path / "start.pt"
    start.touch()  # train_spec checks a fine-tune's start exists; the trainer below starts fresh
    spec = go1_recipe.train_spec(2, picked.iterations, 0, replace(picked.options, init_from=start))
    t = Go1Trainer(replace(spec, init_from=None), tmp_path / "run", nthread=1)
    assert t.env.curriculum is not None
    t.env.curriculum.levels[...] = [t.env.curriculum.num_levels - 1, 1]  # reached levels, kept by the stage
    row = json.loads((trained / "history.json").read_text())[-1]
    gen = np.random.default_rng(0)

    def jittered(i: int) -> dict[str, object]:
        noise = 1 + 1e-3 * gen.standard_normal(len(row))
        pairs = zip(row.items(), noise, strict=True)
        values = {k: v * e if isinstance(v, float) else v for (k, v), e in pairs}
        return {**values, "iteration": i + 1}

    payload = {**t.payload(), "history": [jittered(i) for i in range(picked.iterations)]}
    save_checkpoint(tmp_path / "full.pt", payload)
    size = write_stage_checkpoint(tmp_path / "full.pt", tmp_path / "stage.pt")
    assert 0.5 * MAX_STAGE_BYTES < size <= MAX_STAGE_BYTES
    assert len(load_checkpoint(tmp_path / "stage.pt")["history"]) == picked.iterations
    resumed = tmp_path / "resumed" / "checkpoints"
    resumed.mkdir(parents=True)
    (resumed / "latest.pt").write_bytes((tmp_path / "stage.pt").read_bytes())
    again = Go1Trainer(replace(spec, init_from=None), resumed.parent, nthread=1)
    assert again.env.curriculum is not None and again.iteration == 0
    assert again.env.curriculum.levels.tolist() == t.env.curriculum.levels.tolist()


def test_fine_tune_starts_from_the_checkpoint_and_resumes_as_itself(trained: Path, tmp_path: Path) -> None:
    src = trained / "checkpoints" / "latest.pt"
    spec = replace(tiny_spec(1), init_from=str(src))
    t = Go1Trainer(spec, tmp_path / "ft", nthread=1)
    assert t.iteration == 0
    saved = load_checkpoint(src)["actor_state_dict"]
    for k, v in t.alg.get_policy().state_dict().items():
        torch.testing.assert_close(v, saved[k])
    t.run()
    again = Go1Trainer(replace(spec, iterations=2), tmp_path / "ft", nthread=1)
    assert again.iteration == 1  # its own checkpoint wins over init_from
    with pytest.raises(CheckpointError, match="'init_from' differs"):
        Go1Trainer(replace(spec, init_from=None), tmp_path / "ft", nthread=1)
    rnd = spec.task.randomization
    assert rnd is not None
    rnd = replace(rnd, joint_friction_scale=(0.8, 1.8))
    damped = replace(spec, task=replace(spec.task, randomization=rnd))
    with pytest.raises(CheckpointError, match="critic-warmup"):  # its critic reads one value more
        Go1Trainer(damped, tmp_path / "damped", nthread=1)
    t = Go1Trainer(replace(damped, critic_warmup=1), tmp_path / "damped", nthread=1)
    for k, v in t.alg.get_policy().state_dict().items():
        torch.testing.assert_close(v, saved[k])
    longer = Go1Trainer(replace(spec, task=replace(spec.task, history=5)), tmp_path / "longer", nthread=1)
    obs = longer.vec.get_observations()
    assert obs["policy"].shape[1] == 5 * FRAME_DIM
    obs["policy"][:, 3 * FRAME_DIM :] = torch.randn(obs["policy"].shape[0], 2 * FRAME_DIM)
    before = load_go1_policy(src).act(obs["policy"][:, : 3 * FRAME_DIM])
    with torch.no_grad():  # the two older frames start at zero weight: the same actions, whatever they hold
        after = longer.alg.get_policy()(obs)
    torch.testing.assert_close(after, before)
    widened = longer.alg.get_policy().state_dict()
    saved_actor = load_checkpoint(src)["actor_state_dict"]
    for stat in ("obs_normalizer._mean", "obs_normalizer._std"):  # the older frames: the newest's
        assert widened[stat].shape[-1] == 5 * FRAME_DIM
        newest = saved_actor[stat][..., :FRAME_DIM]
        for f in range(5):
            expected = saved_actor[stat][..., f * FRAME_DIM : (f + 1) * FRAME_DIM] if f < 3 else newest
            torch.testing.assert_close(widened[stat][..., f * FRAME_DIM : (f + 1) * FRAME_DIM], expected)
    saved_critic = load_checkpoint(src)["critic_state_dict"]
    for k, v in longer.alg.critic.state_dict().items():  # the critic reads no history: kept
        torch.testing.assert_close(v, saved_critic[k])
    longer.run()  # PPO trains the widened actor with a fresh optimizer
    shorter = replace(spec, task=replace(spec.task, history=2))
    with pytest.raises(CheckpointError, match=r"reads 3 frames, this task.s 2 \(a fine-tune may add frames"):
        Go1Trainer(shorter, tmp_path / "shorter", nthread=1)


def test_export_round_trip_onnx_equals_torch(trained: Path, tmp_path: Path) -> None:
    policy = load_go1_policy(trained / "checkpoints" / "latest.pt")
    with torch.no_grad():  # non-trivial normalizer statistics, so normalization is really exercised
        policy.actor.obs_normalizer._mean.uniform_(-1.0, 1.0)
        policy.actor.obs_normalizer._std.uniform_(0.5, 2.0)
    paths = export_go1(policy, tmp_path)
    obs = torch.randn(16, policy.task_cfg.history * 45, generator=torch.Generator().manual_seed(0)) * 2
    sess = ort.InferenceSession(str(paths["onnx"]), providers=["CPUExecutionProvider"])
    action, targets = sess.run(None, {"obs": obs.numpy()})
    with torch.no_grad():
        ref_action, ref_targets = DeployPolicy(policy)(obs)
        act = policy.act(obs).clamp(-policy.task_cfg.action_clip, policy.task_cfg.action_clip)
    np.testing.assert_allclose(action, ref_action.numpy(), atol=1e-5)
    np.testing.assert_allclose(action, act.numpy(), atol=1e-5)
    np.testing.assert_allclose(
        targets, go1.default_joint_pos() + policy.task_cfg.action_scale * action, atol=1e-5
    )
    np.testing.assert_allclose(targets, ref_targets.numpy(), atol=1e-5)
    side = json.loads(paths["sidecar"].read_text())
    assert side["joint_names"] == list(go1.JOINT_NAMES)
    assert side["control_hz"] == 50.0 and side["kp"] == go1.DEFAULT_KP
    assert side["observation"]["history"] == 3 and side["observation"]["frame_dim"] == 45


def test_half_precision_export_ships_one_policy_in_both_files(trained: Path, tmp_path: Path) -> None:
    """``export go1 --half-precision``: policy.pt packed (float16 weight matrices, LZMA) and the ONNX
    exported from that file as read back, so they act alike; the float32 policy differs only by the
    rounding."""
    ckpt = trained / "checkpoints" / "latest.pt"
    full = go1_jobs.export(go1_jobs.Go1ExportArgs(out=tmp_path / "full", checkpoint=ckpt))
    half = go1_jobs.export(
        go1_jobs.Go1ExportArgs(out=tmp_path / "half", checkpoint=ckpt, half_precision=True)
    )
    assert half["policy"].read_bytes()[:6] == b"\xfd7zXZ\x00"  # LZMA
    assert half["policy"].stat().st_size < full["policy"].stat().st_size / 2
    packed, exact = load_go1_policy(half["policy"]), load_go1_policy(ckpt)
    w_half = packed.actor.state_dict()
    w_full = exact.actor.state_dict()
    rounded = [k for k, v in w_full.items() if v.numel() >= HALF_MIN_NUMEL and "normalizer" not in k]
    assert rounded  # the tiny actor's hidden layers are full size
    for k, v in w_full.items():
        want = v.to(torch.float16).to(torch.float32) if k in rounded else v
        assert torch.equal(w_half[k], want), k
    obs = torch.randn(32, exact.task_cfg.history * 45, generator=torch.Generator().manual_seed(1))
    sess = ort.InferenceSession(str(half["onnx"]), providers=["CPUExecutionProvider"])
    action = sess.run(None, {"obs": obs.numpy()})[0]
    clip = exact.task_cfg.action_clip
    with torch.no_grad():
        np.testing.assert_allclose(action, packed.act(obs).clamp(-clip, clip).numpy(), atol=1e-5)
        gap = (packed.act(obs) - exact.act(obs)).abs().max().item()
    assert 0 < gap < 0.01  # rounded, not replaced
    assert (
        json.loads(half["sidecar"].read_text())["onnx_sha256"]
        != json.loads(full["sidecar"].read_text())["onnx_sha256"]
    )


def test_half_precision_benchmark_measures_and_checks_the_packed_file(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``benchmarks/half_precision.py``: the rounding's figures on a real (tiny) checkpoint, and exit
    1 when ``--packed`` is not that checkpoint rounded."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("half_precision", ROOT / "benchmarks" / "half_precision.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    ckpt = trained / "checkpoints" / "latest.pt"
    packed = go1_jobs.export(go1_jobs.Go1ExportArgs(out=tmp_path / "e", checkpoint=ckpt, half_precision=True))
    out = tmp_path / "hp.json"
    argv = ["half_precision.py", "--checkpoint", str(ckpt), "--obs", "64", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", [*argv, "--packed", str(packed["policy"])])
    assert bench.main() == 0
    r = json.loads(out.read_text())
    assert r["packed_bytes"] < r["float32_bytes"] / 2 and r["rounded_tensors"] >= 1
    assert 0 < r["max_relative_weight_error"] <= 2.0**-11
    assert 0 < r["mean_abs_action_difference"] <= r["max_abs_action_difference"] < 0.01
    other = tmp_path / "other"
    go1_jobs.export(go1_jobs.Go1ExportArgs(out=other, checkpoint=trained / "checkpoints" / "model_1.pt"))
    monkeypatch.setattr(sys, "argv", [*argv, "--packed", str(other / "policy.pt")])
    assert bench.main() == 1


def test_deploy_runner_needs_no_torch(trained: Path, tmp_path: Path) -> None:
    export_go1(load_go1_policy(trained / "checkpoints" / "latest.pt"), tmp_path)
    code = (
        "import sys, numpy as np\n"
        "from scenefactory.go1.deploy.runner import OnnxPolicyRunner\n"
        "from scenefactory.go1.deploy.robot import MujocoGo1, SIM2SIM\n"
        f"r = OnnxPolicyRunner({str(tmp_path)!r}); robot = MujocoGo1(SIM2SIM)\n"
        "for _ in range(5): r.step(robot, np.array([0.5, 0.0, 0.0]))\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_runner_history_matches_the_training_observations(trained: Path, tmp_path: Path) -> None:
    """The runner's stacked frames are the env's: the same reading → the same first frame."""
    export_go1(load_go1_policy(trained / "checkpoints" / "latest.pt"), tmp_path)
    runner = OnnxPolicyRunner(tmp_path)
    robot = MujocoGo1()
    r = robot.read()
    runner.act(r, np.array([1.0, 0.0, 0.5]))
    f = runner._frames
    assert (f[0] == f[1]).all() and (f[1] == f[2]).all()
    np.testing.assert_allclose(f[0][3:6], [0.0, 0.0, -1.0], atol=1e-6)
    np.testing.assert_allclose(f[0][6:9], [1.0, 0.0, 0.5])
    runner.act(robot.read(), np.array([1.0, 0.0, 0.5]))
    assert not (runner._frames[0][33:45] == 0).all()  # last action now filled in
    np.testing.assert_allclose(runner._frames[1][:33], f[0][:33])


def test_runner_checks_the_sidecar_against_the_graph(trained: Path, tmp_path: Path) -> None:
    """A sidecar that does not describe its ONNX graph is refused when the runner opens, not at the
    first tick on a robot."""
    export_go1(load_go1_policy(trained / "checkpoints" / "latest.pt"), tmp_path)
    side_path = tmp_path / "go1_policy.json"
    good = json.loads(side_path.read_text())

    def refused(side: dict[str, object], match: str) -> None:
        side_path.write_text(json.dumps(side))
        with pytest.raises(ValueError, match=match):
            OnnxPolicyRunner(tmp_path)

    refused({**good, "observation": {**good["observation"], "history": 5}}, r"history 5 × frame_dim 45 = 225")
    refused(
        {k: v for k, v in good.items() if k != "kp"},
        r"go1_policy\.json: field 'kp': expected a finite number in \(0, 10000\], got nothing \(missing\)",
    )
    refused(
        {**good, "default_joint_pos_rad": [0.0] * 11},
        r"field 'default_joint_pos_rad': expected a list of 12 finite numbers",
    )
    state = [{"input": "obs", "output": "h_out", "shape": [1, 1, 8]}]
    refused({**good, "recurrent_state": state}, "recurrent state output 'h_out' is not an output")
    side_path.write_text(json.dumps(good))
    assert not OnnxPolicyRunner(tmp_path).recurrent


def test_sim2sim_robot_delays_actuation() -> None:
    robot = MujocoGo1(SIM2SIM)
    assert robot.substeps == 20 and robot._delay_steps == 10
    home = go1.default_joint_pos()
    robot.command_pd(home + 0.3, 35.0, 0.5)
    assert np.allclose(robot._active[0], home)
    robot.wait_for_tick()
    np.testing.assert_allclose(robot._active[0], home + 0.3)
    assert robot.model.opt.timestep == pytest.approx(0.001)


def test_runner_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"go1_policy\.json"):
        OnnxPolicyRunner(tmp_path)
    (tmp_path / "go1_policy.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="'format'"):
        OnnxPolicyRunner(tmp_path)


def test_eval_tables_on_a_tiny_case(trained: Path) -> None:
    policy = load_go1_policy(trained / "checkpoints" / "latest.pt")
    cfg = replace(
        ev.quick(ev.EvalConfig(episodes=2)),
        commands=((0.0, 0.0, 0.0), (2.0, 0.0, 0.0)),
        push_magnitudes_mps=(0.5, 3.0),
    )
    rows = ev.tracking_table(policy.task_cfg, policy, cfg)
    assert len(rows) == 2 and all(r["episodes"] == 2 for r in rows)
    for r in rows:
        assert r["falls"] == 2 or np.isfinite(r["lin_vel_error_mps"])
    # an untrained policy barely moves: commanded 2 m/s it is ~2 m/s off
    assert rows[1]["falls"] == 2 or rows[1]["lin_vel_error_mps"] > 1.0
    pushes = ev.push_table(policy.task_cfg, policy, cfg)
    assert [p["push_mps"] for p in pushes] == [0.5, 3.0]
    summary = ev.summarize_go1(rows, pushes)
    assert "vx_2.0_lin_error_mps" in summary or rows[1]["falls"] == 2


def test_cli_eval_export_deploy_and_errors(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = str(trained / "checkpoints" / "latest.pt")
    assert main(["export", "go1", "--checkpoint", ckpt, "--out", str(tmp_path / "exp")]) == 0
    small = tmp_path / "exp" / "policy.pt"
    assert small.stat().st_size < 600_000
    assert load_go1_policy(small).meta["iteration"] == 2
    args = ["deploy", "go1", "--policy", str(tmp_path / "exp"), "--episodes", "1", "--seconds", "0.4"]
    code = main([*args, "--decompose", "--delay-sweep", "--out", str(tmp_path / "dep")])
    report = json.loads((tmp_path / "dep" / "sim2sim.json").read_text())
    assert code == (0 if report["summary"]["passed"] else 1)  # a failed check is a failed command
    assert len(report["comparison"]) == 9 and "passed" in report["summary"]
    dec = report["decomposition"]
    assert len(dec) == 6 and all(len(rows) == 9 for rows in dec.values())
    sweep = report["delay_sweep"]
    assert list(sweep) == ["5", "10", "15", "20"] and all(len(rows) == 9 for rows in sweep.values())
    # the 10 ms row is the decomposition's "actuator delay" change (the sim-to-sim target's 10 ms)
    assert [r["sim2sim"] for r in sweep["10"]] == [r["sim2sim"] for r in dec["actuator delay"]]
    text = (tmp_path / "dep" / "report.md").read_text()
    assert "| actuator delay |" in text and "| 0 ms |" in text and "| 20 ms |" in text
    assert ("Verdict: passed" if report["summary"]["passed"] else "Verdict: FAILED at (") in text
    assert main(["eval", "go1", "--checkpoint", str(tmp_path / "nope.pt"), "--out", str(tmp_path / "e")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err
    assert main(["deploy", "go1", "--policy", str(tmp_path / "missing"), "--out", str(tmp_path / "d")]) == 2
    bad_init = ["train", "go1", "--init-from", str(tmp_path / "none.pt"), "--out", str(tmp_path / "t")]
    assert main(bad_init) == 2
    assert "none.pt: checkpoint not found" in capsys.readouterr().err
    assert main(["train", "go1", "--pure-turn-prob", "1.5", "--out", str(tmp_path / "t")]) == 2
    assert "expected a probability in [0, 1), got 1.5" in capsys.readouterr().err
    assert main(["train", "go1", "--joint-friction-dr", "1.8", "0.8", "--out", str(tmp_path / "t")]) == 2
    assert "0 <= LOW <= HIGH, got 1.8 0.8" in capsys.readouterr().err
    assert main(["train", "go1", "--reward-weight", "action_rat=-1", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "unknown term 'action_rat', expected one of track_lin_vel_xy" in err
    assert "(or an optional term: foot_clearance, leg_contacts)" in err
    assert main(["train", "go1", "--reward-weight", "action_rate", "--out", str(tmp_path / "t")]) == 2
    assert "expected TERM=WEIGHT" in capsys.readouterr().err


def test_recipe_options_reach_the_task() -> None:
    opts = go1_recipe.RecipeOptions(
        pure_turn_prob=0.2,
        yaw_precision_weight=0.5,
        joint_friction_scale=(0.8, 1.8),
        latency_ms=(5.0, 20.0),
        reward_weights=(("action_rate", -0.03), ("foot_clearance", -10.0)),
    )
    task = go1_recipe.train_spec(16, 3, 0, opts).task
    assert task.commands.pure_turn_prob == 0.2
    assert task.randomization is not None and task.randomization.latency_s == (0.005, 0.02)
    assert task.randomization.joint_friction_scale == (0.8, 1.8)
    weights = {t.name: t.weight for t in task.rewards}
    assert weights["action_rate"] == -0.03 and weights["track_ang_vel_z_fine"] == 0.5
    assert weights["track_lin_vel_xy"] == 1.5  # the others keep their defaults
    assert weights["foot_clearance"] == -10.0  # an optional term joins the reward with its weight
    assert "foot_clearance" not in {t.name for t in go1_recipe.train_spec(16, 3, 0).task.rewards}
    assert go1_recipe.train_spec(16, 3, 0, go1_recipe.RecipeOptions(history=15)).task.history == 15
    base = go1_recipe.train_spec(16, 3, 0).task
    assert base == Go1TaskConfig(num_envs=16)  # no options: the base recipe exactly
    ablation = go1_recipe.train_spec(16, 3, 0, replace(opts, robust=False)).task
    assert ablation.randomization is None and ablation.commands.pure_turn_prob == 0.2


def test_command_limits_narrow_the_ranges(tmp_path: Path) -> None:
    opts = go1_recipe.RecipeOptions(command_limits=(1.0, 1.0, 1.0))  # Isaac Lab's rough-terrain ranges
    cmd = go1_recipe.train_spec(16, 3, 0, opts).task.commands
    assert (cmd.vx_mps, cmd.vy_mps, cmd.yaw_radps) == ((-1.0, 1.0), (-0.8, 0.8), (-1.0, 1.0))
    assert go1_recipe.train_spec(16, 3, 0).task.commands.vx_mps == (-1.0, 2.0)  # untouched without
    with pytest.raises(UserError, match="--command-limits VX VY YAW must be positive, got 1 0 1"):
        go1_recipe.train_spec(16, 3, 0, go1_recipe.RecipeOptions(command_limits=(1.0, 0.0, 1.0)))
    argv = ["train", "go1", "--command-limits", "1", "1", "-1", "--out", str(tmp_path / "t")]
    assert main(argv) == 2 and not (tmp_path / "t").exists()
    forward = go1_recipe.train_spec(16, 3, 0, replace(opts, forward_only=True)).task.commands
    assert (forward.vx_mps, forward.vy_mps) == ((0.0, 1.0), (-0.8, 0.8))
    only_forward = go1_recipe.RecipeOptions(forward_only=True)
    assert go1_recipe.train_spec(16, 3, 0, only_forward).task.commands.vx_mps == (0.0, 2.0)
    fast = go1_recipe.train_spec(16, 3, 0, replace(opts, min_forward_mps=0.5)).task.commands
    assert (fast.vx_mps, fast.vy_mps) == ((0.5, 1.0), (-0.8, 0.8))  # without --forward-only too
    with pytest.raises(
        UserError, match=r"--min-forward-speed 1 must be below the forward-speed limit \(1 m/s\)"
    ):
        go1_recipe.train_spec(16, 3, 0, replace(opts, min_forward_mps=1.0))
    with pytest.raises(
        UserError, match=r"--min-forward-speed 1.5 must be below the forward-speed limit \(1 m/s\)"
    ):
        go1_recipe.train_spec(16, 3, 0, replace(opts, min_forward_mps=1.5))  # past the cut limit
    with pytest.raises(
        UserError, match=r"--min-forward-speed 3 must be below the forward-speed limit \(2 m/s\)"
    ):
        go1_recipe.train_spec(16, 3, 0, go1_recipe.RecipeOptions(min_forward_mps=3.0))  # past the default
    argv = ["train", "go1", "--min-forward-speed", "-0.5", "--out", str(tmp_path / "m")]
    assert main(argv) == 2 and not (tmp_path / "m").exists()


def test_terrain_spacing_reaches_the_grid_and_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = go1_recipe.RecipeOptions(terrain="rough", terrain_spacing_m=0.05)
    task = go1_recipe.train_spec(16, 3, 0, opts).task
    assert task.terrain.horizontal_scale_m == 0.05  # and the saved config keeps it for eval
    assert task_config_from_dict(task_config_to_dict(task)).terrain.horizontal_scale_m == 0.05
    assert (
        go1_recipe.train_spec(16, 3, 0, replace(opts, terrain_spacing_m=None)).task.terrain.horizontal_scale_m
        == 0.1
    )
    with pytest.raises(UserError, match=r"tile_size_m \(8\.0\) must be a whole multiple"):
        go1_recipe.train_spec(16, 3, 0, replace(opts, terrain_spacing_m=0.07))
    with pytest.raises(UserError, match="--terrain-spacing needs --terrain"):
        go1_recipe.train_spec(16, 3, 0, go1_recipe.RecipeOptions(terrain_spacing_m=0.05))
    argv = ["train", "go1", "--terrain", "rough", "--terrain-spacing", "0", "--out", str(tmp_path / "t")]
    assert main(argv) == 2 and not (tmp_path / "t").exists()
    assert "expected a height-field spacing in m in (0, 1], got 0" in capsys.readouterr().err


def test_foot_clearance_target_reaches_the_task_and_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    term = (("foot_clearance", -60.0),)
    opts = go1_recipe.RecipeOptions(reward_weights=term, foot_clearance_target_m=0.12)
    task = go1_recipe.train_spec(16, 3, 0, opts).task
    assert task.foot_clearance_target_m == 0.12
    assert task_config_from_dict(task_config_to_dict(task)).foot_clearance_target_m == 0.12
    old = task_config_to_dict(Go1TaskConfig())
    del old["foot_clearance_target_m"]  # a config saved before the option: the 8 cm it trained with
    assert task_config_from_dict(old).foot_clearance_target_m == 0.08
    with pytest.raises(UserError, match="needs the term: add --reward-weight foot_clearance=W"):
        go1_recipe.train_spec(16, 3, 0, go1_recipe.RecipeOptions(foot_clearance_target_m=0.12))
    argv = ["train", "go1", "--foot-clearance-target", "0.6", "--out", str(tmp_path / "t")]
    assert main(argv) == 2 and not (tmp_path / "t").exists()
    assert "expected a swing height in m in (0, 0.5), got 0.6" in capsys.readouterr().err


def test_heading_prob_reaches_the_task_and_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = go1_recipe.RecipeOptions(heading_prob=1.0, command_limits=(1.0, 1.0, 1.0))
    task = go1_recipe.train_spec(16, 3, 0, opts).task
    assert task.commands.heading_prob == 1.0 and task.commands.yaw_radps == (-1.0, 1.0)
    assert task_config_from_dict(task_config_to_dict(task)).commands.heading_prob == 1.0
    old = task_config_to_dict(Go1TaskConfig())
    del old["commands"]["heading_prob"]  # a config saved before the option: yaw-rate commands
    assert task_config_from_dict(old).commands.heading_prob == 0.0
    argv = ["train", "go1", "--heading-prob", "1.5", "--out", str(tmp_path / "t")]
    assert main(argv) == 2 and not (tmp_path / "t").exists()
    assert "expected a share in [0, 1], got 1.5" in capsys.readouterr().err


def test_terrain_proportions_reach_the_grid_and_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shares = (("random", 0.2), ("stairs_up", 0.5), ("stairs_down", 0.3))
    opts = go1_recipe.RecipeOptions(terrain="rough", terrain_proportions=shares)
    task = go1_recipe.train_spec(16, 3, 0, opts).task
    ground = task.terrain
    assert column_kinds(ground).count("stairs_up") == 5 and "steps" not in column_kinds(ground)
    assert task_config_from_dict(task_config_to_dict(task)).terrain == ground
    with pytest.raises(UserError, match="shares the columns of --terrain rough, not flat"):
        go1_recipe.train_spec(16, 3, 0, go1_recipe.RecipeOptions(terrain_proportions=shares))
    few = go1_recipe.RecipeOptions(terrain="rough", terrain_proportions=(("random", 1.0), ("steps", 0.05)))
    with pytest.raises(UserError, match="steps get no column of the 10"):
        go1_recipe.train_spec(16, 3, 0, few)
    twice = go1_recipe.RecipeOptions(terrain="rough", terrain_proportions=(("random", 1.0), ("random", 1.0)))
    with pytest.raises(UserError, match="--terrain-proportions: proportions must name distinct kinds"):
        go1_recipe.train_spec(16, 3, 0, twice)
    argv = [
        "train",
        "go1",
        "--terrain",
        "rough",
        "--terrain-proportions",
        "ramps=1",
        "--out",
        str(tmp_path / "t"),
    ]
    assert main(argv) == 2 and not (tmp_path / "t").exists()
    assert "expected KIND=SHARE with KIND one of random" in capsys.readouterr().err


def test_entropy_coef_reaches_ppo_and_is_checked(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert go1_recipe.train_spec(16, 3, 0).ppo.entropy_coef == 0.01  # the recipe's, untouched without
    spec = go1_recipe.train_spec(16, 3, 0, go1_recipe.RecipeOptions(entropy_coef=0.0))
    assert spec.ppo.entropy_coef == 0.0
    src = trained / "checkpoints" / "latest.pt"
    polish = replace(tiny_spec(1), ppo=replace(tiny_spec().ppo, entropy_coef=0.0), init_from=str(src))
    t = Go1Trainer(polish, tmp_path / "polish", nthread=1)
    assert t.alg.entropy_coef == 0.0  # the fine-tune's bonus, not the checkpoint's 0.01
    t.run()
    saved = load_checkpoint(tmp_path / "polish" / "checkpoints" / "latest.pt")
    assert saved["ppo_cfg"]["entropy_coef"] == 0.0
    with pytest.raises(UserError, match=r"distillation \(--teacher\) has no entropy bonus"):
        go1_recipe.train_spec(16, 3, 0, go1_recipe.RecipeOptions(entropy_coef=0.0, teacher=src))
    argv = ["train", "go1", "--entropy-coef", "1.5", "--out", str(tmp_path / "t")]
    assert main(argv) == 2 and not (tmp_path / "t").exists()
    assert "expected an entropy coefficient in [0, 1], got 1.5" in capsys.readouterr().err


def _noise(state: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.exp(state["distribution.log_std_param"])


def test_action_std_restarts_a_fine_tunes_noise_once(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = trained / "checkpoints" / "latest.pt"
    before = _noise(load_checkpoint(src)["actor_state_dict"])
    assert not torch.allclose(before, torch.full_like(before, 0.3), atol=1e-3)
    spec = replace(tiny_spec(1), init_from=str(src), init_action_std=0.3)
    t = Go1Trainer(spec, tmp_path / "n", nthread=1)
    assert torch.allclose(_noise(t.alg.get_policy().state_dict()), torch.full((12,), 0.3))
    kept = Go1Trainer(replace(spec, init_action_std=None), tmp_path / "k", nthread=1)
    assert torch.allclose(_noise(kept.alg.get_policy().state_dict()), before)  # unchanged without it
    t.run()
    after = _noise(load_checkpoint(tmp_path / "n" / "checkpoints" / "latest.pt")["actor_state_dict"])
    resumed = Go1Trainer(replace(spec, iterations=2), tmp_path / "n", nthread=1)
    assert torch.allclose(_noise(resumed.alg.get_policy().state_dict()), after)  # a resume is not reset
    with pytest.raises(UserError, match="needs --init-from"):
        go1_recipe.train_spec(16, 3, 0, go1_recipe.RecipeOptions(init_action_std=0.3))
    with pytest.raises(UserError, match=r"must be in \(0, 2\], got 3"):
        go1_recipe.train_spec(16, 3, 0, go1_recipe.RecipeOptions(init_from=src, init_action_std=3.0))
    argv = ["train", "go1", "--init-from", str(src), "--action-std", "0", "--out", str(tmp_path / "t")]
    assert main(argv) == 2 and not (tmp_path / "t").exists()
    assert "expected an action standard deviation in (0, 2], got 0" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(go1_jobs.SHIPPED_POLICIES))
def test_shipped_policies_are_small_and_load_by_name(name: str) -> None:
    from scenefactory.cli.go1 import CHECKPOINT_HELP

    assert f"({', '.join(go1_jobs.SHIPPED_POLICIES)})" in CHECKPOINT_HELP
    path = go1_jobs.resolve_checkpoint(Path(name))
    assert path == go1_jobs.SHIPPED_POLICIES[name] and path.is_file()
    assert path.stat().st_size < 600_000
    policy = load_go1_policy(path)
    obs = torch.zeros(2, policy.task_cfg.history * frame_dim(policy.task_cfg.whole_body.enabled))
    assert policy.act(obs).shape == (2, 12)
    assert go1_jobs.resolve_checkpoint(None) == go1_jobs.SHIPPED_POLICY


def test_sim2sim_verdict_is_one_and_a_half_times_or_a_tenth(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decided rule: no falls and error <= max(1.5 x training-sim error, 0.10)."""
    from scenefactory.go1.deploy import check

    # (training-sim error, sim-to-sim error, sim-to-sim falls) per command
    rows = [
        (0.04, 0.05, 0),  # under the 0.10 floor: passes
        (0.08, 0.11, 0),  # 1.375x, over the floor but within 1.5x (0.12): passes
        (0.10, 0.16, 0),  # 1.6x and over the floor: fails
        (0.02, 0.09, 0),  # 4.5x of a small error, still under 0.10: passes
        (0.02, 0.11, 0),  # over 0.10 and over 1.5x: fails
        (0.04, 0.05, 1),  # within everything but a fall: fails
    ]
    fwd = {"vx_mps": 1.0, "vy_mps": 0.0, "yaw_radps": 0.0}
    turn = {"vx_mps": 0.0, "vy_mps": 0.0, "yaw_radps": 1.8}

    def fake_track(
        runner: object, cfg: object, commands: list[tuple[float, float, float]], *args: object
    ) -> list:
        i = 0 if cfg is check.TRAINING_SIM else 1
        out = []
        for (vx, vy, yaw), r in zip(commands, rows, strict=True):
            c = {"vx_mps": vx, "vy_mps": vy, "yaw_radps": yaw}
            # the other metric is large, so a verdict read from the wrong one would differ
            out.append(
                {"command": c, "lin_vel_error_mps": r[i], "yaw_rate_error_radps": r[i], "falls": r[2] * i}
            )
            out[-1]["yaw_rate_error_radps" if vx == 0 else "lin_vel_error_mps"] = r[i]
            out[-1]["lin_vel_error_mps" if vx == 0 else "yaw_rate_error_radps"] = 9.0
        return out

    monkeypatch.setattr(check, "track", fake_track)
    monkeypatch.setattr(check, "require_simulable", lambda runner, robots: None)  # no runner here
    for cmd in (fwd, turn):
        commands = [(cmd["vx_mps"], cmd["vy_mps"], cmd["yaw_radps"])] * len(rows)
        res = check.sim2sim(None, commands=commands)  # type: ignore[arg-type]
        assert [c["passed"] for c in res["comparison"]] == [True, True, False, True, False, False]
        assert [c["allowed"] for c in res["comparison"]] == pytest.approx(
            [0.10, 0.12, 0.15, 0.10, 0.10, 0.10]
        )
        assert not res["summary"]["passed"] and res["summary"]["failed_commands"] == [cmd] * 3


def test_deploy_exits_non_zero_when_the_check_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cmd = {"vx_mps": 2.0, "vy_mps": 0.0, "yaw_radps": 0.0}
    verdicts = iter([False, True])

    def fake_deploy(args: object) -> dict[str, object]:
        passed = next(verdicts)
        return {"summary": {"passed": passed, "failed_commands": [] if passed else [cmd], "max_ratio": 2.0}}

    monkeypatch.setattr(go1_jobs, "deploy", fake_deploy)
    policy = tmp_path / "exp"
    policy.mkdir()
    argv = ["deploy", "go1", "--policy", str(policy), "--out", str(tmp_path / "d")]
    assert main(argv) == 1
    assert "sim-to-sim check FAILED at commands (2.0, 0.0, 0.0)" in capsys.readouterr().err
    assert main(argv) == 0


def test_single_changes_apply_one_difference_of_the_target_each() -> None:
    from dataclasses import asdict

    from scenefactory.go1.deploy import check

    train, target = asdict(check.TRAINING_SIM), asdict(check.SIM2SIM)
    seen: set[str] = set()
    for cfg in check.single_changes().values():
        changed = {k for k, v in asdict(cfg).items() if v != train[k]}
        assert changed and all(asdict(cfg)[k] == target[k] for k in changed)
        assert not changed & seen  # no field in two changes
        seen |= changed
    assert seen == {k for k in train if train[k] != target[k]}  # together they are the whole target
