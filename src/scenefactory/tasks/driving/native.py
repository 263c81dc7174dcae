"""Fused native CPU kernels (numba) for the driving task's hot loops, threaded over worlds.

:func:`agent_interactions` fuses, for every controlled agent and every object of its world (``K x
M``), what :func:`~scenefactory.tasks.driving.pairs.agent_ttc_drac` and
:func:`~scenefactory.tasks.driving.pairs.agent_box_overlap` compute in several torch passes: the
time to collision, the deceleration rate to avoid a crash and the oriented-box overlap, in one pass
over the pairs with ``numba.prange`` over worlds (``torch.get_num_threads()`` threads, so MuJoCo's,
torch's and numba's threads share the cores by one setting).

**Same numbers as the torch path.** The kernel performs the torch path's float32 operations in the
same order, with a fused multiply-add exactly where torch's CPU ``addcmul`` rounds once (no
fast-math, numba's default, so LLVM fuses nothing else), and takes the values torch
computes with transcendental functions (each object's ``cos``/``sin`` and circle cover) from torch,
since numba's ``cos`` is the C library's and may differ from torch's in the last bit. Results are
bit for bit those of the torch path (``tests/tasks/test_agent_pairs.py``).

**Pairs that cannot interact are skipped.** A pair whose centres, both holding their velocity, come
no closer within the TTC horizon than both objects' reaches (the larger of the half diagonal and the
3-circle cover's extent ``L/3 + r``), with a margin of 1 % and 1 m, can neither overlap now nor meet
within the horizon: its TTC is ``inf``, its DRAC 0 and it does not overlap, exactly what the full
computation gives. The same holds for pairs with an inactive object. Most pairs of a scene are
skipped this way: only those on a near-collision course are computed. A first pass marks and counts
the kept pairs per world; the second writes their circle pairs' values packed, world after world,
so that torch takes the square roots of the kept pairs only (elementwise: each value is the one it
takes in the torch path, wherever it sits); the third finishes TTC, DRAC and overlap.

:func:`nearest_segment` finds each agent's nearest route segment the same way (the observation's
other kernels are in ``native_obs`` and ``native_replay``).

Compiled once per machine (``cache=True`` keeps the machine code in ``__pycache__``); the first call
of a fresh checkout compiles for a few seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numba
import numpy as np
import torch
from numba.core import types
from numba.extending import intrinsic

from scenefactory.tasks.driving.geometry import DRAC_MIN_GAP_M, PolylineSegments, circle_cover

_F = np.float32


@intrinsic
def _fma(typingctx, a, b, c):  # type: ignore[no-untyped-def]
    """``a * b + c`` rounded once (float32), as torch's ``addcmul`` computes it on the CPU."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.fma(*args)

    return sig, codegen


fma = cast("Callable[[Any, Any, Any], Any]", _fma)
""":func:`_fma` as the kernels call it (typed for mypy; numba sees the intrinsic itself)."""


