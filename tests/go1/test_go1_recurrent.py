"""Recurrent Go1 actors on tiny settings: distillation from a teacher (resume, errors), PPO
fine-tuning of the distilled student, hidden-state resets in evaluation, and the ONNX export and
torch-free runner carrying the hidden state."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from scenefactory.checkpoint import load_checkpoint
from scenefactory.cli import main
from scenefactory.errors import CheckpointError, UserError
from scenefactory.go1 import jobs as go1_jobs
from scenefactory.go1 import recipe as go1_recipe
from scenefactory.go1.config import Go1TaskConfig
from scenefactory.go1.deploy.export import DeployPolicy, export_go1
from scenefactory.go1.deploy.robot import MujocoGo1
from scenefactory.go1.deploy.runner import OnnxPolicyRunner
from scenefactory.go1.observations import frame_dim
from scenefactory.go1.train import Go1Policy, Go1Trainer, Go1TrainSpec, go1_ppo_config, load_go1_policy
from scenefactory.go1.whole_body import whole_body_task
from scenefactory.rl.ppo import build_actor

TEACHER = go1_jobs.SHIPPED_POLICY
TASK = whole_body_task(Go1TaskConfig(num_envs=8))
"""The shipped teacher's task: velocity and whole-body commands."""
OBS = 3 * frame_dim(True)
"""Its actor observation: three frames of 48."""


def student_spec(iterations: int, **ppo: object) -> Go1TrainSpec:
    cfg = replace(
        go1_ppo_config(),
        num_steps_per_env=8,
        save_interval=1,
        num_mini_batches=2,
        init_noise_std=0.2,
        actor_rnn_type="gru",
        actor_rnn_hidden_dim=16,
        actor_hidden_dims=(32, 32),
        learning_rate=3e-3,  # the whole-body teacher's 144 inputs: 1e-3 needs twice the iterations
        **ppo,  # type: ignore[arg-type]
    )
    return Go1TrainSpec(task=TASK, ppo=cfg, iterations=iterations, seed=3, teacher=str(TEACHER))


@pytest.fixture(scope="module")
def distilled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("student")
    Go1Trainer(student_spec(6), out, nthread=1).run()
    return out


def test_distillation_lowers_the_behaviour_loss_and_starts_from_the_teacher(distilled: Path) -> None:
    hist = json.loads((distilled / "history.json").read_text())
    losses = [h["loss_behavior"] for h in hist]
    assert len(losses) == 6 and all(np.isfinite(losses))
    assert losses[-1] < 0.7 * losses[0], losses
    data = load_checkpoint(distilled / "checkpoints" / "latest.pt")
    assert data["ppo_cfg"]["actor_rnn_type"] == "gru"
    teacher = load_checkpoint(TEACHER)["actor_state_dict"]
    for k, v in data["teacher_state_dict"].items():  # the teacher is frozen
        torch.testing.assert_close(v, teacher[k])
    assert data["actor_state_dict"].keys() == data["student_state_dict"].keys()


def test_distillation_resumes_and_refuses_another_teacher(distilled: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "latest.pt").write_bytes((distilled / "checkpoints" / "latest.pt").read_bytes())
    t = Go1Trainer(student_spec(7), out, nthread=1)
    assert t.iteration == 6
    saved = load_checkpoint(out / "checkpoints" / "latest.pt")["student_state_dict"]
    for k, v in t.alg.get_policy().state_dict().items():
        torch.testing.assert_close(v, saved[k])
    t.run()
    assert load_checkpoint(out / "checkpoints" / "latest.pt")["iteration"] == 7
    other = tmp_path / "other.pt"
    other.write_bytes(TEACHER.read_bytes())
    with pytest.raises(CheckpointError, match="'teacher' differs"):
        Go1Trainer(replace(student_spec(8), teacher=str(other)), out, nthread=1)


def test_a_teacher_must_read_the_task_observations(tmp_path: Path) -> None:
    spec = student_spec(1)
    with pytest.raises(CheckpointError, match="history"):
        Go1Trainer(replace(spec, task=replace(spec.task, history=5)), tmp_path, nthread=1)
    with pytest.raises(UserError, match="exclude each other"):
        go1_recipe.train_spec(8, 1, 0, go1_recipe.RecipeOptions(teacher=TEACHER, init_from=TEACHER))
    with pytest.raises(UserError, match="no critic"):
        go1_recipe.train_spec(8, 1, 0, go1_recipe.RecipeOptions(teacher=TEACHER, critic_warmup=5))
    with pytest.raises(UserError, match="not found"):
        go1_recipe.train_spec(8, 1, 0, go1_recipe.RecipeOptions(teacher=tmp_path / "missing.pt"))


