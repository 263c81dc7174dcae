"""Recorded episodes: what a renderer or a report needs from one world's rollout."""

from __future__ import annotations

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
    """

    scene: Scene
    pos_xy: np.ndarray
    yaw: np.ndarray
    speed: np.ndarray
    status: np.ndarray
    dt_s: float
    title: str = ""

    @property
    def num_steps(self) -> int:
        """T."""
        return int(self.pos_xy.shape[0])
