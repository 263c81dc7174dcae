"""Legged navigation (``scenefactory.navigation``) and the ``go1-navigation`` experiment.

Unit tests pin the abstract engine's equations, the task terms and the tasks' geometry (every
route passable by the robot's disc), the walls as MuJoCo geoms, and system identification (it
recovers known knobs from the unicycle's own transitions). One end-to-end run of ``--quick``
checks the report's structure and one thing that could fail: the corrections fitted on recorded Go1
transitions predict held-out Go1 transitions better than the uncorrected point mass.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from scenefactory.dynamics.correctors import Method
from scenefactory.experiments import ExperimentArgs, read_results
from scenefactory.experiments import go1_navigation as xp
from scenefactory.go1.terrain import go1_model
from scenefactory.navigation.engine import CommandLimits, UnicycleKnobs, delayed_command, unicycle_step
from scenefactory.navigation.fit import NavFitConfig, histories, identify
from scenefactory.navigation.go1_side import boxes_3d
from scenefactory.navigation.policy import PARAM_HIGH, PARAM_LOW, follower_command
from scenefactory.navigation.tasks import (
    ROBOT_RADIUS_M,
    TASKS,
    TaskBatch,
    box_distance,
    collided,
    route_clearance,
    route_point,
    route_progress,
)


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny tensors: a second torch thread only spins (and contends with MuJoCo's)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_nominal_unicycle_moves_at_the_command_from_the_next_step() -> None:
    """Ideal point mass: v' = c; trapezoidal position and yaw over dt."""
    knobs = UnicycleKnobs().to_tensor().expand(2, -1)
    state = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 2.0, math.pi / 2, 1.0, 0.0, 0.0]])
    cmd = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    nxt = unicycle_step(state, cmd, knobs, 0.2)
    assert torch.allclose(nxt[:, 3:], cmd)
    assert nxt[0, :3].tolist() == pytest.approx([0.1, 0.0, 0.0], abs=1e-6)  # from rest: half a step
    assert nxt[1, :3].tolist() == pytest.approx([1.0, 2.2, math.pi / 2], abs=1e-6)  # heading +y


