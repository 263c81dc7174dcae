"""The human baseline: the logged drivers scored on the same scenes and engine as a policy, and the
account of which logged objects each evaluation controls, replays and leaves out.

- **Agents beyond K.** A world has K agent slots. A scene's controlled agents beyond K are not
  dropped: :func:`replay_beyond` turns them into replayed objects (they follow their logs, collide
  and are observed), so the first K are driven and the rest still shape the traffic. Only an
  agent without a log to replay (a procedural scene) is left out.
- **Agent counts** (:func:`agent_counts`, ``metrics.json["agents"]``): agents ``controlled``,
  objects ``replayed`` and ``left_out``, and ``by_reason``: why the replayed and left-out ones
  are not controlled — the converter's reasons (``Scene.params["agents"]``, see
  ``scenes.womd.convert.REASONS``) plus ``beyond_agents_per_world``.
- **Human baseline** (:func:`human_baseline`): the closed-loop logged drivers
  (:data:`~scenefactory.evaluation.rollout.EXPERT`) on those scenes, every figure of
  :func:`~scenefactory.tasks.driving.metrics.summarize` (any rate another term adds flows through);
  on converted WOMD scenes they should reach ≥ 0.97 of their goals with ≤ 0.01 collision and
  off-road on every engine, or the simulator, not the policy, is what the scores measure. What the
  data itself holds (agents overlapping at spawn, logged objects on an agent's path: see
  ``scenes.plausibility.WARNED``) is counted in ``scene_warnings`` beside the figures (flagged, not
  excluded: a policy and the logged drivers are scored on the same agents).
  :func:`figures_markdown` prints a policy's figures beside them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.engines.base import Engine
from scenefactory.engines.spec import EngineSpec
from scenefactory.evaluation.rollout import EXPERT, evaluate
from scenefactory.io import atomic_write_text
from scenefactory.scenes.plausibility import WARNED
from scenefactory.scenes.scene import ReplayLog, Scene
from scenefactory.scenes.scene_checks import describe_warnings, scene_warnings
from scenefactory.tasks.driving.config import DrivingTaskConfig

BEYOND_K = "beyond_agents_per_world"
"""Reason key of controlled agents beyond a world's K slots (replayed from their logs)."""
TABLE_KEYS = (
    "goal_reach_rate",
    "collision_rate",
    "offroad_rate",
    "red_light_violation_rate",
    "timeout_rate",
    "near_miss_rate",
    "high_drac_rate",
    "min_ttc_s",
    "mean_min_ttc_s",
    "mean_peak_drac_mps2",
    "route_progress",
    "log_divergence_m",
)
"""Figures :func:`figures_markdown` shows, in order (those a metrics dict lacks are skipped)."""
VEHICLE_KIND = 1
"""WOMD object type of a vehicle (``Track.TYPE_VEHICLE``)."""


def replay_beyond(scene: Scene, k: int) -> Scene:
    """``scene`` with its controlled agents beyond the first ``k`` slots moved into its replay log
    (module docstring); unchanged when it has ``k`` or fewer slots or no log."""
    log = scene.log
    if scene.max_agents <= k or log is None:
        return scene
    extra = np.flatnonzero(scene.agent_valid[k:]) + k
    old = scene.replay
    t = max(log.num_steps, old.valid.shape[1] if old is not None and old.num_objects else 0)
    n_old = old.num_objects if old is not None else 0
    n = n_old + len(extra)
    xy, yaw, vel = np.zeros((n, t, 2)), np.zeros((n, t)), np.zeros((n, t, 2))
    valid = np.zeros((n, t), dtype=bool)
    length, width = np.zeros(n), np.zeros(n)
    kind = np.full(n, VEHICLE_KIND, dtype=np.int64)
    if old is not None and n_old:
        to = old.valid.shape[1]
        xy[:n_old, :to], yaw[:n_old, :to], vel[:n_old, :to] = old.xy, old.yaw, old.vel_xy
        valid[:n_old, :to] = old.valid
        length[:n_old], width[:n_old], kind[:n_old] = old.length_m, old.width_m, old.kind
    tl = log.num_steps
    rows = slice(n_old, n)
    xy[rows, :tl], yaw[rows, :tl], valid[rows, :tl] = log.xy[extra], log.yaw[extra], log.valid[extra]
    heading = np.stack((np.cos(log.yaw[extra]), np.sin(log.yaw[extra])), axis=-1)
    vel[rows, :tl] = heading * log.speed[extra][..., None]
    length[rows], width[rows] = scene.length_m[extra], scene.width_m[extra]
    keep = slice(0, k)
    return replace(
        scene,
        spawn_pose=scene.spawn_pose[keep],
        spawn_speed_mps=scene.spawn_speed_mps[keep],
        route_xy=scene.route_xy[keep],
        route_valid=scene.route_valid[keep],
        goal_xy=scene.goal_xy[keep],
        goal_s_m=scene.goal_s_m[keep],
        length_m=scene.length_m[keep],
        width_m=scene.width_m[keep],
        agent_valid=scene.agent_valid[keep],
        log=replace(log, xy=log.xy[keep], yaw=log.yaw[keep], speed=log.speed[keep], valid=log.valid[keep]),
        replay=ReplayLog(xy, yaw, vel, valid, length, width, kind, dt_s=log.dt_s),
    )