@numba.njit(inline="always")
def _far(pos, vel, reach, w, a, b, horizon):  # type: ignore[no-untyped-def]
    """The pair cannot touch now or within the horizon (module docstring), in float64: the centres'
    closest approach over ``[0, horizon]`` (both holding their velocity) exceeds both reaches."""
    dx = float(pos[w, b, 0]) - float(pos[w, a, 0])
    dy = float(pos[w, b, 1]) - float(pos[w, a, 1])
    vx = float(vel[w, b, 0]) - float(vel[w, a, 0])
    vy = float(vel[w, b, 1]) - float(vel[w, a, 1])
    v2 = vx * vx + vy * vy
    t = min(max(-(dx * vx + dy * vy) / v2, 0.0), horizon) if v2 > 0.0 else 0.0
    ex, ey = dx + vx * t, dy + vy * t
    limit = (float(reach[w, a]) + float(reach[w, b])) * 1.01 + 1.0
    return ex * ex + ey * ey > limit * limit


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _keep_pass(
    pos: np.ndarray,
    vel: np.ndarray,
    active: np.ndarray,
    reach: np.ndarray,
    k: int,
    horizon: float,
    todo: np.ndarray,
    count: np.ndarray,
) -> None:
    """Pass 0: which pairs can interact (``todo``, module docstring) and how many per world."""
    w_n, m_n = active.shape
    for w in numba.prange(w_n):
        n = 0
        for a in range(k):
            for b in range(m_n):
                keep = (
                    b != a and active[w, a] and active[w, b] and not _far(pos, vel, reach, w, a, b, horizon)
                )
                todo[w, a, b] = keep
                n += keep
        count[w] = n


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _circle_pass(
    cx: np.ndarray,
    cy: np.ndarray,
    radius: np.ndarray,
    vel: np.ndarray,
    pos: np.ndarray,
    k: int,
    near: np.ndarray,
    q_abs: np.ndarray,
    todo: np.ndarray,
    first: np.ndarray,
) -> None:
    """Pass 1 of the TTC/DRAC: per kept pair (``todo``), the closest circle pair's squared distance
    (``near``) and the 9 circle pairs' ``|q|`` (``q_abs``), whose square roots torch then takes;
    packed, world ``w``'s kept pairs from row ``first[w]`` on, in (agent, object) order."""
    w_n, m_n = todo.shape[0], todo.shape[2]
    zero = np.float32(0.0)
    for w in numba.prange(w_n):
        row = first[w]
        for a in range(k):
            for b in range(m_n):
                if not todo[w, a, b]:
                    continue
                p, q = (a, b) if a < b else (b, a)  # the lower index first, as ttc_drac_of_pairs
                rvx = vel[w, q, 0] - vel[w, p, 0]
                rvy = vel[w, q, 1] - vel[w, p, 1]
                radius_sum = radius[w, p] + radius[w, q]
                rsum2 = radius_sum * radius_sum
                aa = rvx * rvx + rvy * rvy
                near2 = np.float32(np.inf)
                for mi in range(3):
                    for ni in range(3):
                        ex = cx[w, q, ni] - cx[w, p, mi]
                        ey = cy[w, q, ni] - cy[w, p, mi]
                        h = min(fma(ey, rvy, ex * rvx), zero)  # (dx * rvx).addcmul_(dy, rvy), clamped
                        dist2 = fma(ey, ey, ex * ex)
                        near2 = min(near2, dist2)
                        qq = fma(-aa, dist2 - rsum2, h * h)  # (h * h).addcmul_(a, c, value=-1)
                        q_abs[row, mi * 3 + ni] = abs(qq)
                near[row] = near2
                row += 1


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _finish_pass(
    cx: np.ndarray,
    cy: np.ndarray,
    radius: np.ndarray,
    vel: np.ndarray,
    pos: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    half_l: np.ndarray,
    half_w: np.ndarray,
    todo: np.ndarray,
    first: np.ndarray,
    q_sqrt: np.ndarray,
    near_sqrt: np.ndarray,
    k: int,
    horizon: np.float32,
    ttc_out: np.ndarray,
    drac_out: np.ndarray,
    overlap_out: np.ndarray,
) -> None:
    """Pass 2: box overlap, TTC and DRAC of the kept pairs from pass 1's square roots."""
    w_n, m_n = todo.shape[0], todo.shape[2]
    inf = np.float32(np.inf)
    zero = np.float32(0.0)
    one = np.float32(1.0)
    two = np.float32(2.0)
    eps = np.float32(1e-6)
    gap_min = np.float32(DRAC_MIN_GAP_M)
    for w in numba.prange(w_n):
        row = first[w] - 1
        for a in range(k):
            for b in range(m_n):
                ttc_out[w, a, b] = inf
                drac_out[w, a, b] = zero
                overlap_out[w, a, b] = False
                if not todo[w, a, b]:
                    continue
                row += 1  # this pair's row of pass 1's packed values
                # box overlap, rows i = a (as agent_box_overlap)
                dx = pos[w, b, 0] - pos[w, a, 0]
                dy = pos[w, b, 1] - pos[w, a, 1]
                ci, si, cj, sj = cos[w, a], sin[w, a], cos[w, b], sin[w, b]
                rel_c = abs(ci * cj + si * sj)
                rel_s = abs(si * cj - ci * sj)
                ai, bi, aj, bj = half_l[w, a], half_w[w, a], half_l[w, b], half_w[w, b]
                sep = abs(dx * ci + dy * si) > ai + aj * rel_c + bj * rel_s
                sep = sep or abs(dy * ci - dx * si) > bi + aj * rel_s + bj * rel_c
                sep = sep or abs(dx * cj + dy * sj) > aj + ai * rel_c + bi * rel_s
                sep = sep or abs(dy * cj - dx * sj) > bj + ai * rel_s + bi * rel_c
                overlap_out[w, a, b] = not sep
                # TTC and DRAC (as ttc_drac_of_pairs)
                p, q = (a, b) if a < b else (b, a)
                rvx = vel[w, q, 0] - vel[w, p, 0]
                rvy = vel[w, q, 1] - vel[w, p, 1]
                radius_sum = radius[w, p] + radius[w, q]
                rsum2 = radius_sum * radius_sum
                aa = rvx * rvx + rvy * rvy
                near2 = inf
                near_h = zero
                rate_max = -inf
                nan_seen = False
                for mi in range(3):
                    for ni in range(3):
                        ex = cx[w, q, ni] - cx[w, p, mi]
                        ey = cy[w, q, ni] - cy[w, p, mi]
                        h = fma(ey, rvy, ex * rvx)
                        dist2 = fma(ey, ey, ex * ex)
                        if (mi == 0 and ni == 0) or dist2 < near2:  # the first of equals, as torch.min
                            near2, near_h = dist2, h
                        c = dist2 - rsum2
                        h = min(h, zero)
                        qq = fma(-aa, c, h * h)
                        rate = np.float32(math.copysign(q_sqrt[row, mi * 3 + ni] - h, qq) / c)
                        if rate != rate:  # amax propagates NaN
                            nan_seen = True
                        elif rate > rate_max:
                            rate_max = rate
                ttc = one / rate_max if (rate_max > zero and not nan_seen) else inf
                if near2 <= rsum2:
                    ttc = zero
                if ttc > horizon:
                    continue
                ttc_out[w, a, b] = ttc
                dist = near_sqrt[row]
                closing = -near_h / max(dist, eps)
                if closing > zero:
                    drac_out[w, a, b] = closing * closing / (two * max(dist - radius_sum, gap_min))


