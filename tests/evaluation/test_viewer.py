"""The live viewer's sources without a browser (``test_browser.py`` loads its page).

Pinned: the Go1 source turns every visible geom of the visual MJCF into a mesh, runs the policy one
frame per step under the command sequence (the robot moves, the frames are kept for scrubbing back),
and a height field becomes a grid of its elevations; the driving source runs a world live and holds
a finished world's last frame.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

pytest.importorskip("viser", reason="the live viewer needs the 'viewer' extra")


def test_go1_source_runs_the_policy_and_meshes_every_geom(one_torch_thread: None) -> None:
    from scenefactory.jobs.view_go1 import Go1Source, geom_mesh, hfield_mesh

    src = Go1Source.load("shipped", seed=0)
    m = src.model
    visible = [g for g in range(m.ngeom) if m.geom_rgba[g][3] >= 0.05]
    meshes = [geom_mesh(m, g) for g in visible]
    assert len(visible) > 10 and all(v is not None and len(v[0]) and len(v[1]) for v in meshes)
    for _ in range(30):
        assert src.extend()
    assert src.num_frames() == 31
    first, last = src.frames[0], src.frames[-1]
    assert np.abs(last["xpos"] - first["xpos"]).max() > 1e-3  # the legs moved
    assert "command (orange)" in src.describe(30)
    # a height field: rows along y, columns along x, heights scaled by its z size
    xml = """<mujoco><asset><hfield name="h" nrow="3" ncol="4" size="1.5 1 0.5 0.1"/></asset>
    <worldbody><geom type="hfield" hfield="h"/></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    model.hfield_data[:] = np.linspace(0, 1, 12)
    v, f = hfield_mesh(model, 0)
    assert v.shape == (12, 3) and f.shape == (2 * 2 * 3, 3)
    assert v[:, 0].min() == -1.5 and v[:, 1].max() == 1.0 and v[-1, 2] == pytest.approx(0.5)


def test_drive_source_holds_finished_worlds(one_torch_thread: None) -> None:
    from scenefactory.evaluation.rollout import EXPERT
    from scenefactory.jobs.view_drive import DriveSource, lane_mesh
    from scenefactory.tasks.driving.config import DrivingTaskConfig
    from test_html_replay import chase_scene

    sc = chase_scene()
    v, f = lane_mesh(sc, np.zeros(2))
    assert len(f) == 2 * 2 * 60 and v[:, 2].max() == 0.0  # two 61-point lanes, two triangles a segment

    def coast(obs):
        import torch

        return torch.zeros(*obs.shape[:2], 2)

    src = DriveSource([sc], coast, DrivingTaskConfig(agents_per_world=3, episode_length_s=1.0), "chase")
    n = 0
    while src.extend():
        n += 1
    assert n == 10 and src.num_frames() == 11 and src.ended.all()
    assert not src.extend() and src.num_frames() == 11
    # the chaser moved east; the last frame is the state before the reset (time-outs at 1 s)
    assert src.frames[-1][0][0, 0, 0] > src.frames[0][0][0, 0, 0] + 5.0
    assert set(src.frames[-1][2][0].tolist()) <= {2, 4}
    expert = DriveSource([sc], EXPERT, DrivingTaskConfig(agents_per_world=3), "spawn")
    assert not expert.live and not expert.extend()  # no log: its spawn only
