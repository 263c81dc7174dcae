"""Closed-loop rollouts of a policy on held-out scenes: metrics and recorded episodes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from scenefactory.engines.base import Engine
from scenefactory.engines.spec import EngineSpec
from scenefactory.evaluation.idm_driver import CONSTANT_VELOCITY, IDM, constant_velocity_actions, idm_actions
from scenefactory.evaluation.record import EpisodeRecord
from scenefactory.evaluation.step_record import LoggedObjects, step_extras
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.metrics import EpisodeLog, summarize
from scenefactory.tasks.driving.status import AgentStatus

PolicyFn = Callable[[torch.Tensor], torch.Tensor]
"""Observations (W, K, D) → actions (W, K, 2)."""

EXPERT = "expert"
"""Policy name for the logged drivers, closed loop: each step, the action that takes each agent's
current state to its next logged state (``DrivingEnv.expert_actions``; see
:mod:`scenefactory.tasks.driving.expert`): the human baseline, and the first measure of how far an
engine is from real driving."""
EXPERT_OPEN_LOOP = "expert-open-loop"
"""Policy name for the logged drivers open loop: the kinematic inverse of each log, whatever the
state (drifts wherever the engine is not the kinematic bicycle)."""


RULE_DRIVERS = (CONSTANT_VELOCITY, IDM)
"""Rule-based drivers (``evaluation.idm_driver``): baselines beside the logged drivers and a policy."""


def _act(policy: PolicyFn | str, env: DrivingEnv, obs: torch.Tensor) -> torch.Tensor:
    if policy in (EXPERT, EXPERT_OPEN_LOOP):
        return env.expert_actions(closed_loop=policy == EXPERT)
    if policy == CONSTANT_VELOCITY:
        return constant_velocity_actions(env)
    if policy == IDM:
        return idm_actions(env)
    if isinstance(policy, str):
        raise ValueError(
            f"unknown policy '{policy}', expected a callable, '{EXPERT}', '{EXPERT_OPEN_LOOP}',"
            f" '{CONSTANT_VELOCITY}' or '{IDM}'"
        )
    return policy(obs)


def evaluate(
    policy: PolicyFn | str,
    task_cfg: DrivingTaskConfig,
    scenes: Sequence[Scene],
    engine: EngineSpec | Engine = EngineSpec(),
    num_worlds: int = 64,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    device: str | torch.device = "cpu",
) -> tuple[dict[str, Any], EpisodeLog]:
    """Play every scene exactly once (worlds take them in order, each under its own road condition)
    on ``engine`` (a spec, built for the evaluation's worlds on ``device``, or a built engine of
    ``min(num_worlds, len(scenes))`` worlds) and summarize the agent-episodes; ``policy`` gets the
    observations on ``device``.

    Returns ``(metrics, log)``; ``metrics`` adds ``scenes`` (world-episodes played) to
    :func:`~scenefactory.tasks.driving.metrics.summarize`'s keys.
    """
    n = len(scenes)
    # evaluation plays each scene under its own road condition, never a randomized one, and every
    # agent-episode to its end (the training reset policy would score its survivors as time-outs)
    cfg = replace(
        task_cfg,
        num_worlds=min(num_worlds, n),
        water_film_randomization_mm=None,
        min_active_fraction=0.0,
    )
    env = DrivingEnv(
        cfg,
        scenes,
        engine=engine,
        seed=seed,
        sequential_scenes=True,
        device=device,
    )
    log = EpisodeLog()
    completed = 0
    obs = env.observations()
    with torch.inference_mode():
        while completed < n:
            serial_before = env.serial.clone()
            res = env.step(_act(policy, env, obs))
            obs = res.obs
            log.add(res.finished, keep=res.finished.serial < n)
            if res.reset_worlds.numel():
                completed += int((serial_before[res.reset_worlds] < n).sum())
                if progress is not None:
                    progress(min(completed, n), n)
    metrics = summarize(log.cat())
    metrics["scenes"] = n
    return metrics, log


def record_episodes(
    policy: PolicyFn | str,
    task_cfg: DrivingTaskConfig,
    scenes: Sequence[Scene],
    engine: EngineSpec | Engine = EngineSpec(),
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> list[EpisodeRecord]:
    """Play one episode per scene (one world each, in parallel, on ``device``) and record every step
    for rendering: poses, speeds and statuses, and what each step knew of each agent (TTC, DRAC,
    reward and its terms, :mod:`~scenefactory.evaluation.step_record`)."""
    cfg = replace(task_cfg, num_worlds=len(scenes), water_film_randomization_mm=None, min_active_fraction=0.0)
    env = DrivingEnv(cfg, scenes, engine=engine, seed=seed, sequential_scenes=True, device=device)
    w = env.num_worlds
    st = env.engine.state()
    frames: list[tuple[np.ndarray, ...]] = [(_np(st.pos_xy), _np(st.yaw), _np(st.speed), _np(env.status))]
    length = np.full(w, -1)
    obs = env.observations()
    step = 0
    logged = LoggedObjects(scenes, env.device)
    extras: list[dict[str, np.ndarray]] = []
    with torch.inference_mode():
        while (length < 0).any():
            res = env.step(_act(policy, env, obs))
            obs = res.obs
            step += 1
            steps = torch.full((w,), step, dtype=torch.long, device=env.device)
            horizon = cfg.observations.ttc_horizon_s
            extras.append(step_extras(res, env.length, env.width, logged, steps, horizon))
            # status of this step; a world that just reset shows its last state (captured before reset)
            status = _np(env.status)
            st = env.engine.state()
            pos, yaw, speed = _np(st.pos_xy), _np(st.yaw), _np(st.speed)
            for wi in res.reset_worlds.tolist():
                prev = frames[-1]
                pos[wi], yaw[wi], speed[wi] = prev[0][wi], prev[1][wi], prev[2][wi]
                status[wi] = _final_status(res, wi, prev[3][wi])
                if length[wi] < 0:
                    length[wi] = step
            frames.append((pos, yaw, speed, status))
    records = []
    for wi in range(w):
        t_end = int(length[wi]) + 1
        scene = scenes[wi]
        ks, n = scene.max_agents, min(scene.max_agents, env.agents_per_world)

        def column(i: int, wi: int = wi, t_end: int = t_end, ks: int = ks, n: int = n) -> np.ndarray:
            # the scene's agent slots (T, ks, ...): simulated ones first, the rest (beyond K) empty
            arr = np.stack([f[i][wi] for f in frames[:t_end]])
            out = np.zeros((arr.shape[0], ks, *arr.shape[2:]), dtype=arr.dtype)
            out[:, :n] = arr[:, :n]
            return out

        if ks > n:  # agents the world had no slot for are not drawn
            scene = replace(scene, agent_valid=scene.agent_valid & (np.arange(ks) < n))

        def extra(name: str, wi: int = wi, t_end: int = t_end, ks: int = ks, n: int = n) -> np.ndarray:
            # (T, ks): NaN at step 0 (the spawn) and in the empty slots
            out = np.full((t_end, ks), np.nan, dtype=np.float32)
            if t_end > 1:
                out[1:, :n] = np.stack([e[name][wi, :n] for e in extras[: t_end - 1]])
            return out

        terms = sorted(name.removeprefix("term:") for name in extras[0] if name.startswith("term:"))
        records.append(
            EpisodeRecord(
                scene=scene,
                pos_xy=column(0),
                yaw=column(1),
                speed=column(2),
                status=column(3),
                dt_s=cfg.dt_s,
                title=scene.name,
                ttc_s=extra("ttc_s"),
                drac_mps2=extra("drac_mps2"),
                reward=extra("reward"),
                reward_terms={name: extra(f"term:{name}") for name in terms},
            )
        )
    return records


def _np(t: torch.Tensor) -> np.ndarray:
    """A copy of ``t`` as a numpy array (from any device)."""
    return t.detach().cpu().numpy().copy()


def _final_status(res: Any, world: int, prev_status: np.ndarray) -> np.ndarray:
    """Statuses of a world at the step it finished, from the finished-episode records."""
    status = prev_status.copy()
    f = res.finished
    sel = (f.world == world).nonzero().squeeze(-1)
    for i in sel.tolist():
        status[int(f.agent[i])] = int(f.outcome[i])
    status[status == int(AgentStatus.ACTIVE)] = int(AgentStatus.TIMEOUT)
    return status