def test_ppo_fine_tunes_the_distilled_student_after_a_critic_warmup(distilled: Path, tmp_path: Path) -> None:
    src = distilled / "checkpoints" / "latest.pt"
    spec = replace(student_spec(2), teacher=None, init_from=str(src), critic_warmup=1)
    t = Go1Trainer(spec, tmp_path, nthread=1)
    saved = load_checkpoint(src)["actor_state_dict"]
    actor, critic = t.alg.get_policy(), t.alg.critic

    def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in model.named_parameters()}

    start = weights(actor)
    for k, v in start.items():
        torch.testing.assert_close(v, saved[k])
    critic0 = weights(critic)
    moved: list[tuple[bool, bool]] = []

    def check(row: dict[str, object]) -> None:
        a_now, c_now = weights(actor), weights(critic)
        moved.append(
            (
                any(not torch.equal(a_now[k], start[k]) for k in start),
                any(not torch.equal(c_now[k], critic0[k]) for k in critic0),
            )
        )

    lrs: list[float] = []
    t.run(lambda row: (check(row), lrs.append(t.alg.learning_rate)))
    assert moved == [(False, True), (True, True)]  # iteration 1: only the critic learns
    assert lrs[0] == spec.ppo.learning_rate  # zero KL while frozen: the schedule leaves it
    assert lrs[1] <= 1e-5 * 1.5 ** (spec.ppo.num_learning_epochs * spec.ppo.num_mini_batches)
    hist = json.loads((tmp_path / "history.json").read_text())
    assert all(np.isfinite(h["loss_surrogate"]) for h in hist)


def test_policy_reset_zeroes_only_the_done_robots(distilled: Path) -> None:
    policy = load_go1_policy(distilled / "checkpoints" / "latest.pt")
    assert policy.recurrent
    obs = torch.randn(4, OBS, generator=torch.Generator().manual_seed(1))
    policy.reset()
    a1 = policy.act(obs)
    a2 = policy.act(obs)
    assert not torch.allclose(a1, a2)  # the state moved on
    policy.reset(torch.tensor([True, False, False, True]))
    a3 = policy.act(obs)
    torch.testing.assert_close(a3[[0, 3]], a1[[0, 3]])  # as from a fresh start
    assert not torch.allclose(a3[[1, 2]], a1[[1, 2]])


