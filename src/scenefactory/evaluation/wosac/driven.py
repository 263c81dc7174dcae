"""WOSAC rollouts of a trained driving policy (``benchmark wosac --policy checkpoint``).

Each scenario is converted as ``scenefactory convert`` converts it (``scenes.womd.convert``), with
every object it observes from the current step on kept (none left out) and up to
:data:`~scenefactory.bounds.MAX_AGENTS` controllable vehicles; a driving environment
(:class:`~scenefactory.tasks.driving.env.DrivingEnv`) runs R worlds of it (one a rollout) on the
policy's engine, and the policy drives every controllable vehicle (the env's agents), its actions
**sampled** from its Gaussian each step (the rollouts differ). Every other object is simulated as
``--others`` says (``evaluation.control``): ``log`` replays its log as stored (the values the
``log`` policy gives), ``idm`` moves the logged vehicles along their logged paths with the IDM speed
law, braking for the agents, the others on their logs. Each object valid at the current step is in
the output (the joint scene WOSAC scores). A simulated agent keeps the logged z of the current step;
its x, y and heading are the engine's.

An agent that has finished (goal: the end of its logged path, collision or off-road) stands where it
finished (the environment freezes it); a rollout whose agents have all finished keeps its objects
going without them (its world is not restarted). A scenario with no controllable vehicle (the
converter refuses it) is simulated by its log, and counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from scenefactory.bounds import MAX_AGENTS
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.evaluation.control import with_others
from scenefactory.evaluation.wosac.config import CURRENT_TIME_INDEX, N_SIMULATION_STEPS, STEP_S
from scenefactory.evaluation.wosac.rollouts import log_replay
from scenefactory.evaluation.wosac.scenario import WosacScenario
from scenefactory.scenes.womd.convert import ScenarioConversionError, scenario_to_scene, select_agents
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.replay_idm import ReplayIdm

KEEP_EVERY_OBJECT = 1_000_000
"""``max_replay`` of the conversion: no object is left out."""


@dataclass(frozen=True)
class Driver:
    """A driving policy for WOSAC: ``act`` maps observations (W, K, D) to actions (W, K, 2) (sampled,
    for rollouts that differ), ``task`` its task config (observations, 10 Hz step), ``engine`` the
    engine it drives, ``others`` what the other objects do (``log`` or ``idm``), ``name`` for the
    report (e.g. the checkpoint's path)."""

    act: Callable[[torch.Tensor], torch.Tensor]
    task: DrivingTaskConfig
    engine: EngineSpec
    others: str = "log"
    name: str = "checkpoint"

    def __post_init__(self) -> None:
        """The policy must step at WOSAC's 0.1 s and its episodes outlast the 80 simulated steps."""
        if abs(self.task.dt_s - STEP_S) > 1e-9:
            raise UserError(
                f"benchmark wosac: the policy {self.name} steps every {self.task.dt_s} s; WOSAC simulates"
                f" at {STEP_S} s (a 10 Hz policy)"
            )
        if self.task.max_steps <= N_SIMULATION_STEPS:
            raise UserError(
                f"benchmark wosac: the policy {self.name}'s episodes last {self.task.max_steps} steps;"
                f" WOSAC simulates {N_SIMULATION_STEPS}"
            )
        with_others(self.task, self.others)  # a clear error for a bad mode, now


def driven_rollouts(
    scenario: Any, scn: WosacScenario, driver: Driver, rollouts: int
) -> tuple[torch.Tensor, dict[str, int]]:
    """The joint scenes' future (R, N, 80, 4) x, y, z, heading of ``scn``'s objects with the policy
    driving the controllable vehicles (module docstring), and counts: ``agents`` driven,
    ``reacting`` replayed vehicles under ``idm`` (0 under ``log``), ``converted`` (1, or 0 when the
    scenario has no controllable vehicle and was replayed)."""
    out = log_replay(scn, rollouts)
    try:
        scene, _ = scenario_to_scene(scenario, max_agents=MAX_AGENTS, max_replay=KEEP_EVERY_OBJECT)
    except ScenarioConversionError:
        return out, {"agents": 0, "reacting": 0, "converted": 0}
    origin = torch.tensor(scene.params["origin_xy"], dtype=torch.float32)
    sel = select_agents(scenario, np.asarray(scene.params["origin_xy"]), MAX_AGENTS, KEEP_EVERY_OBJECT)
    ids = [int(tr.id) for tr in scenario.tracks]
    row_of = {int(i): r for r, i in enumerate(scn.object_id.tolist())}
    k = scene.num_agents
    agent_slot, agent_row = _pairs([row_of.get(ids[i]) for i in sel.controlled])
    task, _ = with_others(
        replace(
            driver.task,
            num_worlds=rollouts,
            agents_per_world=k,
            water_film_randomization_mm=None,
            min_active_fraction=0.0,
            friction_change=None,
        ),
        driver.others,
    )
    env = DrivingEnv(task, [scene], engine=driver.engine, device="cpu")
    idm = env.replay_idm
    rep_slot, rep_row = _pairs([row_of.get(ids[i]) for i in sel.replayed])
    reacting = torch.zeros(0, dtype=torch.long)
    if idm is not None and len(rep_slot):
        veh = idm.vehicle[idm.rows[0, rep_slot]]
        rep_slot, rep_row = rep_slot[veh], rep_row[veh]
        reacting = rep_slot
    z0 = scn.traj[:, CURRENT_TIME_INDEX, 2]
    orphan = None if idm is None else ReplayIdm(env.pool, idm.params, rollouts, task.dt_s)
    if orphan is not None:
        orphan.reset(torch.arange(rollouts), torch.zeros(rollouts, dtype=torch.long))
    no_agents = tuple(torch.zeros(rollouts, 0, *s) for s in ((2,), (), (2,), (), ()))
    no_agents += (torch.zeros(rollouts, 0, dtype=torch.bool),)
    done = torch.zeros(rollouts, dtype=torch.bool)
    last_xy = env.engine.state().pos_xy.clone()
    last_yaw = env.engine.state().yaw.clone()
    obs = env.observations()
    with torch.inference_mode():
        for t in range(N_SIMULATION_STEPS):
            before = None if idm is None else idm.state_dict()
            res = env.step(driver.act(obs))
            obs = res.obs
            last_xy = torch.where(done[:, None, None], last_xy, res.state.pos_xy)
            last_yaw = torch.where(done[:, None], last_yaw, res.state.yaw)
            if len(agent_slot):
                out[:, agent_row, t, :2] = last_xy[:, agent_slot] + origin
                out[:, agent_row, t, 2] = z0[agent_row]
                out[:, agent_row, t, 3] = last_yaw[:, agent_slot]
            newly = torch.zeros(rollouts, dtype=torch.bool)
            newly[res.reset_worlds] = True
            newly &= ~done
            if idm is not None and orphan is not None:
                if bool(newly.any()) and before is not None:  # go on without the agents, from step t
                    kept = orphan.state_dict()
                    orphan.load_state_dict(
                        {name: torch.where(newly[:, None], before[name], kept[name]) for name in kept}
                    )
                if bool((done | newly).any()):
                    orphan.step(torch.full((rollouts,), t + 1), no_agents)  # type: ignore[arg-type]
                step = torch.full((rollouts,), t + 1)
                live = idm._state(step)
                gone = orphan._state(step)
                pos = torch.where((done | newly)[:, None, None], gone[0], live[0])
                yaw = torch.where((done | newly)[:, None], gone[1], live[1])
                if len(rep_slot):
                    out[:, rep_row, t, :2] = pos[:, rep_slot] + origin
                    out[:, rep_row, t, 2] = z0[rep_row]
                    out[:, rep_row, t, 3] = yaw[:, rep_slot]
            done |= newly
    return out, {"agents": len(agent_slot), "reacting": len(reacting), "converted": 1}


def _pairs(rows: list[int | None]) -> tuple[torch.Tensor, torch.Tensor]:
    """(slot, row) index pairs of the slots whose object WOSAC simulates (a row, not None)."""
    kept = [(s, r) for s, r in enumerate(rows) if r is not None]
    return (
        torch.tensor([s for s, _ in kept], dtype=torch.long),
        torch.tensor([r for _, r in kept], dtype=torch.long),
    )
