"""Evaluation episodes that differ (``go1.evaluation``): each episode its own start,
its own command within the row's cell and its own world within the evaluation ranges; the same
seed gives the same numbers; ``fixed_episodes`` keeps the earlier protocol (nominal robot, exact
commands). A stub controller (the home pose, zero actions) keeps the rollouts cheap: what differs
between episodes comes from the evaluation, not from a policy."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from scenefactory.go1 import evaluation as ev
from scenefactory.go1.config import Go1TaskConfig, RandomizationConfig
from scenefactory.go1.jobs import Go1EvalArgs, evaluate

TASK = Go1TaskConfig()


class HomePose:
    """Zero actions (PD to the home pose); records every observation it is given."""

    params_dim = 0

    def __init__(self) -> None:
        self.seen: list[np.ndarray] = []

    def act(self, obs: torch.Tensor, params: torch.Tensor | None = None) -> torch.Tensor:
        self.seen.append(obs.numpy().copy())
        return torch.zeros(obs.shape[0], 12)

    def reset(self, done: torch.Tensor | None = None) -> None:
        pass


def small(**kw: object) -> ev.EvalConfig:
    base = ev.EvalConfig(
        episodes=3,
        episode_s=0.6,
        settle_s=0.2,
        push_at_s=0.2,
        recover_s=0.2,
        commands=((0.0, 0.0, 0.0), (2.0, 0.0, 0.0), (1.0, 0.0, -0.9)),
        push_magnitudes_mps=(1.0,),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_command_cells_keep_zeros_and_the_task_ranges() -> None:
    centres = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [1.0, 0.0, -1.8], [0.0, 0.5, 0.0]])
    cells = ev.command_cells(TASK, centres, ev.EvalConfig(command_cell=(0.1, 0.2, 0.3)))
    np.testing.assert_allclose(cells[0], 0.0)  # standing stays standing
    np.testing.assert_allclose(cells[1], [[1.9, 2.0], [0.0, 0.0], [0.0, 0.0]])  # 2.0 is the top of vx
    np.testing.assert_allclose(cells[2], [[0.9, 1.1], [0.0, 0.0], [-1.8, -1.5]])
    np.testing.assert_allclose(cells[3], [[0.0, 0.0], [0.3, 0.7], [0.0, 0.0]])
    fixed = ev.command_cells(TASK, centres, ev.EvalConfig(fixed_episodes=True))
    np.testing.assert_allclose(fixed[..., 0], centres)
    np.testing.assert_allclose(fixed[..., 1], centres)
    with pytest.raises(ValueError, match="command_cell"):
        ev.EvalConfig(command_cell=(0.1, -0.1, 0.1))


def test_drawn_commands_fill_their_cells_and_follow_the_seed() -> None:
    centres = np.array([[1.0, 0.0, 0.9], [0.0, 0.0, 0.0]])
    cfg = ev.EvalConfig()
    cmds = ev.draw_commands(TASK, centres, cfg, 50, seed=4)
    assert cmds.shape == (100, 3)
    row = cmds[:50]
    assert (np.abs(row[:, 0] - 1.0) <= 0.1).all() and (np.abs(row[:, 2] - 0.9) <= 0.1).all()
    assert (row[:, 1] == 0.0).all() and (cmds[50:] == 0.0).all()
    assert np.unique(row[:, 0]).size == 50  # every episode its own command
    np.testing.assert_array_equal(cmds, ev.draw_commands(TASK, centres, cfg, 50, seed=4))
    assert not np.array_equal(cmds, ev.draw_commands(TASK, centres, cfg, 50, seed=5))
    fixed = ev.draw_commands(TASK, centres, ev.EvalConfig(fixed_episodes=True), 50, seed=4)
    np.testing.assert_array_equal(fixed, np.repeat(centres, 50, axis=0))


def test_worlds_vary_within_the_ranges_around_a_fixed_condition() -> None:
    cfg = ev.EvalConfig(latency_ms=10.0, joint_scale=1.5)
    env = ev._eval_env(TASK, 32, 1.0, 0, cfg, vary=True)
    rnd, ranges = env.randomizer, RandomizationConfig()
    lo, hi = ranges.floor_friction
    assert ((rnd.friction >= lo) & (rnd.friction <= hi)).all() and np.ptp(rnd.friction) > 0.3
    assert np.ptp(rnd.trunk_added_mass_kg) > 1.0 and np.ptp(rnd.motor_strength) > 0.1
    assert (rnd.latency_steps == 2).all()  # the condition: 10 ms in every world
    np.testing.assert_allclose(rnd.joint_friction_scale, 1.5)
    assert env.cfg.noise is None and env.cfg.pushes is None
    fixed = ev._eval_env(TASK, 4, 1.0, 0, replace(cfg, fixed_episodes=True), vary=True)
    np.testing.assert_allclose(fixed.randomizer.friction, 1.0)
    np.testing.assert_allclose(fixed.randomizer.motor_strength, 1.0)


def test_episodes_of_one_cell_differ_and_a_seed_reproduces_them() -> None:
    stub = HomePose()
    rows = ev.tracking_table(TASK, stub, small(), seed=0)
    obs = np.stack(stub.seen[1:])  # (T, C·E, 135) from the first step on (held commands)
    e = 3
    # the episodes of the (1.0, 0, -0.9) row: their own commands and trajectories
    cell = obs[:, 2 * e : 3 * e]
    commands = cell[0, :, 6:9]
    assert np.unique(commands[:, 0]).size == e and np.unique(commands[:, 2]).size == e
    assert not np.allclose(cell[:, 0], cell[:, 1]) and not np.allclose(cell[:, 1], cell[:, 2])
    assert rows[2]["command_cell"] == {"vx_mps": [0.9, 1.1], "vy_mps": [0.0, 0.0], "yaw_radps": [-1.0, -0.8]}
    assert rows[2]["lin_vel_error_ci95"][1] > rows[2]["lin_vel_error_ci95"][0]
    again = ev.tracking_table(TASK, HomePose(), small(), seed=0)
    assert json.dumps(again) == json.dumps(rows)
    other = ev.tracking_table(TASK, HomePose(), small(), seed=1)
    assert other[2]["lin_vel_error_mps"] != rows[2]["lin_vel_error_mps"]
    pushes = ev.push_table(TASK, HomePose(), small(), seed=0)
    assert pushes == ev.push_table(TASK, HomePose(), small(), seed=0)


def test_fixed_episodes_hold_the_exact_command_on_the_nominal_robot() -> None:
    stub = HomePose()
    ev.tracking_table(TASK, stub, small(fixed_episodes=True), seed=0)
    commands = stub.seen[1][:, 6:9]  # the frames after the first step carry the held commands
    np.testing.assert_array_equal(commands[3:6], np.tile([2.0, 0.0, 0.0], (3, 1)))
    var = ev.variation(TASK, small(fixed_episodes=True))
    assert var["protocol"] == "fixed" and var["world"] is None
    assert var["command_cell_half_width"] == [0.0, 0.0, 0.0]
    assert "exact command, in the nominal robot" in " ".join(ev.variation_report(var))


def test_eval_writes_what_varied(tmp_path: Path, one_torch_thread: None) -> None:
    varied = evaluate(Go1EvalArgs(out=tmp_path / "v", controller="model-based", episodes=1, quick=True))
    saved = json.loads((tmp_path / "v" / "metrics.json").read_text())
    assert saved["episodes"] == json.loads(json.dumps(varied["episodes"]))
    world = saved["episodes"]["world"]
    assert world["floor_friction"] == [0.4, 1.25] and world["latency_s"] == [0.0, 0.0]
    assert saved["episodes"]["start_state"]["joint_offset_rad"] == [-0.1, 0.1]
    assert saved["eval_config"]["fixed_episodes"] is False
    report = (tmp_path / "v" / "report.md").read_text()
    assert "push tables (varied protocol)" in report and "Commands: each non-zero component" in report
    fixed = evaluate(
        Go1EvalArgs(out=tmp_path / "f", controller="model-based", episodes=1, quick=True, fixed_episodes=True)
    )
    assert fixed["episodes"]["protocol"] == "fixed" and fixed["world"].startswith("nominal robot")
    assert "flat floor (mu 1.0) for the velocity/push/whole-body tables" in fixed["world"]
    assert "flat floor for the" in varied["world"] and "terrain" not in varied["world"]
    assert "push tables (fixed protocol)" in (tmp_path / "f" / "report.md").read_text()
