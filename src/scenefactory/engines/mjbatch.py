"""The one batched MuJoCo stepper: N copies of a model in a persistent ``mujoco.batch.Batch``.

Both physics users — the car engine (``engines.mujoco_engine``) and the quadruped task
(``tasks.locomotion``) — hold their worlds in a :class:`BatchedSim`: live numpy views of the
state (``bind``), per-world model fields for randomization (``expand``), native-thread stepping,
and one health check that turns NaNs or MuJoCo's bad-acceleration warning into a clear error.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch
from mujoco import batch as mjbatch

BADQACC = int(mujoco.mjtWarning.mjWARN_BADQACC)


class BatchedSim:
    """``num_worlds`` simulations of ``model`` stepped together on native threads."""

    def __init__(self, model: mujoco.MjModel, num_worlds: int, nthread: int | None = None) -> None:
        """Create the batch; ``nthread`` defaults to torch's thread count (they share the cores)."""
        if num_worlds < 1:
            raise ValueError(f"need at least one world, got {num_worlds}")
        self.model = model
        self.num_worlds = num_worlds
        threads = nthread if nthread is not None else max(1, torch.get_num_threads())
        self.batch = mjbatch.Batch(model, num_worlds, nthread=threads, persistent=True)
        self._warnings = self.batch.warning[:, BADQACC, 1].copy()

    def bind(self, name: str) -> np.ndarray:
        """Live (num_worlds, ...) view of an MjData field (writes go into the simulations)."""
        return self.batch.bind(name)

    def expand(self, name: str) -> np.ndarray:
        """Live (num_worlds, ...) per-world copy of an MjModel field, for randomization."""
        return self.batch.expand(name)

    def step(self, nstep: int = 1) -> None:
        """Advance every world by ``nstep`` physics steps."""
        self.batch.step(None, nstep)

    def forward(self, ids: np.ndarray | None = None) -> None:
        """Recompute derived quantities (positions, sensors) of worlds ``ids`` (all by default)."""
        self.batch.forward(ids)

    def check_health(self, hint: str) -> None:
        """Raise ``FloatingPointError`` naming the worlds whose state is NaN/inf or blew up."""
        warn = self.batch.warning[:, BADQACC, 1]
        bad = warn > self._warnings
        self._warnings = warn.copy()
        qpos, qvel = self.bind("qpos"), self.bind("qvel")
        bad |= ~(np.isfinite(qpos).all(axis=1) & np.isfinite(qvel).all(axis=1))
        if bad.any():
            worlds = np.nonzero(bad)[0].tolist()
            raise FloatingPointError(
                f"MuJoCo simulation became unstable (NaN/inf or huge accelerations) in worlds "
                f"{worlds[:8]}; {hint}"
            )