def agent_interactions(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    vel_xy: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
    k: int,
    horizon_s: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ttc_s, drac_mps2, overlap)``, each ``[W, k, M]``, of the first ``k`` objects (the controlled
    agents) against all ``M`` (CPU float32 tensors, as :func:`~scenefactory.tasks.driving.pairs.
    agent_ttc_drac` and :func:`~scenefactory.tasks.driving.pairs.agent_box_overlap`; bit for bit
    their results, module docstring)."""
    centres, radius = circle_cover(pos_xy, yaw, length, width)
    cos, sin = torch.cos(yaw), torch.sin(yaw)
    half_l, half_w = 0.5 * length, 0.5 * width
    reach = torch.maximum(torch.hypot(half_l, half_w), length / 3.0 + radius)
    w, m = active.shape
    ttc = torch.empty((w, k, m), dtype=torch.float32)
    drac = torch.empty((w, k, m), dtype=torch.float32)
    overlap = torch.empty((w, k, m), dtype=torch.bool)
    todo = torch.empty((w, k, m), dtype=torch.bool)
    count = np.empty(w, dtype=np.int64)
    cx, cy = centres[..., 0].contiguous().numpy(), centres[..., 1].contiguous().numpy()
    rad, vel, pos = radius.contiguous().numpy(), vel_xy.contiguous().numpy(), pos_xy.contiguous().numpy()
    act = active.contiguous().numpy()
    with numba_threads():
        _keep_pass(pos, vel, act, reach.numpy(), k, float(horizon_s), todo.numpy(), count)
        first = np.zeros(w, dtype=np.int64)
        np.cumsum(count[:-1], out=first[1:])
        pairs = int(count.sum())
        near = torch.empty(pairs, dtype=torch.float32)  # the kept pairs only, packed (pass 1)
        q_abs = torch.empty((pairs, 9), dtype=torch.float32)
        _circle_pass(
            cx, cy, rad, vel, pos, k, near.numpy(), q_abs.numpy(), todo.numpy(), first,
        )  # fmt: skip
        # torch's own square roots (MKL's on the CPU: not always the correctly rounded ones numba
        # would take; elementwise, the same wherever a value sits in the tensor), so each value is
        # the one the torch path computes
        q_sqrt, near_sqrt = q_abs.sqrt_(), near.sqrt_()
        _finish_pass(
            cx, cy, rad, vel, pos, cos.numpy(), sin.numpy(), half_l.contiguous().numpy(),
            half_w.contiguous().numpy(), todo.numpy(), first, q_sqrt.numpy(), near_sqrt.numpy(), k,
            _F(horizon_s), ttc.numpy(), drac.numpy(), overlap.numpy(),
        )  # fmt: skip
    return ttc, drac, overlap


@numba.njit(parallel=True, cache=True, boundscheck=False)
def _segment_pass(
    pos: np.ndarray,
    ax: np.ndarray,
    ay: np.ndarray,
    ex: np.ndarray,
    ey: np.ndarray,
    inv_len2: np.ndarray,
    penalty: np.ndarray,
    near_out: np.ndarray,
    idx_out: np.ndarray,
) -> None:
    """``geometry.nearest_segment``'s float32 operations per query and segment, in its order (its
    ``addcmul_`` as one rounding), keeping the first of equal distances as ``min`` does."""
    n_w, n_k, n_r = ax.shape
    zero, one = np.float32(0.0), np.float32(1.0)
    for w in numba.prange(n_w):
        for a in range(n_k):
            qx, qy = pos[w, a, 0], pos[w, a, 1]
            best, best_r = np.float32(np.inf), 0
            for r in range(n_r):
                px = qx - ax[w, a, r]
                py = qy - ay[w, a, r]
                t = fma(py, ey[w, a, r], px * ex[w, a, r]) * inv_len2[w, a, r]
                t = min(max(t, zero), one)
                ox = fma(-t, ex[w, a, r], px)
                oy = fma(-t, ey[w, a, r], py)
                d2 = fma(oy, oy, ox * ox) + penalty[w, a, r]
                if r == 0 or d2 < best:
                    best, best_r = d2, r
            near_out[w, a] = best
            idx_out[w, a] = best_r


def nearest_segment(pos_xy: torch.Tensor, segs: PolylineSegments) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~scenefactory.tasks.driving.geometry.nearest_segment` natively, bit for bit (CPU
    float32 ``[W, K, ...]`` tensors): ``(near2 [W, K, 1], seg_idx [W, K, 1])``."""
    w, k = pos_xy.shape[:2]
    near = torch.empty((w, k, 1), dtype=torch.float32)
    idx = torch.empty((w, k, 1), dtype=torch.int64)

    def arr(x: torch.Tensor) -> np.ndarray:
        return x.contiguous().numpy()

    with numba_threads():
        _segment_pass(
            arr(pos_xy), arr(segs.ax), arr(segs.ay), arr(segs.ex), arr(segs.ey), arr(segs.inv_len2),
            arr(segs.penalty), near.numpy()[..., 0], idx.numpy()[..., 0],
        )  # fmt: skip
    return near, idx


class numba_threads:  # noqa: N801 (a context manager used like a function)
    """Run numba's parallel loops on ``torch.get_num_threads()`` threads (at most numba's pool), and
    leave torch's count as it was: numba's OpenMP layer and torch share the OpenMP runtime, so setting
    one sets the other (a restore of numba's own count would change torch's)."""

    def __enter__(self) -> None:
        """Set numba's thread count to torch's for the block."""
        self._torch = torch.get_num_threads()
        numba.set_num_threads(max(1, min(self._torch, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        """Keep torch's count."""
        if torch.get_num_threads() != self._torch:
            torch.set_num_threads(self._torch)
