"""The one batched MuJoCo stepper: N copies of a model in a persistent ``mujoco.batch.Batch``.

Both physics users — the car engine (``engines.mujoco_engine``) and the quadruped task
(``go1``) — hold their worlds in a :class:`BatchedSim`: live numpy views of the
state (``bind``), per-world model fields for randomization (``expand``), native-thread stepping,
and one health check that turns NaNs or MuJoCo's bad-acceleration warning into a clear error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
        self._expanded: dict[str, np.ndarray] = {}

    def bind(self, name: str) -> np.ndarray:
        """Live (num_worlds, ...) view of an MjData field (writes go into the simulations)."""
        return self.batch.bind(name)

    def expand(self, name: str) -> np.ndarray:
        """Live (num_worlds, ...) per-world copy of an MjModel field, for randomization."""
        if name not in self._expanded:
            self._expanded[name] = self.batch.expand(name)
        return self._expanded[name]

    INTEGRATION_FIELDS = ("qpos", "qvel", "act", "ctrl", "qacc_warmstart", "time")
    """MjData fields the next step depends on (MuJoCo's integration state, with the warm start)."""

    def state_dict(self) -> dict[str, Any]:
        """Copies of every world's integration state, of the per-world model fields (``expand``) and
        of the sensors as the last step left them (they describe the state before its last substep,
        which ``forward`` after a restore cannot give back: :meth:`load_state_dict` leaves them to
        the caller)."""
        return {
            "data": {f: torch.from_numpy(np.array(self.bind(f), copy=True)) for f in self.INTEGRATION_FIELDS},
            "model": {f: torch.from_numpy(arr.copy()) for f, arr in self._expanded.items()},
            "sensordata": torch.from_numpy(np.array(self.bind("sensordata"), copy=True)),
        }

    def load_state_dict(self, state: Any, set_const: bool = False) -> None:
        """Restore :meth:`state_dict` into this batch (every array checked first): the per-world
        model fields, then (``set_const``: when masses or inertias vary per world) MuJoCo's derived
        constants, which uses the data as scratch, then the integration state; positions and
        sensors are recomputed."""
        checked: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for group, arrays in (
            ("model", self._expanded),
            ("data", {f: self.bind(f) for f in self.INTEGRATION_FIELDS}),
        ):
            saved = state.get(group) if isinstance(state, Mapping) else None
            if not isinstance(saved, Mapping) or set(saved) != set(arrays):
                raise ValueError(
                    f"MuJoCo state '{group}' holds {sorted(saved or [])}, expected {sorted(arrays)}"
                )
            checked[group] = []
            for f, arr in arrays.items():
                value = saved[f]
                if not isinstance(value, torch.Tensor) or tuple(value.shape) != arr.shape:
                    got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                    raise ValueError(f"MuJoCo state '{group}.{f}' is {got}, this batch holds {arr.shape}")
                checked[group].append((arr, value.numpy()))
        for arr, value in checked["model"]:
            arr[...] = value
        if set_const:
            self.batch.set_const(np.arange(self.num_worlds))
        for arr, value in checked["data"]:
            arr[...] = value
        self.forward()
        for arr, value in checked["data"]:  # forward recomputes derived fields only; keep the state exact
            arr[...] = value

    def step(self, nstep: int = 1) -> None:
        """Advance every world by ``nstep`` physics steps."""
        self.batch.step(None, nstep)

    def forward(self, ids: np.ndarray | None = None) -> None:
        """Recompute derived quantities (positions, sensors) of worlds ``ids`` (all by default)."""
        self.batch.forward(ids)

    def set_const(self, ids: np.ndarray) -> None:
        """Recompute MuJoCo's constants derived from masses and inertias of worlds ``ids`` (after
        writing their per-world ``body_mass``, ``body_ipos``, ...)."""
        self.batch.set_const(ids)

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
