"""Recorded episodes: what a renderer or a report needs from one world's rollout."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scenefactory.scenes.scene import Scene


@dataclass(frozen=True)
class EpisodeRecord:
    """One world's episode, T steps of K agents (numpy, SI units).

    - ``pos_xy``  (T, K, 2) float, vehicle centre in the scene frame [m].
    - ``yaw``     (T, K) float [rad].
    - ``speed``   (T, K) float [m/s].
    - ``status``  (T, K) int, ``AgentStatus`` codes.
    - ``dt_s``    seconds between steps.
    The scene supplies the road graph, goals, routes, sizes and ``agent_valid``.

    What a step knew of each agent, when the recording kept it (``None`` otherwise; step 0, the
    spawn, and steps after an agent finished hold NaN):

    - ``ttc_s``        (T, K) smallest time-to-collision to any object (agents and logged objects)
      at that step [s] (inf: none within the horizon).
    - ``drac_mps2``    (T, K) largest deceleration rate to avoid a crash with any object [m/s²].
    - ``reward``       (T, K) the step's weighted reward.
    - ``reward_terms`` name → (T, K) each term's unweighted value (``StepResult.reward_terms``).
    """

    scene: Scene
    pos_xy: np.ndarray
    yaw: np.ndarray
    speed: np.ndarray
    status: np.ndarray
    dt_s: float
    title: str = ""
    ttc_s: np.ndarray | None = None
    drac_mps2: np.ndarray | None = None
    reward: np.ndarray | None = None
    reward_terms: Mapping[str, np.ndarray] | None = None

    @property
    def num_steps(self) -> int:
        """T."""
        return int(self.pos_xy.shape[0])
