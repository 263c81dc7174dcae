"""Interactions only where they are read, logged objects packed: exactly today's all-pairs results.

The environment computes TTC, DRAC and box overlap for the K controlled agents against the M objects
of a world (``tasks.driving.pairs``), M being the agents and the logged objects observed at the step,
packed from the pool's ragged rows. The reference here is the code it replaced, kept verbatim: every
logged object of the pool's largest scene padded into every world, and every M x M pair of
``pairwise_ttc_drac`` / ``pairwise_box_overlap`` (rows ``[:, :K]`` read). Over rollouts of many steps
on real-format scenes with many logged objects (parked vehicles, pedestrians, cyclists, objects
appearing later) and on procedural scenes, every observation, reward, reward term, done, time-out and
finished record is bit for bit the same.
"""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch

from scenefactory.scenes.library import procedural_scenes
from scenefactory.scenes.scene import Scene
from scenefactory.scenes.womd.convert import scenario_to_scene
from scenefactory.scenes.womd.synthetic import Background, city_scenario
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv, Objects
from scenefactory.tasks.driving.geometry import pairwise_box_overlap, pairwise_ttc_drac
from scenefactory.tasks.driving.native import agent_interactions
from scenefactory.tasks.driving.pairs import agent_box_overlap, agent_ttc_drac

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BUSY = Background(pedestrians=14, cyclists=4, extra_parked=12, occluded_share=0.8)


@pytest.fixture(scope="module")
def real_scenes() -> list[Scene]:
    """Real-format scenes with busy logged traffic; few controlled slots, so agents are replayed too."""
    out = []
    for seed, (target, moving) in enumerate(((1500, 8), (2500, 14), (1200, 5))):
        sc = city_scenario(f"busy-{seed}", seed, target, moving, 2, background=BUSY)
        out.append(scenario_to_scene(sc)[0])
    return out


class AllPairsEnv(DrivingEnv):
    """Today's code before the change: every logged object of the pool padded into every world, and
    all M x M pairs."""

    def _objects(self, st):  # type: ignore[no-untyped-def]
        own = (st.pos_xy, st.yaw, st.vel_xy, self.length, self.width, self.active)
        p = self.pool
        if not self.num_replay:
            return own
        n, t_rep = self.num_replay, p.replay_valid.shape[1]
        rows = p.replay_first[self.scene_id][:, None] + torch.arange(n)
        in_scene = torch.arange(n) < p.replay_count[self.scene_id][:, None]
        rows = torch.where(in_scene, rows, 0)
        t = self.step_count.clamp(max=t_rep - 1)[:, None].expand(-1, n)
        valid = p.replay_valid[rows, t] & in_scene & (self.step_count < t_rep)[:, None]
        pos = torch.where(in_scene[..., None], p.replay_xy[rows, t], 0.0)
        vel = torch.where(in_scene[..., None], p.replay_vel[rows, t], 0.0)
        yaw = torch.where(in_scene, p.replay_yaw[rows, t], 0.0)
        rep = (pos, yaw, vel, p.replay_length[rows], p.replay_width[rows], valid)
        c = [torch.cat((a, b), dim=1) for a, b in zip(own, rep, strict=True)]
        return c[0], c[1], c[2], c[3], c[4], c[5]

    def _observe(self, st, ttc, proj=None, objs=None):  # type: ignore[no-untyped-def]
        return super()._observe(st, ttc, proj)  # the objects gathered again, as before

    def _interactions(self, objs: Objects, overlap: bool = True):  # type: ignore[no-untyped-def]
        ttc, drac = pairwise_ttc_drac(*objs, self.cfg.observations.ttc_horizon_s)
        k = self.agents_per_world
        over = pairwise_box_overlap(objs[0], objs[1], objs[3], objs[4], objs[5])[:, :k]
        return ttc[:, :k], drac[:, :k], over


def rollout(env: DrivingEnv, steps: int) -> list:
    gen = torch.Generator().manual_seed(3)
    out = [env.observations().clone()]
    for _ in range(steps):
        actions = torch.rand(env.num_worlds, env.agents_per_world, 2, generator=gen) * 2.0 - 1.0
        actions[..., 0] = actions[..., 0].abs()  # mostly forward, so agents meet and finish
        res = env.step(actions)
        out.append(res)
    return out


