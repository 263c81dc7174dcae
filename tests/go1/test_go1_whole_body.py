"""Go1 whole-body commands (trunk height, pitch, roll): the config and its saved form, command
draws, the 6-command observation layout, the tracking terms, widening a velocity-only policy (its
outputs unchanged), the export sidecar and runner, and the whole-body evaluation table."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from tensordict import TensorDict

from scenefactory.checkpoint import load_checkpoint, save_checkpoint
from scenefactory.errors import CheckpointError
from scenefactory.go1 import evaluation as ev
from scenefactory.go1 import jobs as go1_jobs
from scenefactory.go1 import recipe as go1_recipe
from scenefactory.go1 import rewards as r
from scenefactory.go1 import robot as go1
from scenefactory.go1.config import (
    Go1TaskConfig,
    RewardTerm,
    WholeBodyConfig,
    nominal,
    task_config_from_dict,
    task_config_to_dict,
)
from scenefactory.go1.deploy.export import DeployPolicy, export_go1
from scenefactory.go1.deploy.robot import MujocoGo1
from scenefactory.go1.deploy.runner import OnnxPolicyRunner
from scenefactory.go1.env import Go1Env
from scenefactory.go1.frames import gravity_in_body
from scenefactory.go1.observations import (
    FRAME_DIM,
    FRAME_LAYOUT,
    PRIVILEGED_DIM,
    command_names,
    frame_dim,
    frame_layout,
)
from scenefactory.go1.train import Go1Trainer, Go1TrainSpec, Go1VecEnv, go1_ppo_config, load_go1_policy
from scenefactory.go1.whole_body import full_commands, sample_body_commands, whole_body_task
from scenefactory.go1.whole_body_eval import (
    TARGETS,
    WholeBodyEvalConfig,
    whole_body_report,
    whole_body_summary,
    whole_body_table,
)
from scenefactory.go1.widen import command_columns, optimizer_index, widen_state
from scenefactory.rl.ppo import build_actor
from test_go1_task import state

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SHIPPED = go1_jobs.SHIPPED_POLICY
WB = WholeBodyConfig(enabled=True)


def tiny_spec(task: Go1TaskConfig, iterations: int = 1, **kw: object) -> Go1TrainSpec:
    ppo = replace(go1_ppo_config(), num_steps_per_env=4, save_interval=1, num_mini_batches=2)
    return Go1TrainSpec(task=task, ppo=ppo, iterations=iterations, seed=7, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def velocity_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A velocity-only run (actor, critic, optimizer): what a whole-body fine-tune starts from."""
    out = tmp_path_factory.mktemp("velocity")
    Go1Trainer(tiny_spec(Go1TaskConfig(num_envs=8)), out, nthread=1).run()
    return out


@pytest.fixture(scope="module")
def widened_run(velocity_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("whole_body")
    spec = tiny_spec(whole_body_task(Go1TaskConfig(num_envs=8)), init_from=str(ckpt(velocity_run)))
    Go1Trainer(spec, out, nthread=1).run()
    return out


def ckpt(run: Path) -> Path:
    return run / "checkpoints" / "latest.pt"


# ------------------------------------------------------------------------------------------ config


def test_config_round_trip_and_old_dicts_load_without_whole_body() -> None:
    cfg = whole_body_task(Go1TaskConfig(num_envs=4), replace(WB, height_m=(0.22, 0.3), nominal_prob=0.5))
    data = json.loads(json.dumps(task_config_to_dict(cfg)))
    assert data["whole_body"]["enabled"] is True and data["whole_body"]["height_m"] == [0.22, 0.3]
    assert task_config_from_dict(data) == cfg
    old = task_config_to_dict(Go1TaskConfig())
    del old["whole_body"]  # a config saved before whole-body commands existed
    assert task_config_from_dict(old).whole_body == WholeBodyConfig()
    assert not task_config_from_dict(old).whole_body.enabled
    policy = load_go1_policy(SHIPPED)  # the shipped policy: whole-body, 3 frames of 48
    assert policy.task_cfg.whole_body == WB
    assert int(policy.actor.obs_normalizer._mean.shape[-1]) == 3 * frame_dim(True)


def test_config_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="height_m"):
        WholeBodyConfig(height_m=(0.3, 0.2))
    with pytest.raises(ValueError, match="nominal_height_m"):
        WholeBodyConfig(nominal_height_m=0.4)
    with pytest.raises(ValueError, match="pitch_rad"):
        WholeBodyConfig(pitch_rad=(0.1, 0.3))
    with pytest.raises(ValueError, match="nominal_prob"):
        WholeBodyConfig(nominal_prob=1.5)
    height = RewardTerm("track_base_height", r.track_base_height, 1.0)
    with pytest.raises(ValueError, match=r"whole_body\.enabled"):
        Go1TaskConfig(rewards=(height,))
    with pytest.raises(ValueError, match="already"):
        whole_body_task(whole_body_task(Go1TaskConfig()))