def test_recurrent_export_carries_the_state_like_torch(distilled: Path, tmp_path: Path) -> None:
    policy = load_go1_policy(distilled / "checkpoints" / "latest.pt")
    paths = export_go1(policy, tmp_path)
    side = json.loads(paths["sidecar"].read_text())
    assert side["recurrent_state"] == [{"input": "h_in", "output": "h_out", "shape": [1, 1, 16]}]
    sess = ort.InferenceSession(str(paths["onnx"]), providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(0)
    h = np.zeros((1, 3, 16), dtype=np.float32)
    policy.reset()
    clip = policy.task_cfg.action_clip
    for _ in range(4):
        obs = torch.randn(3, OBS, generator=gen)
        action, _, h = sess.run(None, {"obs": obs.numpy(), "h_in": h})
        np.testing.assert_allclose(action, policy.act(obs).clamp(-clip, clip).numpy(), atol=1e-5)
    assert np.abs(h).max() > 0
    with torch.no_grad():
        ref = DeployPolicy(policy)(obs, torch.zeros(1, 3, 16))
    assert len(ref) == 3 and ref[2].shape == (1, 3, 16)


def test_runner_carries_and_resets_the_state(distilled: Path, tmp_path: Path) -> None:
    export_go1(load_go1_policy(distilled / "checkpoints" / "latest.pt"), tmp_path)
    runner = OnnxPolicyRunner(tmp_path)
    assert runner.recurrent
    robot = MujocoGo1()
    cmd = np.array([0.5, 0.0, 0.0])
    reading = robot.read()
    first = runner.act(reading, cmd)
    assert np.abs(runner._state["h_in"]).max() > 0
    runner.reset()
    assert not runner._state["h_in"].any()
    np.testing.assert_allclose(runner.act(reading, cmd), first, atol=1e-6)
    side = json.loads((tmp_path / "go1_policy.json").read_text())
    side["recurrent_state"][0]["input"] = "state_in"
    (tmp_path / "go1_policy.json").write_text(json.dumps(side))
    with pytest.raises(ValueError, match="state_in"):
        OnnxPolicyRunner(tmp_path)


def test_lstm_export_carries_both_states(tmp_path: Path) -> None:
    ppo = replace(go1_ppo_config(), actor_rnn_type="lstm", actor_rnn_hidden_dim=8, actor_hidden_dims=(16,))
    task = Go1TaskConfig()
    policy = Go1Policy(build_actor(135, ppo, num_actions=12), task, ppo, {})
    paths = export_go1(policy, tmp_path)
    side = json.loads(paths["sidecar"].read_text())
    assert [e["input"] for e in side["recurrent_state"]] == ["h_in", "c_in"]
    sess = ort.InferenceSession(str(paths["onnx"]), providers=["CPUExecutionProvider"])
    h = c = np.zeros((1, 2, 8), dtype=np.float32)
    policy.reset()
    gen = torch.Generator().manual_seed(2)
    for _ in range(3):
        obs = torch.randn(2, 135, generator=gen)
        action, _, h, c = sess.run(None, {"obs": obs.numpy(), "h_in": h, "c_in": c})
        ref = policy.act(obs).clamp(-task.action_clip, task.action_clip)
        np.testing.assert_allclose(action, ref.numpy(), atol=1e-5)


def test_cli_trains_a_recurrent_student(tmp_path: Path) -> None:
    opts = go1_recipe.RecipeOptions(rnn="lstm", rnn_hidden=8, teacher=TEACHER)
    spec = go1_recipe.train_spec(16, 3, 0, opts)
    assert spec.ppo.actor_rnn_type == "lstm" and spec.ppo.actor_rnn_hidden_dim == 8
    assert spec.ppo.init_noise_std == go1_recipe.DISTILL_ACTION_STD
    assert spec.teacher == str(TEACHER)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A privileged teacher started from the shipped policy (its parameter inputs at zero weight)."""
    out = tmp_path_factory.mktemp("teacher")
    base = student_spec(1)
    ppo = replace(go1_ppo_config(), num_steps_per_env=8, save_interval=1, num_mini_batches=2)
    spec = replace(
        base,
        ppo=replace(ppo, actor_obs_groups=("policy", "params")),
        teacher=None,
        init_from=str(TEACHER),
        critic_warmup=1,
    )
    Go1Trainer(spec, out, nthread=1).run()
    return out / "checkpoints" / "latest.pt"


def test_a_privileged_teacher_starts_as_the_policy_it_widens(tmp_path: Path) -> None:
    ppo = replace(go1_ppo_config(), actor_obs_groups=("policy", "params"))
    spec = Go1TrainSpec(task=TASK, ppo=ppo, iterations=1, seed=0, init_from=str(TEACHER))
    t = Go1Trainer(spec, tmp_path, nthread=1)
    obs = t.vec.get_observations()
    assert obs["params"].shape == (8, 20)
    torch.testing.assert_close(
        obs["params"][:, -1], torch.as_tensor(t.env.randomizer.latency_steps / 200.0).float()
    )
    shipped = load_go1_policy(TEACHER)
    with torch.no_grad():
        torch.testing.assert_close(t.alg.get_policy()(obs), shipped.act(obs["policy"]))
    norm = t.alg.get_policy().obs_normalizer  # the new inputs' statistics come from the robots
    torch.testing.assert_close(norm._mean[0, OBS:], obs["params"].mean(dim=0))
    assert float(norm._std[0, -1]) > 0  # latencies differ between robots


def test_a_privileged_teacher_is_distilled_not_deployed(teacher: Path, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="privileged teacher"):
        load_go1_policy(teacher)
    spec = replace(student_spec(1), teacher=str(teacher))
    t = Go1Trainer(spec, tmp_path, nthread=1)
    assert t.alg.teacher.obs_dim == OBS + 20 and t.alg.get_policy().obs_dim == OBS
    t.run()
    assert load_go1_policy(tmp_path / "checkpoints" / "latest.pt").recurrent
    with pytest.raises(UserError, match="deployable"):
        go1_recipe.train_spec(8, 1, 0, go1_recipe.RecipeOptions(teacher=TEACHER, privileged_actor=True))


def test_a_privileged_teacher_is_evaluated_with_its_worlds_parameters(teacher: Path, tmp_path: Path) -> None:
    from scenefactory.go1 import evaluation as ev

    policy = load_go1_policy(teacher, privileged=True)
    assert policy.params_dim == 20
    seen: list[torch.Tensor] = []

    class Recording:
        params_dim = policy.params_dim

        def act(self, obs: torch.Tensor, params: torch.Tensor | None = None) -> torch.Tensor:
            assert params is not None
            seen.append(params)
            return policy.act(obs, params)

        def reset(self, done: torch.Tensor | None = None) -> None:
            policy.reset(done)

    cfg = replace(ev.quick(ev.EvalConfig(episodes=2, latency_ms=10.0)), commands=((0.0, 0.0, 1.8),))
    ev.tracking_table(policy.task_cfg, Recording(), cfg)
    assert seen and all(torch.allclose(p[:, -1], torch.full((2,), 0.010)) for p in seen)  # latency [s]
    with pytest.raises(ValueError, match=r"reads \(2, 20\) parameters, got None"):
        policy.act(torch.zeros(2, OBS))
    out = go1_jobs.evaluate(go1_jobs.Go1EvalArgs(out=tmp_path, checkpoint=teacher, episodes=1, quick=True))
    assert "a privileged actor, given its world's 20 parameters" in out["world"]


def test_eval_under_a_fixed_latency_and_joint_scale(distilled: Path, tmp_path: Path) -> None:
    from scenefactory.go1 import evaluation as ev

    policy = load_go1_policy(distilled / "checkpoints" / "latest.pt")
    cond = ev.EvalConfig(latency_ms=10.0, joint_scale=1.5)
    env = ev._eval_env(policy.task_cfg, 3, 1.0, 0, cond)
    assert (env.randomizer.latency_steps == 2).all()
    params = env.randomizer.privileged()
    np.testing.assert_allclose(params[:, -1], 1.5)  # the joint damping/friction scale
    np.testing.assert_allclose(params[:, 0], 1.0)  # floor friction stays nominal
    assert env.cfg.noise is None and env.cfg.pushes is None
    with pytest.raises(ValueError, match=r"latency_ms 7.0: must be a whole number of 5 ms"):
        ev._eval_env(policy.task_cfg, 3, 1.0, 0, ev.EvalConfig(latency_ms=7.0))
    with pytest.raises(ValueError, match=r"at most one policy period \(20 ms\)"):
        ev._eval_env(policy.task_cfg, 3, 1.0, 0, ev.EvalConfig(latency_ms=25.0))
    student = distilled / "checkpoints" / "latest.pt"
    with pytest.raises(UserError, match=r"latency_ms 7\.0"):
        go1_jobs.evaluate(
            go1_jobs.Go1EvalArgs(out=tmp_path, checkpoint=student, episodes=1, quick=True, latency_ms=7.0)
        )
    ckpt = str(distilled / "checkpoints" / "latest.pt")
    args = ["eval", "go1", "--checkpoint", ckpt, "--episodes", "1", "--quick", "--out", str(tmp_path)]
    assert main([*args, "--latency-ms", "10", "--joint-scale", "1.5"]) == 0
    out = json.loads((tmp_path / "metrics.json").read_text())
    assert "action latency 10 ms and joint damping/friction x1.5" in out["world"]
    assert out["eval_config"]["latency_ms"] == 10.0 and out["eval_config"]["joint_scale"] == 1.5


def test_a_recurrent_policy_widens_its_recurrent_layer(distilled: Path, tmp_path: Path) -> None:
    ckpt = distilled / "checkpoints" / "latest.pt"
    base = student_spec(1)
    spec = replace(
        base,
        ppo=replace(base.ppo, actor_obs_groups=("policy", "params")),
        teacher=None,
        init_from=str(ckpt),
        critic_warmup=1,
    )
    t = Go1Trainer(spec, tmp_path, nthread=1)
    obs = t.vec.get_observations()
    student = load_go1_policy(ckpt)
    with torch.no_grad():  # the new inputs start at zero weight in the GRU's input layer
        torch.testing.assert_close(t.alg.get_policy()(obs), student.act(obs["policy"]))