def test_response_gain_and_delay_knobs() -> None:
    knobs = UnicycleKnobs(gain_vx=0.8, response_lin=0.5, delay_steps=1).to_tensor()[None]
    actions = torch.tensor([[[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]])  # the older one acts (delay 1)
    cmd = delayed_command(actions, knobs[:, 5])
    assert cmd.tolist() == [[1.0, 0.0, 0.0]]
    nxt = unicycle_step(torch.zeros(1, 6), cmd, knobs, 0.2)
    assert float(nxt[0, 3]) == pytest.approx(0.4)  # 0 + 0.5 · (0.8 · 1 − 0)
    with pytest.raises(ValueError, match="history"):
        delayed_command(actions, torch.tensor([2.0]))


def test_task_terms_on_a_tiny_batch() -> None:
    boxes = torch.tensor([[[2.0, 0.0, 0.5, 0.5]]]).expand(3, -1, -1)
    valid = torch.ones(3, 1, dtype=torch.bool)
    pos = torch.tensor([[0.0, 0.0], [1.2, 0.0], [2.0, 0.2]])
    assert box_distance(pos, boxes, valid).tolist() == pytest.approx([1.5, 0.3, 0.0])
    batch = TaskBatch.of([TASKS["u_maze"]], 3)
    assert collided(torch.tensor([[0.0, 0.0], [0.0, 0.3], [-0.4, 0.0]]), batch).tolist() == [
        False,
        True,
        True,
    ]
    route = batch.route
    s = route_progress(torch.tensor([[1.0, 0.2], [3.0, 0.6], [1.0, 1.1]]), route)
    assert s.tolist() == pytest.approx([1.0, 2.9 + 0.6, 2.9 + 1.2 + 1.9], abs=1e-5)
    got = route_point(route, torch.tensor([0.5, 3.5, 100.0]))
    assert torch.allclose(got, torch.tensor([[0.5, 0.0], [2.9, 0.6], [0.0, 1.2]]), atol=1e-5)


@pytest.mark.parametrize("name", list(TASKS))
def test_every_route_is_passable_by_the_robot(name: str) -> None:
    assert route_clearance(TASKS[name]) > ROBOT_RADIUS_M + 0.05


def test_walls_are_mujoco_geoms_the_robot_collides_with() -> None:
    boxes = boxes_3d(TASKS["u_maze"])
    assert boxes is not None
    model = go1_model(0.005, None, boxes_m=boxes)
    ids = [model.geom(f"obstacle_{i}").id for i in range(len(boxes))]
    assert len(ids) == len(TASKS["u_maze"].boxes)
    g = model.geom(ids[-1])
    assert g.type[0] == mujoco.mjtGeom.mjGEOM_BOX and g.conaffinity[0] == 1
    assert g.size.tolist() == pytest.approx(boxes[-1, 3:].tolist())


def test_follower_commands_stay_within_the_limits() -> None:
    limits = CommandLimits()
    batch = TaskBatch.of(list(TASKS.values()), 8)
    gen = torch.Generator().manual_seed(0)
    lo, hi = torch.tensor(PARAM_LOW), torch.tensor(PARAM_HIGH)
    theta = lo + (hi - lo) * torch.rand(batch.size, 6, generator=gen)
    state = torch.randn(batch.size, 6, generator=gen) * 3.0
    cmd = follower_command(state, batch, theta, limits)
    low, high = limits.bounds()
    assert bool(((cmd >= low) & (cmd <= high)).all())


def test_sysid_recovers_known_knobs_from_unicycle_transitions() -> None:
    """Transitions of a unicycle with known gains, response and delay: the fit finds them."""
    true = UnicycleKnobs(
        gain_vx=0.8, gain_vy=1.0, gain_yaw=1.2, response_lin=0.5, response_yaw=0.7, delay_steps=1
    )
    gen = torch.Generator().manual_seed(0)
    episodes, steps = 12, 30
    k = true.to_tensor().expand(episodes, -1)
    state, prev = torch.zeros(episodes, 6), torch.zeros(episodes, 3)
    rows: dict[str, list[np.ndarray]] = {
        key: [] for key in ("state", "action", "next_state", "episode", "step")
    }
    for t in range(steps):
        cmd = torch.rand(episodes, 3, generator=gen) * 2.0 - 1.0
        nxt = unicycle_step(state, prev, k, 0.2)  # delay 1: the previous command acts
        for key, v in (("state", state), ("action", cmd), ("next_state", nxt)):
            rows[key].append(v.numpy())
        rows["episode"].append(np.arange(episodes))
        rows["step"].append(np.full(episodes, t))
        state, prev = nxt, cmd
    data = {key: np.concatenate(v) for key, v in rows.items()}
    data["friction"] = np.ones(len(data["step"]), dtype=np.float32)
    cfg = NavFitConfig(method=Method.SYSID, sysid_iterations=80, sysid_horizon=4, sysid_max_delay_steps=2)
    h = histories(data, cfg)
    # the first step of an episode has no earlier command (padded with zero, as here)
    knobs, info = identify(h, np.ones(len(h.episode), dtype=bool), 0.2, cfg)
    assert knobs.delay_steps == 1, info
    got = [knobs.gain_vx, knobs.gain_yaw, knobs.response_lin, knobs.response_yaw]
    assert got == pytest.approx([0.8, 1.2, 0.5, 0.7], abs=0.05)


@pytest.mark.slow
def test_quick_experiment_reports_every_method_and_grounding_beats_the_point_mass(tmp_path: Path) -> None:
    out = tmp_path / "nav"
    out.mkdir()
    xp.run(ExperimentArgs(out=out, quick=True, command="quick"))
    assert {"report.md", "results.json", "budget_curve.png", "go1_transitions.npz"} <= {
        p.name for p in out.iterdir()
    }
    again = read_results(out / "results.json")
    assert again.experiment == "go1-navigation" and again.quick
    figures = json.loads((out / "results.json").read_text())["results"]
    summary = {(c["method"], c["budget_minutes"]): c for c in figures["summary"]}
    main = xp.QUICK.budget_minutes
    for m in Method:
        cell = summary[(m.value, 0.0 if m in (Method.NONE, Method.DR) else main)]
        assert cell["go1_success"]["episodes"] == len(xp.QUICK.tasks) * xp.QUICK.episodes
        lo, hi = cell["go1_success"]["ci"]
        assert 0.0 <= lo <= cell["go1_success"]["rate"] <= hi <= 1.0
    for m in xp.DATA_METHODS:
        assert (m.value, xp.QUICK.curve_minutes[0]) in summary
    assert set(figures["comparison"]) == {m.value for m in Method} - {"none"}
    assert figures["comparison"]["history"]["verdict"] in (
        "better",
        "worse",
        "not resolved (the interval holds 0)",
    )
    # fitted on Go1 data, the corrections predict held-out Go1 transitions better than the point mass
    point_mass = summary[("none", 0.0)]["point_mass_rollout10_pos_err_m"]
    for m in ("sysid", "markov"):
        assert summary[(m, main)]["heldout_rollout10_pos_err_m"] < 0.95 * point_mass, m
    assert "History correction vs direct transfer" in (out / "report.md").read_text()


def test_history_vs_none_verdict_needs_both_intervals_above_zero() -> None:
    """The comparison: pooled Wald and seed-paired t intervals; 'better' only when both exclude 0."""
    from scenefactory.experiments.go1_navigation_report import _cell, _difference
    from scenefactory.stats import t_interval

    m, lo, hi = t_interval([0.5, 0.7, 0.6])
    assert m == pytest.approx(0.6) and (lo, hi) == pytest.approx(
        (0.6 - 4.303 * 0.1 / math.sqrt(3), 0.6 + 4.303 * 0.1 / math.sqrt(3)), abs=1e-4
    )
    # a rate's interval stays in [0, 1]: four seeds succeed everywhere, one nowhere (the 5-seed dr row)
    four_of_five = [1.0, 1.0, 1.0, 1.0, 0.0]
    assert t_interval(four_of_five, 0.0, 1.0)[2] == 1.0 < t_interval(four_of_five)[2]
    fit = {"heldout": {"grounded": {"rollout10_pos_err_m": 0.1}, "point_mass": {"rollout10_pos_err_m": 0.2}}}
    rows = [
        {"method": "dr", "budget_minutes": 0.0, "seed": s, "fit": fit, "abstract": {"success": [True]},
         "go1": {"task": ["open"] * 2, "success": [ok] * 2, "time_s": [None] * 2, "collided": [False] * 2,
                 "fell": [False] * 2}}
        for s, ok in enumerate([True, True, True, True, False])
    ]  # fmt: skip
    low, high = _cell(rows, ["open"])["go1_success_seed_mean"]["ci"]
    assert 0.0 <= low < 0.8 and high == 1.0

    def cell(rates: list[float], n: int) -> dict[str, object]:
        k = round(sum(rates) * n)
        return {
            "go1_success": {"rate": k / (n * len(rates)), "episodes": n * len(rates)},
            "go1_success_seed_rates": rates,
            "seeds": list(range(len(rates))),
        }

    base = cell([0.5, 0.5, 0.5], 24)
    assert _difference(cell([0.9, 0.95, 0.85], 24), base)["verdict"] == "better"
    assert _difference(cell([0.1, 0.15, 0.05], 24), base)["verdict"] == "worse"
    spread = _difference(cell([0.55, 1.0, 0.6], 24), base)  # pooled > 0, seeds disagree
    assert spread["pooled"]["ci"][0] > 0 and spread["paired_by_seed"]["ci"][0] < 0
    assert spread["verdict"].startswith("not resolved")
