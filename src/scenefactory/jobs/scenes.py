"""The scenes and agents of the driving jobs: which scenes a job plays (a ``--scenes`` folder, or
procedural ones from a seed range), how many agents a world drives (``--agents auto``), and what
happens to the agents beyond them (said once, on stderr)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from scenefactory.bounds import AUTO, policy_steps
from scenefactory.errors import UserError, warn
from scenefactory.jobs.console import console
from scenefactory.scenes.library import load_scene_dir, procedural_scenes
from scenefactory.scenes.procedural_params import DEFAULT_SIGNAL_CYCLE_S
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.slots import DEFAULT_MIN_FILL, agents_per_world_for, initial_fill


def resolve_agents(
    agents: int | str, scenes: Sequence[Scene], source: Path | None, max_agents: int | None = None
) -> int:
    """``agents``, or for ``"auto"`` the agents per world the scenes' controlled-agent counts call
    for (:func:`~scenefactory.tasks.driving.slots.agents_per_world_for`: the largest K whose worlds
    start at least :data:`~scenefactory.tasks.driving.slots.DEFAULT_MIN_FILL` full on average, at
    most ``max_agents``), said on stderr. ``auto`` needs scenes from a folder (``source``):
    procedural scenes place as many agents as they are asked for, so there is nothing to choose from."""
    if agents != AUTO:
        return int(agents)
    if source is None or not scenes:
        raise UserError(
            "--agents auto chooses the agents per world from the scenes of --scenes DIR; procedural "
            "scenes place as many agents as --agents asks for, so give a number"
        )
    counts = [sc.num_agents for sc in scenes]
    k = agents_per_world_for(counts, DEFAULT_MIN_FILL, max_agents)
    console.print(
        f"--agents auto: {k} agents per world for the {len(scenes)} scenes of {source} "
        f"({min(counts)}-{max(counts)} agents each; worlds start {initial_fill(counts, k):.0%} full "
        f"on average, the agents beyond {k} replay their logs)"
    )
    return k


def scene_source(scenes_dir: Path | None, split: str = "all", procedural: str = "procedural") -> str:
    """Where scenes come from, as metrics and specs record it: ``procedural`` (or the given name),
    ``dir:PATH``, or ``dir:PATH split=train|eval`` for one split of a converted folder."""
    if scenes_dir is None:
        return procedural
    return f"dir:{scenes_dir}" + ("" if split == "all" else f" split={split}")


def signal_cycle(task: DrivingTaskConfig) -> float:
    """The signal cycle of procedural junctions for ``task`` [s]: signalled when the task observes
    traffic signals (``--signals``), else 0 (none)."""
    return DEFAULT_SIGNAL_CYCLE_S if task.observations.traffic_signals else 0.0


def training_scenes(
    task: DrivingTaskConfig, num_procedural: int, seed: int, loaded: Sequence[Scene] = ()
) -> list[Scene]:
    """The ``loaded`` scenes (of a ``--scenes`` folder) followed by ``num_procedural`` procedural
    training scenes from ``seed``, with ``task``'s agents per world and signals."""
    scenes = list(loaded)
    if num_procedural:
        scenes += procedural_scenes(
            "train", num_procedural, task.agents_per_world, base_seed=seed, signal_cycle_s=signal_cycle(task)
        )
    return scenes


def eval_scenes(
    num: int,
    agents: int,
    seed: int,
    scenes_dir: Path | None = None,
    signal_cycle_s: float = 0.0,
    scene_split: str = "all",
) -> list[Scene]:
    """The first ``num`` scenes of ``scenes_dir`` (of its ``scene_split``), or held-out procedural
    scenes (seeds from the eval range, disjoint from every training seed; junctions signalled with
    ``signal_cycle_s``)."""
    if scenes_dir is not None:
        return load_scene_dir(scenes_dir, scene_split, num)
    return procedural_scenes("eval", num, agents, base_seed=seed, signal_cycle_s=signal_cycle_s)


def check_policy_rate(task: DrivingTaskConfig, physics_hz: float) -> None:
    """``UserError`` unless the checkpoint's policy step is a whole number of physics steps."""
    hz = 1.0 / task.dt_s
    policy_steps(physics_hz, hz, f"the checkpoint's {hz:g} Hz policy")


def agents_left_out(scenes: Sequence[Scene], k: int, source: Path | None, flag: str) -> int:
    """Warn (one line on stderr) when scenes hold more controlled agents than the ``k`` slots of a
    world, and return how many agents are beyond them: only each scene's first ``k`` are driven and
    scored. The others are replayed from their scene's log, as replayed vehicles the driven agents
    see and can hit (``tasks.driving.pool``; ``evaluation.human.replay_beyond`` for evaluation);
    those of a scene without a log (procedural) are left out. ``flag`` says where ``k`` comes from
    (the checkpoint's agents per world, ``--agents``)."""
    over = [sc for sc in scenes if sc.num_agents > k]
    if not over:
        return 0
    beyond = sum(sc.num_agents - k for sc in over)
    replayed = sum(sc.num_agents - k for sc in over if sc.log is not None)
    most = max(sc.num_agents for sc in over)
    fate = [f"the other {replayed} replay their logs (replayed vehicles the driven ones see and can hit)"]
    fate = fate if replayed else []
    if beyond - replayed:
        fate.append(f"{beyond - replayed} agents of scenes without a log are left out")
    warn(
        f"{len(over)} of {len(scenes)} scenes in {source} hold more controlled agents than {flag} "
        f"({k}), up to {most}: only the first {k} of each are driven and scored, {', '.join(fate)}"
    )
    return beyond
