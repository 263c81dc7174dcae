"""Who the policy drives in an evaluation on converted WOMD scenes (``eval drive --control``).

- ``all``: every agent the converter made controllable (the default; the scene's K slots);
- ``sdc``: the self-driving car only, every other object replays its log (PufferDrive's evaluator,
  Waymax and nuPlan's non-reactive "human replay" setting);
- ``tracks-to-predict``: the SDC and the scenario's ``tracks_to_predict`` (the objects WOSAC
  evaluates), the rest replaying.

The converter orders a scene's controlled agents SDC first, then the tracks to predict
(``scenes.womd.convert.select_agents``) and records their WOMD ids in ``Scene.params["agents"]``
(``controlled_track_ids``, ``sdc_track_id``, ``tracks_to_predict_ids``), so a mode keeps the first n
agents and turns the others into replayed objects (:func:`~scenefactory.evaluation.human.replay_beyond`).
The human baseline is run on the same restricted scenes, so it is measured in the same mode. A
scene whose SDC (or tracks to predict) the converter could not control (parked, too short a log,
not a vehicle) has nobody to drive in that mode and is skipped; the count is reported.

What the objects the policy does not drive do (``eval drive --others``):

- ``log``: they replay their logs (the default; non-reactive, as above);
- ``idm``: the logged vehicles follow their logged paths with the IDM speed law and brake for the
  policy's agents (Waymax ``IDMRoutePolicy``, nuPlan's reactive setting;
  :mod:`~scenefactory.tasks.driving.replay_idm`, parameters :data:`REACTIVE_IDM`); pedestrians,
  cyclists and other objects keep their logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from scenefactory.errors import UserError
from scenefactory.evaluation.human import replay_beyond
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.idm import IdmParams

CONTROL_MODES = ("all", "sdc", "tracks-to-predict")
OTHERS_MODES = ("log", "idm")
"""``--others``: the objects the policy does not drive replay their logs, or (the vehicles) react."""
REACTIVE_IDM = IdmParams()
"""The IDM of ``--others idm``: Waymax ``IDMRoutePolicy``'s defaults (s0 2 m, T 2 s, a_max 2 m/s^2,
b 4 m/s^2, delta 4, 10 m lookahead in 10 probes), each vehicle's own top logged speed as v0."""
IDM_SOURCE = (
    "Treiber, Hennecke & Helbing 2000 (Phys. Rev. E 62:1805) speed law; parameters of Waymax"
    " IDMRoutePolicy (waymax/agents/waypoint_following_agent.py); v0 = each vehicle's top logged speed"
)


def controlled_count(scene: Scene, mode: str) -> int:
    """How many of ``scene``'s first controlled agents ``mode`` drives (all of them for ``all``).

    Raises:
        UserError: for an unknown mode, a scene converted before the converter recorded the SDC and
            tracks-to-predict ids, or one whose selected agents are not the first ones.
    """
    if mode not in CONTROL_MODES:
        raise UserError(f"--control must be one of {', '.join(CONTROL_MODES)}, got {mode!r}")
    if mode == "all":
        return scene.num_agents
    agents = scene.params.get("agents") if isinstance(scene.params, dict) else None
    if not isinstance(agents, dict) or "sdc_track_id" not in agents or "controlled_track_ids" not in agents:
        raise UserError(
            f"--control {mode}: scene {scene.name!r} does not record its SDC and tracks-to-predict ids"
            " (params.agents.sdc_track_id); convert its WOMD shard again with this version"
        )
    wanted = {int(agents["sdc_track_id"])}
    if mode == "tracks-to-predict":
        wanted |= {int(i) for i in agents.get("tracks_to_predict_ids", [])}
    ids = [int(i) for i in agents["controlled_track_ids"]]
    n = 0
    while n < len(ids) and ids[n] in wanted:
        n += 1
    if any(i in wanted for i in ids[n:]):
        raise UserError(
            f"--control {mode}: scene {scene.name!r} controls its selected tracks out of order"
            f" ({ids}); convert its WOMD shard again with this version"
        )
    return n


def restrict_control(
    scenes: Sequence[Scene], mode: str, scenes_dir: Path | None
) -> tuple[list[Scene], dict[str, Any]]:
    """``scenes`` with only the agents ``mode`` drives left controlled (the others replay their logs),
    scenes with none dropped; and the record for ``metrics.json["control"]``."""
    if mode == "all":
        return list(scenes), {"mode": mode, "scenes": len(scenes), "skipped_without_agent": 0}
    if scenes_dir is None:
        raise UserError(f"--control {mode} needs --scenes DIR (scenes converted from WOMD)")
    out = []
    for sc in scenes:
        n = controlled_count(sc, mode)
        if n > 0:
            out.append(replay_beyond(sc, n))
    if not out:
        raise UserError(f"--control {mode}: no scene of {scenes_dir} controls its SDC (or tracks to predict)")
    return out, {
        "mode": mode,
        "scenes": len(out),
        "skipped_without_agent": len(scenes) - len(out),
        "agents": sum(sc.num_agents for sc in out),
    }


def with_others(task: DrivingTaskConfig, mode: str) -> tuple[DrivingTaskConfig, dict[str, Any]]:
    """``task`` with the replayed objects in ``mode`` (module docstring) and the record for
    ``metrics.json["others"]``.

    Raises:
        UserError: for a mode not in :data:`OTHERS_MODES`.
    """
    if mode not in OTHERS_MODES:
        raise UserError(f"--others must be one of {', '.join(OTHERS_MODES)}, got {mode!r}")
    if mode == "log":
        return replace(task, replay_idm=None), {"mode": mode}
    record = {
        "mode": mode,
        "reacting": "vehicles (pedestrians, cyclists and other objects keep their logs)",
        "idm": asdict(REACTIVE_IDM),
        "source": IDM_SOURCE,
    }
    return replace(task, replay_idm=REACTIVE_IDM), record