def agent_counts(scenes: Sequence[Scene], k: int) -> dict[str, Any]:
    """How many logged objects an evaluation of ``scenes`` with ``k`` agents per world controls,
    replays and leaves out, and why (module docstring). Scenes converted before the converter
    recorded its counts (or procedural ones) add no reasons; ``scenes_with_counts`` says how many did."""
    controlled = replayed = left_out = beyond = with_counts = 0
    by_reason: dict[str, int] = {}
    for sc in scenes:
        valid = sc.agent_valid
        driven = int(valid[:k].sum())
        over = int(valid[k:].sum())
        controlled += driven
        beyond += over
        replayed += sc.replay.num_objects if sc.replay is not None else 0
        if sc.log is not None:
            replayed += over
        else:
            left_out += over
        conv = sc.params.get("agents")
        if isinstance(conv, Mapping):
            with_counts += 1
            left_out += int(conv.get("left_out", 0))
            for reason, n in dict(conv.get("by_reason", {})).items():
                by_reason[reason] = by_reason.get(reason, 0) + int(n)
    by_reason[BEYOND_K] = beyond
    return {
        "agents_per_world": k,
        "controlled": controlled,
        "replayed": replayed,
        "left_out": left_out,
        "by_reason": by_reason,
        "scenes": len(scenes),
        "scenes_with_counts": with_counts,
        "scene_warnings": warning_counts(scenes),
    }


def warning_counts(scenes: Sequence[Scene]) -> dict[str, int]:
    """:func:`~scenefactory.scenes.scene_checks.scene_warnings` summed over ``scenes`` (every key of
    ``plausibility.WARNED``), and ``scenes_with_warnings``: what the data holds that the simulator
    is not to blame for, e.g. controlled agents already overlapping at spawn (each such agent scores
    a collision at its first step, policy and logged drivers alike)."""
    total = {key: 0 for key, _ in WARNED}
    flagged = 0
    for sc in scenes:
        counts = scene_warnings(sc)
        flagged += any(counts.values())
        for key, n in counts.items():
            total[key] += n
    return {**total, "scenes_with_warnings": flagged}


def describe_counts(counts: Mapping[str, Any]) -> str:
    """One line: ``controlled 12, replayed 30 (parked 8, not_vehicle 20, ...), left out 0``."""
    why = ", ".join(f"{r} {n}" for r, n in counts["by_reason"].items() if n)
    replayed = f"{counts['replayed']} objects replayed" + (f" ({why})" if why else "")
    warned = {k: n for k, n in counts.get("scene_warnings", {}).items() if k != "scenes_with_warnings"}
    data = describe_warnings(warned)
    flagged = (
        f"; the data holds {data} in {counts['scene_warnings']['scenes_with_warnings']} scenes"
        if data
        else ""
    )
    return (
        f"{counts['controlled']} agents controlled ({counts['agents_per_world']} per world), "
        f"{replayed}, {counts['left_out']} left out{flagged}"
    )