def test_whole_body_task_replaces_the_terms_that_fight_a_posture() -> None:
    base = Go1TaskConfig()
    cfg = whole_body_task(base)
    fns = {t.name: t.fn for t in cfg.rewards}
    assert r.flat_orientation_sq not in fns.values() and r.stand_still not in fns.values()
    assert fns["attitude"] is r.attitude_error_sq and fns["stand_still_quiet"] is r.stand_still_quiet
    weights = {t.name: t.weight for t in cfg.rewards}
    assert weights["attitude"] == {t.name: t.weight for t in base.rewards}["orientation"]
    assert weights["track_base_height"] > 0 and weights["track_body_pitch"] > 0
    spec = go1_recipe.train_spec(8, 1, 0, go1_recipe.RecipeOptions(whole_body=True))
    assert spec.task.whole_body.enabled and "track_body_roll" in {t.name for t in spec.task.rewards}


# ---------------------------------------------------------------------------------------- commands


def test_body_commands_lie_in_their_ranges_with_a_nominal_share() -> None:
    wb = replace(WB, nominal_prob=0.25)
    cmd = sample_body_commands(wb, np.random.default_rng(0), 4000)
    for k, (lo, hi) in enumerate((wb.height_m, wb.pitch_rad, wb.roll_rad)):
        assert (cmd[:, k] >= lo).all() and (cmd[:, k] <= hi).all()
        assert cmd[:, k].max() - cmd[:, k].min() > 0.9 * (hi - lo)  # the whole range is drawn
    at_nominal = (cmd == [wb.nominal_height_m, 0.0, 0.0]).all(axis=1).mean()
    assert 0.2 < at_nominal < 0.3
    assert (
        sample_body_commands(replace(wb, nominal_prob=0.0), np.random.default_rng(0), 50)[:, 1] != 0
    ).all()


def test_env_draws_body_commands_after_the_velocity_ones() -> None:
    plain = Go1Env(Go1TaskConfig(num_envs=16), seed=3)
    wb = Go1Env(whole_body_task(Go1TaskConfig(num_envs=16)), seed=3)
    assert plain.command.shape == (16, 3) and wb.command.shape == (16, 6)
    np.testing.assert_array_equal(wb.command[:, :3], plain.command)  # the velocity draws are unchanged
    c = wb.cfg.whole_body
    assert ((wb.command[:, 3] >= c.height_m[0]) & (wb.command[:, 3] <= c.height_m[1])).all()
    assert (np.abs(wb.command[:, 4]) <= c.pitch_rad[1]).all() and (
        np.abs(wb.command[:, 5]) <= c.roll_rad[1]
    ).all()
    wb._cmd_timer[:4] = 0.0  # due: redrawn with the velocity command at the next step
    before = wb.command.copy()
    wb.step(torch.zeros(16, 12))
    assert (wb.command[:4, 3:] != before[:4, 3:]).any(axis=1).all()
    np.testing.assert_array_equal(wb.command[4:], before[4:])


def test_held_commands_take_the_nominal_body_command_when_given_three() -> None:
    full = full_commands(np.array([[0.5, 0.0, 0.2]]), WB, 1)
    np.testing.assert_array_equal(full, [[0.5, 0.0, 0.2, WB.nominal_height_m, 0.0, 0.0]])
    six = np.array([[0.5, 0.0, 0.2, 0.25, 0.1, -0.1]])
    np.testing.assert_array_equal(full_commands(six, WB, 1), six)
    with pytest.raises(ValueError, match=r"\(1, 3\) or \(1, 6\)"):
        full_commands(np.zeros((1, 4)), WB, 1)
    with pytest.raises(ValueError, match=r"\(1, 3\), got"):
        full_commands(six, WholeBodyConfig(), 1)