def assert_same(a: list, b: list) -> None:
    assert torch.equal(a[0], b[0])
    for i, (x, y) in enumerate(zip(a[1:], b[1:], strict=True)):
        for f in ("obs", "reward", "done", "time_out", "was_active", "reset_worlds"):
            assert torch.equal(getattr(x, f), getattr(y, f)), (i, f)
        assert x.reward_terms.keys() == y.reward_terms.keys()
        for name in x.reward_terms:
            assert torch.equal(x.reward_terms[name], y.reward_terms[name]), (i, name)
        for f in fields(x.finished):
            u, v = getattr(x.finished, f.name), getattr(y.finished, f.name)
            assert u.shape == v.shape and bool(((u == v) | (u.isnan() & v.isnan())).all()), (i, f.name)


@pytest.mark.parametrize(("k", "native"), [(4, True), (8, True), (8, False)])
def test_real_format_scenes_same_as_all_pairs(real_scenes: list[Scene], k: int, native: bool) -> None:
    cfg = DrivingTaskConfig(num_worlds=6, agents_per_world=k, episode_length_s=6.0, native_kernels=native)
    new = rollout(DrivingEnv(cfg, real_scenes, seed=1), 70)
    ref_env = AllPairsEnv(cfg, real_scenes, seed=1)
    assert ref_env.num_replay > 20
    assert_same(new, rollout(ref_env, 70))
    ended = torch.cat([r.finished.outcome for r in new[1:]])
    assert len(ended) > 10  # episodes ended (collisions, off-road, time-outs) and worlds reset


@pytest.mark.parametrize("native", [True, False])
def test_procedural_scenes_same_as_all_pairs(native: bool) -> None:
    scenes = procedural_scenes("train", 4, 8, base_seed=2)
    cfg = DrivingTaskConfig(num_worlds=4, agents_per_world=8, episode_length_s=3.0, native_kernels=native)
    new = rollout(DrivingEnv(cfg, scenes, seed=0), 40)
    assert_same(new, rollout(AllPairsEnv(cfg, scenes, seed=0), 40))


def test_agent_rows_are_the_all_pairs_rows() -> None:
    """On objects crowded enough to touch and meet (boxes overlapping, finite TTC, DRAC > 0)."""
    gen = torch.Generator().manual_seed(0)
    w, m, k = 5, 30, 7
    pos = torch.rand(w, m, 2, generator=gen) * 25.0
    yaw = (torch.rand(w, m, generator=gen) - 0.5) * 6.3
    vel = (torch.rand(w, m, 2, generator=gen) - 0.5) * 20.0
    length = 0.5 + torch.rand(w, m, generator=gen) * 4.5
    width = 0.5 + torch.rand(w, m, generator=gen) * 1.6
    active = torch.rand(w, m, generator=gen) < 0.8
    ttc, drac = pairwise_ttc_drac(pos, yaw, vel, length, width, active)
    ttc_k, drac_k = agent_ttc_drac(pos, yaw, vel, length, width, active, k)
    assert torch.equal(ttc_k, ttc[:, :k]) and torch.equal(drac_k, drac[:, :k])
    assert torch.isfinite(ttc_k).any() and (drac_k > 0).any()
    over = agent_box_overlap(pos, yaw, length, width, active, k)
    assert torch.equal(over, pairwise_box_overlap(pos, yaw, length, width, active)[:, :k]) and over.any()
    n_ttc, n_drac, n_over = agent_interactions(pos, yaw, vel, length, width, active, k, 10.0)
    assert torch.equal(n_ttc, ttc_k) and torch.equal(n_drac, drac_k) and torch.equal(n_over, over)


def test_the_kernels_leave_torchs_thread_count_alone() -> None:
    """numba's OpenMP layer shares the runtime with torch: a call must not change torch's count."""
    pos = torch.rand(3, 5, 2) * 10.0
    zeros, ones = torch.zeros(3, 5), torch.ones(3, 5)
    before = torch.get_num_threads()  # 1 (the module's fixture)
    agent_interactions(pos, zeros, torch.zeros(3, 5, 2), 4 * ones, 2 * ones, ones > 0, 2, 10.0)
    assert torch.get_num_threads() == before