def human_baseline(
    task: DrivingTaskConfig,
    scenes: Sequence[Scene],
    engine: EngineSpec | Engine,
    num_worlds: int = 64,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    device: str | torch.device = "cpu",
) -> dict[str, Any]:
    """The logged drivers' metrics on ``scenes`` (already fitted to ``task``'s K, see
    :func:`replay_beyond`) on ``engine`` (on ``device``), as
    :func:`~scenefactory.evaluation.rollout.evaluate` returns them, with ``policy`` = ``expert``."""
    metrics, _ = evaluate(
        EXPERT,
        task,
        scenes,
        engine=engine,
        num_worlds=num_worlds,
        seed=seed,
        progress=progress,
        device=device,
    )
    metrics["policy"] = EXPERT
    # flagged, not excluded: the logged drivers are scored on the same agents as a policy; an agent
    # already overlapping another at spawn collides at its first step in both columns (the data's
    # collision, not the simulator's), and the count says how many of the collisions that can be
    metrics["scene_warnings"] = warning_counts(scenes)
    return metrics


def _cell(metrics: Mapping[str, Any] | None, key: str) -> str:
    if metrics is None or key not in metrics:
        return "—"
    v = float(metrics[key])
    if not math.isfinite(v):
        return "n/a"
    ci = metrics.get(f"{key}_ci95")
    if ci is not None and all(math.isfinite(float(c)) for c in ci):
        return f"{v:.3f} [{float(ci[0]):.3f}, {float(ci[1]):.3f}]"
    return f"{v:.3f}"


def figures_markdown(policy: Mapping[str, Any] | None, human: Mapping[str, Any] | None, label: str) -> str:
    """A markdown table of :data:`TABLE_KEYS` (values with 95 % CIs): ``label``'s column (omitted
    when ``policy`` is None) beside the logged drivers' (omitted when ``human`` is None)."""
    cols: list[tuple[str, Mapping[str, Any]]] = [
        (name, m) for name, m in ((label, policy), ("logged drivers", human)) if m is not None
    ]
    keys = [k for k in TABLE_KEYS if any(k in m for _, m in cols)]
    lines = ["| figure | " + " | ".join(name for name, _ in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    lines += [f"| {k} | " + " | ".join(_cell(m, k) for _, m in cols) + " |" for k in keys]
    episodes = " | ".join(str(m.get("episodes", "—")) for _, m in cols)
    lines.append(f"| agent-episodes | {episodes} |")
    return "\n".join(lines) + "\n"


def write_figures(
    path: Path, policy: Mapping[str, Any] | None, human: Mapping[str, Any] | None, label: str
) -> Path:
    """Write ``metrics.md``: :func:`figures_markdown` of ``policy`` (``label``) beside the logged
    drivers' ``human`` figures, and the agent counts (:func:`describe_counts`) of whichever holds them."""
    given = [m for m in (policy, human) if m is not None]
    counts = next((m["agents"] for m in given if "agents" in m), None)
    engine = next((m["engine"] for m in given if m.get("engine")), "?")
    if isinstance(engine, Mapping):  # an EngineSpec.to_dict()
        engine = engine.get("tier", "?")
    text = f"# Evaluation figures ({engine})\n\n" + figures_markdown(policy, human, label)
    if counts is not None:
        text += f"\nAgents: {describe_counts(counts)}.\n"
    others = next((m["others"] for m in given if "others" in m), None)
    if isinstance(others, Mapping) and others.get("mode") == "idm":
        text += (
            "\nOther objects: the logged vehicles follow their logged paths with an IDM speed law and"
            " brake for the agents (`--others idm`); pedestrians and cyclists replay their logs.\n"
        )
    if human is not None:
        text += (
            "\nLogged drivers: the scenes' own drivers, closed loop on the same engine (the human"
            " baseline; on real logs they should reach ≥ 0.97 of their goals with ≤ 0.01 collision"
            " and off-road).\n"
        )
        overlaps = int(human.get("scene_warnings", {}).get("overlapping_spawns", 0))
        if overlaps:
            text += (
                f"\n**Data, not simulator:** {overlaps} controlled agents overlap another at spawn (and"
                f" so collide at their first step, in both columns); up to {overlaps} of the"
                f" collisions above are the data's. See `scene_warnings` in metrics.json.\n"
            )
    atomic_write_text(path, text)
    return path