# ------------------------------------------------------------------------------------ observations


def test_observations_carry_six_commands_in_the_frame_layout() -> None:
    cfg = nominal(whole_body_task(Go1TaskConfig(num_envs=4)))
    env = Go1Env(cfg, seed=0)
    cmds = np.array([[0.5, 0.0, 0.1, 0.22, 0.2, -0.1]] * 4)
    env.hold_commands(cmds)
    for _ in range(cfg.history):  # every stacked frame made after the commands were held
        env.step(torch.zeros(4, 12))
    actor, critic = env.observations()
    assert frame_dim(True) == 48 and command_names(True)[3:] == ("height_m", "pitch_rad", "roll_rad")
    assert actor.shape == (4, cfg.history * 48) and critic.shape == (4, 48 + PRIVILEGED_DIM)
    layout = {name: (a, b) for name, a, b in frame_layout(True)}
    assert layout["command"] == (6, 12) and layout["last_action"] == (36, 48)
    assert frame_layout(False) == FRAME_LAYOUT
    a, b = layout["command"]
    for k in range(cfg.history):
        np.testing.assert_allclose(actor[:, k * 48 + a : k * 48 + b].numpy(), cmds, rtol=1e-6)
    np.testing.assert_allclose(critic[:, a:b].numpy(), cmds, rtol=1e-6)
    obs = Go1VecEnv(Go1Env(whole_body_task(Go1TaskConfig(num_envs=4)), seed=0)).get_observations()
    assert obs["params"].shape == (4, 20)  # the randomized parameters start after the wider frame


# ----------------------------------------------------------------------------------------- rewards


def test_pitch_and_roll_signs_and_their_inverse() -> None:
    half = 0.1  # a rotation of 0.2 rad: about y (nose down), then about x (right side down)
    nose_down = torch.tensor(gravity_in_body(np.array([np.cos(half), 0.0, np.sin(half), 0.0])))
    right_down = torch.tensor(gravity_in_body(np.array([np.cos(half), np.sin(half), 0.0, 0.0])))
    torch.testing.assert_close(r.pitch_roll(nose_down), torch.tensor([0.2, 0.0], dtype=torch.float64))
    torch.testing.assert_close(r.pitch_roll(right_down), torch.tensor([0.0, 0.2], dtype=torch.float64))
    pr = torch.tensor([[0.3, -0.2], [-0.25, 0.15]])
    torch.testing.assert_close(r.pitch_roll(r.gravity_from_pitch_roll(pr)), pr)


def test_tracking_terms_peak_at_zero_error() -> None:
    body = torch.tensor([[0.24, 0.2, -0.1], [0.24, 0.2, -0.1]])
    cmd = torch.cat([torch.zeros(2, 3), body], dim=1)
    grav = r.gravity_from_pitch_roll(body[:, 1:])
    exact = state(command=cmd, height_m=body[:, 0].clone(), gravity_b=grav)
    for fn in (r.track_base_height, r.track_body_pitch, r.track_body_roll):
        torch.testing.assert_close(fn(exact), torch.ones(2))
    torch.testing.assert_close(r.attitude_error_sq(exact), torch.zeros(2), atol=1e-7, rtol=0)
    off = torch.tensor([0.02, 0.08])
    worse = state(command=cmd, height_m=body[:, 0] + off, gravity_b=grav)
    h = r.track_base_height(worse)
    assert 0.8 < h[0] < 1.0 and h[1] < h[0]  # 2 cm still pays well, 8 cm little
    tilted = state(
        command=cmd,
        gravity_b=r.gravity_from_pitch_roll(body[:, 1:] + torch.tensor([[0.05, 0.0], [0.0, 0.3]])),
    )
    p, rl = r.track_body_pitch(tilted), r.track_body_roll(tilted)
    assert p[0] < 1.0 and rl[1] < p[0] and rl[0] == pytest.approx(1.0) and p[1] == pytest.approx(1.0)
    assert (r.attitude_error_sq(tilted) > 0).all()
    level = state(
        command=torch.cat([torch.zeros(2, 3), torch.tensor([[0.28, 0.0, 0.0]] * 2)], dim=1), gravity_b=grav
    )
    torch.testing.assert_close(r.attitude_error_sq(level), r.flat_orientation_sq(level))
    with pytest.raises(ValueError, match=r"\(N, 6\) commands"):
        r.track_base_height(state())


