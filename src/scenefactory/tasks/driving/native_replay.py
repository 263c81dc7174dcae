"""A world's objects natively (numba, CPU): the controlled agents, then the logged objects observed at
the world's step, packed into the ``(W, K + R, ...)`` tensors the step reads, in one pass per world.

:func:`~scenefactory.tasks.driving.pairs.observed_objects` gathers the observed rows with a cumulative
sum, a scatter and six fancy-index gathers, and the environment concatenates them after its agents;
here one kernel counts each world's observed objects, a second writes them (and its agents) straight
into the output. The values are copies, so they are the torch path's bit for bit, the slots past a
world's observed objects included (inactive, holding the pool's row 0 at the world's step, as
``observed_objects`` leaves them); ``tests/tasks/test_native_obs.py`` compares whole rollouts.
"""

from __future__ import annotations

import numba
import numpy as np
import torch

from scenefactory.tasks.driving.native import numba_threads
from scenefactory.tasks.driving.pool import ScenePool

Objects = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _count_pass(
    first: np.ndarray,
    count: np.ndarray,
    valid: np.ndarray,
    scene_ids: np.ndarray,
    step: np.ndarray,
    seen: np.ndarray,
) -> None:
    """How many of its scene's logged objects each world observes at its step."""
    t_max = valid.shape[1]
    for w in numba.prange(scene_ids.shape[0]):
        s, t = scene_ids[w], step[w]
        n = 0
        if t < t_max:
            for j in range(count[s]):
                n += valid[first[s] + j, t]
        seen[w] = n


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _fill_pass(
    first: np.ndarray,
    count: np.ndarray,
    valid: np.ndarray,
    rep_xy: np.ndarray,
    rep_yaw: np.ndarray,
    rep_vel: np.ndarray,
    rep_len: np.ndarray,
    rep_wid: np.ndarray,
    scene_ids: np.ndarray,
    step: np.ndarray,
    seen: np.ndarray,
    k: int,
    pos: np.ndarray,
    yaw: np.ndarray,
    vel: np.ndarray,
    length: np.ndarray,
    width: np.ndarray,
    active: np.ndarray,
) -> None:
    """Columns ``k:`` of the outputs: each world's observed objects in their order, then row 0."""
    t_max = valid.shape[1]
    m = pos.shape[1]
    for w in numba.prange(scene_ids.shape[0]):
        s = scene_ids[w]
        t = min(step[w], t_max - 1)
        c = k
        if step[w] < t_max:
            for j in range(count[s]):
                row = first[s] + j
                if not valid[row, t]:
                    continue
                pos[w, c, 0], pos[w, c, 1] = rep_xy[row, t, 0], rep_xy[row, t, 1]
                vel[w, c, 0], vel[w, c, 1] = rep_vel[row, t, 0], rep_vel[row, t, 1]
                yaw[w, c] = rep_yaw[row, t]
                length[w, c], width[w, c] = rep_len[row], rep_wid[row]
                active[w, c] = True
                c += 1
        for c2 in range(c, m):  # past the observed: row 0 at the world's step, inactive
            pos[w, c2, 0], pos[w, c2, 1] = rep_xy[0, t, 0], rep_xy[0, t, 1]
            vel[w, c2, 0], vel[w, c2, 1] = rep_vel[0, t, 0], rep_vel[0, t, 1]
            yaw[w, c2] = rep_yaw[0, t]
            length[w, c2], width[w, c2] = rep_len[0], rep_wid[0]
            active[w, c2] = False


class NativeObjects:
    """``DrivingEnv._objects`` with logged replay (``pairs.observed_objects`` after the agents) for one
    pool, natively (module docstring)."""

    def __init__(self, pool: ScenePool) -> None:
        if pool.replay_xy.device.type != "cpu":
            raise ValueError(f"native object packing runs on the CPU, the pool is on {pool.replay_xy.device}")

        def arr(x: torch.Tensor) -> np.ndarray:
            return x.contiguous().numpy()

        self._first, self._count = arr(pool.replay_first), arr(pool.replay_count)
        self._valid, self._xy, self._yaw = arr(pool.replay_valid), arr(pool.replay_xy), arr(pool.replay_yaw)
        self._vel, self._len = arr(pool.replay_vel), arr(pool.replay_length)
        self._wid = arr(pool.replay_width)

    def __call__(self, own: Objects, scene_ids: torch.Tensor, step: torch.Tensor) -> Objects:
        """``own`` (the K agents' ``(pos_xy, yaw, vel_xy, length, width, active)``, each ``(W, K, ...)``)
        followed by the logged objects each world observes at ``step`` ``(W,)``: ``(W, K + R, ...)``,
        R the most any world observes now (``own`` itself when no world observes any)."""
        w, k = own[5].shape
        sid, st = scene_ids.contiguous().numpy(), step.contiguous().numpy()
        seen = np.empty(w, dtype=np.int64)
        with numba_threads():
            _count_pass(self._first, self._count, self._valid, sid, st, seen)
            r = int(seen.max()) if w else 0
            if r == 0:
                return own
            m = k + r
            pos = torch.empty((w, m, 2), dtype=torch.float32)
            yaw = torch.empty((w, m), dtype=torch.float32)
            vel = torch.empty((w, m, 2), dtype=torch.float32)
            length = torch.empty((w, m), dtype=torch.float32)
            width = torch.empty((w, m), dtype=torch.float32)
            active = torch.empty((w, m), dtype=torch.bool)
            out = (pos, yaw, vel, length, width, active)
            for o, x in zip(out, own, strict=True):
                o[:, :k] = x
            _fill_pass(
                self._first, self._count, self._valid, self._xy, self._yaw, self._vel, self._len, self._wid,
                sid, st, seen, k, pos.numpy(), yaw.numpy(), vel.numpy(), length.numpy(), width.numpy(),
                active.numpy(),
            )  # fmt: skip
        return out
