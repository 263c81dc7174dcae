"""Interactions of the controlled agents with every object of their world, computed only where they
are read: the ``K`` controlled agents against the ``M`` objects (agents first, then the logged objects
observed at the step), never the ``M x M`` pairs among logged objects that no metric, reward or
observation uses.

Each function returns exactly the rows ``[:, :K]`` of its all-pairs counterpart in
:mod:`~scenefactory.tasks.driving.geometry` (same operations on the same numbers, pair by pair;
``tests/tasks/test_agent_pairs.py`` compares them bit for bit), and :func:`observed_objects` packs each
world's logged objects observed at the step into a short list, so ``M`` is the agents plus the most
observed objects of any world this step, not the pool's largest count.
"""

from __future__ import annotations

import torch

from scenefactory.tasks.driving.geometry import agent_pairs, ttc_drac_of_pairs
from scenefactory.tasks.driving.pool import ScenePool


def agent_ttc_drac(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    vel_xy: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
    k: int,
    horizon_s: float = 10.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ttc_s, drac_mps2)``, both ``[W, k, M]``: :func:`pairwise_ttc_drac` of the first ``k`` objects
    (the controlled agents) against all ``M``, computed for those pairs only (``k (k - 1) / 2 + k (M -
    k)`` instead of ``M (M - 1) / 2``). Exactly the rows ``[:, :k]`` of :func:`pairwise_ttc_drac`:
    each pair is computed with the lower index first, as there."""
    w, m = active.shape
    i, j = agent_pairs(k, m, pos_xy.device)
    ttc, drac, _, _ = ttc_drac_of_pairs(pos_xy, yaw, vel_xy, length, width, active, horizon_s, (i, j))
    n_agent = k * (k - 1) // 2
    flat = torch.cat((i * m + j, j[:n_agent] * m + i[:n_agent]))

    def fill(values: torch.Tensor, value: float) -> torch.Tensor:
        out = values.new_full((k * m, w), value)
        out.index_copy_(0, flat, torch.cat((values, values[:n_agent]), dim=0))
        return out.reshape(k, m, w).permute(2, 0, 1).contiguous()

    return fill(ttc, torch.inf), fill(drac, 0.0)


def agent_box_overlap(
    pos_xy: torch.Tensor,
    yaw: torch.Tensor,
    length: torch.Tensor,
    width: torch.Tensor,
    active: torch.Tensor,
    k: int,
) -> torch.Tensor:
    """``[W, k, M]`` bool: :func:`pairwise_box_overlap` of the first ``k`` objects against all ``M``
    (exactly its rows ``[:, :k]``: the separating-axis tests are symmetric in the pair)."""
    cos, sin = torch.cos(yaw), torch.sin(yaw)
    half_l, half_w = 0.5 * length, 0.5 * width
    dx = pos_xy[..., None, :, 0] - pos_xy[..., :k, None, 0]  # [W, k, M]: p_j - p_i
    dy = pos_xy[..., None, :, 1] - pos_xy[..., :k, None, 1]
    ci, si = cos[..., :k, None], sin[..., :k, None]
    cj, sj = cos[..., None, :], sin[..., None, :]
    rel_c = (ci * cj + si * sj).abs()
    rel_s = (si * cj - ci * sj).abs()
    ai, bi = half_l[..., :k, None], half_w[..., :k, None]
    aj, bj = half_l[..., None, :], half_w[..., None, :]
    sep = (dx * ci + dy * si).abs() > ai + aj * rel_c + bj * rel_s
    sep |= (dy * ci - dx * si).abs() > bi + aj * rel_s + bj * rel_c
    sep |= (dx * cj + dy * sj).abs() > aj + ai * rel_c + bi * rel_s
    sep |= (dy * cj - dx * sj).abs() > bj + ai * rel_s + bi * rel_c
    m = active.shape[-1]
    not_self = torch.arange(k, device=active.device)[:, None] != torch.arange(m, device=active.device)
    return ~sep & active[..., :k, None] & active[..., None, :] & not_self


def observed_objects(
    pool: ScenePool, scene_id: torch.Tensor, step: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The logged objects each world observes at its step, packed: ``(pos_xy (W, R, 2), yaw (W, R),
    vel_xy (W, R, 2), length (W, R), width (W, R), active (W, R))`` at step ``step`` (W,) of the
    scenes ``scene_id`` (W,), with R the most objects any world observes now.

    World ``w``'s observed objects come first, in their order in the pool; its slots past them are
    inactive (they hold row 0's finite values, never read). An object counts as
    observed when its log is valid at the step; past the pool's longest log none is (the step is
    clamped to its last column for the values). Work and memory follow the objects the worlds'
    scenes hold and observe, not the pool's largest scene."""
    w = scene_id.shape[0]
    t_max = pool.replay_valid.shape[1]
    count = pool.replay_count[scene_id]  # (W,)
    n = int(count.max()) if w else 0
    slot = torch.arange(n, device=scene_id.device)
    in_scene = slot < count[:, None]  # (W, n)
    rows = torch.where(in_scene, pool.replay_first[scene_id][:, None] + slot, 0)
    t = step.clamp(max=t_max - 1)[:, None].expand(w, n)
    valid = pool.replay_valid[rows, t] & in_scene & (step < t_max)[:, None]
    seen = valid.sum(-1)
    r = int(seen.max()) if w and n else 0
    # each observed object's place in its world's list (its rank among the observed), the others
    # to a spare last column; one scatter, no sort
    place = torch.where(valid, valid.cumsum(-1) - 1, r)
    packed = torch.zeros((w, r + 1), dtype=rows.dtype, device=rows.device).scatter_(1, place, rows)
    rows, t = packed[:, :r], t[:, :r]
    active = slot[:r] < seen[:, None]
    return (
        pool.replay_xy[rows, t],
        pool.replay_yaw[rows, t],
        pool.replay_vel[rows, t],
        pool.replay_length[rows],
        pool.replay_width[rows],
        active,
    )