def test_stand_still_quiet_counts_joint_motion_only_when_idle() -> None:
    moving = torch.full((2, 12), 0.5)
    idle = state(joint_vel=moving, joint_pos=torch.zeros(2, 12))
    torch.testing.assert_close(r.stand_still_quiet(idle), torch.full((2,), 6.0))
    assert (r.stand_still_quiet(state(joint_pos=torch.zeros(2, 12))) == 0).all()  # posed but still
    walking = state(joint_vel=moving, command=torch.tensor([[1.0, 0.0, 0.0]] * 2))
    assert (r.stand_still_quiet(walking) == 0).all()


# ---------------------------------------------------------------------------------------- widening


def test_command_columns_leave_room_for_three_commands_per_frame() -> None:
    cols = command_columns(3 * FRAME_DIM + 20, frames=3)  # a privileged actor: 3 frames + parameters
    new = set(range(3 * 48 + 20)) - set(cols.tolist())
    assert new == {9, 10, 11, 57, 58, 59, 105, 106, 107}
    assert (cols.diff() > 0).all() and int(cols[-1]) == 3 * 48 + 19
    assert command_columns(FRAME_DIM + 28, frames=1)[FRAME_DIM:].tolist() == list(range(48, 76))


def test_widened_actor_acts_exactly_as_before() -> None:
    ppo = go1_ppo_config()
    old = build_actor(3 * FRAME_DIM, ppo, num_actions=12)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        old.obs_normalizer._mean.uniform_(-1.0, 1.0, generator=gen)
        old.obs_normalizer._std.uniform_(0.5, 2.0, generator=gen)
        old.obs_normalizer._var.copy_(old.obs_normalizer._std.square())
    wide_obs = torch.randn(32, 3 * 48, generator=gen)
    cols = command_columns(3 * FRAME_DIM, frames=3)
    state_dict = widen_state(old.state_dict(), cols, wide_obs)
    new = build_actor(3 * 48, ppo, num_actions=12)
    new.load_state_dict(state_dict, strict=True)
    old.eval(), new.eval()
    with torch.no_grad():
        a_new = new(TensorDict({"policy": wide_obs}, batch_size=[32]))
        a_old = old(TensorDict({"policy": wide_obs[:, cols]}, batch_size=[32]))
    torch.testing.assert_close(a_new, a_old, rtol=0, atol=1e-6)
    fresh = torch.ones(3 * 48, dtype=torch.bool)
    fresh[cols] = False
    torch.testing.assert_close(new.obs_normalizer._mean[0, fresh], wide_obs[:, fresh].mean(dim=0))
    assert (state_dict["mlp.0.weight"][:, fresh] == 0).all()


