"""Reward terms and episode metrics on hand-built tiny cases."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from scenefactory.engines.base import VehicleState
from scenefactory.stats import wilson_interval
from scenefactory.tasks.driving import rewards as r
from scenefactory.tasks.driving.config import (
    DrivingTaskConfig,
    RewardTerm,
    task_config_from_dict,
    task_config_to_dict,
)
from scenefactory.tasks.driving.context import StepContext
from scenefactory.tasks.driving.env import FinishedEpisodes
from scenefactory.tasks.driving.metrics import EpisodeLog, summarize
from scenefactory.tasks.driving.status import AgentStatus


def _ctx(**over: torch.Tensor) -> StepContext:
    w, k = 2, 2
    z = torch.zeros(w, k)
    f = torch.zeros(w, k, dtype=torch.bool)
    st = VehicleState(
        pos_xy=torch.zeros(w, k, 2),
        yaw=z,
        vel_xy=torch.zeros(w, k, 2),
        vel_b=torch.zeros(w, k, 2),
        speed=over.pop("speed", z),
        yaw_rate=over.pop("yaw_rate", z),
        steer=z,
        accel=z,
        valid=~f,
    )
    base = {
        "state": st,
        "actions": torch.zeros(w, k, 2),
        "prev_actions": torch.zeros(w, k, 2),
        "active": ~f,
        "progress_m": z,
        "goal": f,
        "collided": f,
        "offroad": f,
        "min_ttc_s": torch.full((w, k), math.inf),
        "dt_s": 0.1,
    }
    base.update(over)
    return StepContext(**base)  # type: ignore[arg-type]


def test_event_terms_are_indicators() -> None:
    goal = torch.tensor([[True, False], [False, False]])
    coll = torch.tensor([[False, True], [False, False]])
    off = torch.tensor([[False, False], [True, False]])
    ctx = _ctx(goal=goal, collided=coll, offroad=off)
    assert torch.equal(r.goal_reached(ctx), goal.float())
    assert torch.equal(r.collision(ctx), coll.float())
    assert torch.equal(r.offroad(ctx), off.float())


def test_progress_ttc_comfort_terms_by_hand() -> None:
    ctx = _ctx(
        progress_m=torch.tensor([[1.5, -0.5], [0.0, 2.0]]),
        min_ttc_s=torch.tensor([[0.5, 1.0], [2.0, math.inf]]),
        actions=torch.tensor([[[0.5, 0.5], [0.0, 0.0]], [[1.0, -1.0], [3.0, 0.0]]]),
        prev_actions=torch.tensor([[[0.0, 0.0], [0.0, 0.0]], [[-1.0, 1.0], [1.0, 0.0]]]),
        speed=torch.tensor([[10.0, 10.0], [0.0, 20.0]]),
        yaw_rate=torch.tensor([[0.3, 0.6], [1.0, -0.5]]),
    )
    assert r.route_progress(ctx).tolist() == [[1.5, -0.5], [0.0, 2.0]]
    # 1 - ttc/2 clipped to [0, 1]: 0.75, 0.5, 0, 0
    assert r.ttc_danger(ctx).tolist() == [[0.75, 0.5], [0.0, 0.0]]
    # (0.5² + 0.5²), 0, (2² + 2²), clipped actions: (1 - 1)² = 0
    assert r.action_rate(ctx).flatten().tolist() == pytest.approx([0.5, 0.0, 8.0, 0.0])
    # |v·r| - 4.89 above zero: 10·0.3 = 3 → 0; 10·0.6 = 6 → 1.11; 0; 20·0.5 = 10 → 5.11
    assert r.lateral_accel_excess(ctx).flatten().tolist() == pytest.approx([0.0, 1.11, 0.0, 5.11], abs=1e-5)


def test_config_rejects_offroad_cheaper_than_collision_and_round_trips() -> None:
    cfg = DrivingTaskConfig()
    terms = tuple(replace(t, weight=-1.0) if t.name == "offroad" else t for t in cfg.rewards)
    with pytest.raises(ValueError, match="leaving the road"):
        DrivingTaskConfig(rewards=terms)
    with pytest.raises(ValueError, match="unique"):
        DrivingTaskConfig(rewards=(RewardTerm("a", r.offroad, -1), RewardTerm("a", r.collision, -1)))
    with pytest.raises(ValueError, match="num_worlds"):
        DrivingTaskConfig(num_worlds=0)
    back = task_config_from_dict(task_config_to_dict(cfg))
    assert back == cfg


def test_wilson_interval_matches_reference_values() -> None:
    # 45/50 = 0.9: Wilson 95 % interval (0.7864, 0.9565) (standard tables)
    lo, hi = wilson_interval(45, 50)
    assert lo == pytest.approx(0.7864, abs=1e-4) and hi == pytest.approx(0.9565, abs=1e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def _records(outcomes: list[int], drac: list[float], ttc: list[float]) -> FinishedEpisodes:
    n = len(outcomes)
    return FinishedEpisodes(
        outcome=torch.tensor(outcomes),
        peak_drac_mps2=torch.tensor(drac),
        min_ttc_s=torch.tensor(ttc),
        progress_frac=torch.linspace(0.5, 1.0, n),
        log_divergence_m=torch.full((n,), float("nan")),
        steps=torch.full((n,), 30),
        world=torch.zeros(n, dtype=torch.long),
        agent=torch.arange(n),
        serial=torch.zeros(n, dtype=torch.long),
        scene_id=torch.zeros(n, dtype=torch.long),
    )


def test_summary_rates_drac_and_near_miss() -> None:
    g, c, o, t = (
        int(s) for s in (AgentStatus.GOAL, AgentStatus.COLLISION, AgentStatus.OFFROAD, AgentStatus.TIMEOUT)
    )
    rec = _records([g, g, c, o, t], [0.5, 4.0, 9.0, 0.0, 1.0], [math.inf, 1.5, 3.0, math.inf, 2.5])
    log = EpisodeLog()
    log.add(rec, keep=torch.tensor([True, True, True, True, True]))
    m = summarize(log.cat())
    assert m["episodes"] == 5
    assert m["goal_reach_rate"] == pytest.approx(0.4)
    assert m["collision_rate"] == pytest.approx(0.2)
    assert m["offroad_rate"] == pytest.approx(0.2)
    assert m["timeout_rate"] == pytest.approx(0.2)
    assert m["mean_peak_drac_mps2"] == pytest.approx((0.5 + 4 + 9 + 0 + 1) / 5)
    assert m["high_drac_rate"] == pytest.approx(0.4)  # 4.0 and 9.0 exceed 3.4
    # min TTC: the collision counts as 0 → near misses: 1.5 and the crash
    assert m["near_miss_rate"] == pytest.approx(0.4)
    assert m["min_ttc_s"] == 0.0
    for key in (
        "goal_reach_rate",
        "collision_rate",
        "high_drac_rate",
        "near_miss_rate",
        "mean_peak_drac_mps2",
    ):
        lo, hi = m[f"{key}_ci95"]
        assert lo <= m[key] <= hi