def test_whole_body_fine_tune_starts_as_the_velocity_policy(velocity_run: Path, tmp_path: Path) -> None:
    """Actor, critic and Adam's moments widened: the first outputs are the old ones exactly."""
    saved = load_checkpoint(ckpt(velocity_run))
    spec = tiny_spec(whole_body_task(Go1TaskConfig(num_envs=8)), init_from=str(ckpt(velocity_run)))
    t = Go1Trainer(spec, tmp_path / "wb", nthread=1)
    old = Go1Trainer(
        tiny_spec(Go1TaskConfig(num_envs=8), init_from=spec.init_from), tmp_path / "v", nthread=1
    )
    obs = t.vec.get_observations()
    actor_cols = command_columns(3 * FRAME_DIM, frames=3)
    critic_cols = command_columns(int(old.alg.critic.obs_dim), frames=1)
    old_obs = TensorDict(
        {"policy": obs["policy"][:, actor_cols], "critic": obs["critic"][:, critic_cols]}, batch_size=[8]
    )
    with torch.no_grad():
        torch.testing.assert_close(t.alg.get_policy()(obs), old.alg.get_policy()(old_obs), rtol=0, atol=1e-6)
        torch.testing.assert_close(t.alg.critic(obs), old.alg.critic(old_obs), rtol=0, atol=1e-5)
    opt = t.alg.optimizer.state_dict()["state"]
    first = t.alg.get_policy().mlp[0].weight
    index = optimizer_index(t.alg.optimizer, first)
    old_moment = saved["optimizer_state_dict"]["state"][index]["exp_avg_sq"]
    assert opt[index]["exp_avg_sq"].shape == (256, 144)
    torch.testing.assert_close(opt[index]["exp_avg_sq"][:, actor_cols], old_moment)
    assert float(opt[index]["exp_avg_sq"][:, [9, 10, 11]].abs().sum()) == 0.0
    assert t.alg.learning_rate == saved["optimizer_state_dict"]["param_groups"][0]["lr"]


def test_whole_body_runs_resume_and_refuse_the_other_direction(
    velocity_run: Path, widened_run: Path, tmp_path: Path
) -> None:
    data = load_checkpoint(ckpt(widened_run))
    assert data["obs_dim"] == 144 and data["task_cfg"]["whole_body"]["enabled"]
    spec = tiny_spec(
        whole_body_task(Go1TaskConfig(num_envs=8)), iterations=2, init_from=str(ckpt(velocity_run))
    )
    assert Go1Trainer(spec, widened_run, nthread=1).iteration == 1  # resumes as itself
    with pytest.raises(CheckpointError, match="whole-body commands"):
        Go1Trainer(
            tiny_spec(Go1TaskConfig(num_envs=8), init_from=str(ckpt(widened_run))), tmp_path / "x", nthread=1
        )
    # a run saved before whole-body commands existed (its spec's task without the field) resumes
    old = load_checkpoint(ckpt(velocity_run))
    del old["spec"]["task"]["whole_body"]
    (tmp_path / "old" / "checkpoints").mkdir(parents=True)
    save_checkpoint(tmp_path / "old" / "checkpoints" / "latest.pt", old)
    assert Go1Trainer(tiny_spec(Go1TaskConfig(num_envs=8)), tmp_path / "old", nthread=1).iteration == 1


# ------------------------------------------------------------------------------------------ export


def test_export_sidecar_records_the_whole_body_commands(
    widened_run: Path, velocity_run: Path, tmp_path: Path
) -> None:
    policy = load_go1_policy(ckpt(widened_run))
    paths = export_go1(policy, tmp_path)
    side = json.loads(paths["sidecar"].read_text())["observation"]
    assert side["frame_dim"] == 48 and side["history"] == 3
    assert side["command_names"] == ["vx_mps", "vy_mps", "yaw_radps", "height_m", "pitch_rad", "roll_rad"]
    assert {"name": "command", "start": 6, "stop": 12} in side["frame_layout"]
    wb = side["whole_body_commands"]
    assert wb["names"] == ["height_m", "pitch_rad", "roll_rad"]
    assert wb["ranges"] == {"height_m": [0.2, 0.34], "pitch_rad": [-0.3, 0.3], "roll_rad": [-0.2, 0.2]}
    assert wb["nominal"] == [go1.HOME_HEIGHT_M, 0.0, 0.0] and side["command_ranges"]["pitch_rad"] == [
        -0.3,
        0.3,
    ]
    obs = torch.randn(8, 144, generator=torch.Generator().manual_seed(1))
    sess = ort.InferenceSession(str(paths["onnx"]), providers=["CPUExecutionProvider"])
    action, _ = sess.run(None, {"obs": obs.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(action, DeployPolicy(policy)(obs)[0].numpy(), atol=1e-5)
    runner = OnnxPolicyRunner(tmp_path)
    reading = MujocoGo1().read()
    runner.act(reading, np.array([0.5, 0.0, 0.0]))  # a velocity command: at the nominal body command
    np.testing.assert_allclose(
        runner._frames[0][6:12], [0.5, 0.0, 0.0, go1.HOME_HEIGHT_M, 0.0, 0.0], rtol=1e-6
    )
    runner.act(reading, np.array([0.5, 0.0, 0.0, 0.22, 0.1, -0.1]))
    np.testing.assert_allclose(runner._frames[0][9:12], [0.22, 0.1, -0.1], rtol=1e-6)
    with pytest.raises(ValueError, match="got 4 values"):
        runner.act(reading, np.zeros(4))
    velocity = export_go1(load_go1_policy(ckpt(velocity_run)), tmp_path / "v")["sidecar"]
    assert json.loads(velocity.read_text())["observation"]["whole_body_commands"] is None
    assert OnnxPolicyRunner(tmp_path / "v").body_nominal is None


# -------------------------------------------------------------------------------------- evaluation


def test_whole_body_table_rows_summary_and_report(widened_run: Path, velocity_run: Path) -> None:
    policy = load_go1_policy(ckpt(widened_run))
    cfg = WholeBodyEvalConfig(
        episodes=2,
        episode_s=0.4,
        settle_s=0.2,
        speeds_mps=(1.0,),
        heights_m=(0.2,),
        pitches_rad=(0.3,),
        rolls_rad=(-0.2,),
    )
    rows = whole_body_table(policy.task_cfg, policy, cfg)
    assert [row["varied"] for row in rows] == ["height_m", "pitch_rad", "roll_rad"]
    assert rows[0]["command"] == {
        "vx_mps": 1.0,
        "vy_mps": 0.0,
        "yaw_radps": 0.0,
        "height_m": 0.2,
        "pitch_rad": 0.0,
        "roll_rad": 0.0,
    }
    for row in rows:
        assert row["falls"] == 2 or np.isfinite(row["height_m_error"])
    # a barely trained policy holds its nominal posture: 8 cm low, 0.3 rad pitched, 0.2 rad rolled are missed
    assert rows[0]["falls"] == 2 or rows[0]["height_m_error"] > TARGETS["height_m"]
    assert rows[1]["falls"] == 2 or rows[1]["pitch_rad_error"] > TARGETS["pitch_rad"]
    summary = whole_body_summary(rows)
    assert summary["whole_body_height_m_within_target"] is False or rows[0]["falls"] == 2
    assert any("| 1.0 | 0.20 |" in line for line in whole_body_report(rows))
    assert whole_body_report([]) == []  # a velocity-only policy's report has no whole-body table
    quick = replace(ev.quick(ev.EvalConfig(episodes=1)), episode_s=0.4, settle_s=0.2)
    hooked = ev.whole_body_rows(policy.task_cfg, policy, quick)  # what eval go1 adds for this policy
    assert hooked is not None and len(hooked) == len(WholeBodyEvalConfig().cells(np.zeros(3)))
    velocity = load_go1_policy(ckpt(velocity_run))
    assert ev.whole_body_rows(velocity.task_cfg, velocity, quick) is None
    with pytest.raises(ValueError, match="whole-body"):
        whole_body_table(velocity.task_cfg, velocity, cfg)
    assert asdict(cfg)["episodes"] == 2


def test_render_walks_a_whole_body_policy_through_body_commands(tmp_path: Path) -> None:
    from scenefactory.go1.render import WHOLE_BODY_SEQUENCE, command_at, render_go1

    for _, cmd in WHOLE_BODY_SEQUENCE:  # every body command within the training ranges
        assert len(cmd) == 6
        assert WB.height_m[0] <= cmd[3] <= WB.height_m[1]
        assert WB.pitch_rad[0] <= cmd[4] <= WB.pitch_rad[1] and WB.roll_rad[0] <= cmd[5] <= WB.roll_rad[1]
    assert {c[3] for _, c in WHOLE_BODY_SEQUENCE} >= {0.20, 0.34}
    assert len(command_at(0.5)) == 3 and command_at(0.45, whole_body=True)[3] == 0.34
    policy = load_go1_policy(SHIPPED)
    video = render_go1(policy, tmp_path / "go1.mp4", seconds=0.5)
    assert video.stat().st_size > 0 and (tmp_path / "go1_frames.png").stat().st_size > 0
