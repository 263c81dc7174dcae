"""The Go1 source of ``scenefactory view`` (:mod:`~scenefactory.jobs.view`): a Go1 policy walking
live through ``render go1``'s command sequence, in 3D.

Every geom of the visual MJCF (``go1_model(..., with_visuals=True)``) becomes a mesh: boxes,
spheres, capsules, cylinders and ellipsoids from their sizes, meshes from the model's vertices, the
terrain's height field as a grid of its elevations (a flat floor as a large plate). Each frame
places the moving geoms where MuJoCo puts them (``geom_xpos``, ``geom_xmat``) and draws two arrows
at the trunk: the commanded planar velocity (orange) and the measured one (blue), in the world
frame. The sequence repeats every :data:`SEQUENCE_S` seconds; a fall restarts the robot.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import trimesh

from scenefactory.errors import UserError
from scenefactory.go1.config import nominal
from scenefactory.go1.env import Go1Env
from scenefactory.go1.jobs import resolve_checkpoint
from scenefactory.go1.render import command_at
from scenefactory.go1.terrain import go1_model
from scenefactory.go1.train import Go1Policy, load_go1_policy

SEQUENCE_S = 16.0
"""Length of one pass through the command sequence [s]."""
_FLOOR_HALF_M = 10.0
_ARROW_Z_M = 0.45


def _quat(xmat: np.ndarray) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.asarray(xmat, dtype=np.float64).reshape(9))
    return q


def geom_mesh(model: mujoco.MjModel, g: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Vertices and faces of geom ``g`` in its own frame (``None`` for a type not drawn)."""
    t, size = int(model.geom_type[g]), model.geom_size[g]
    G = mujoco.mjtGeom
    mesh: trimesh.Trimesh
    if t == G.mjGEOM_BOX:
        mesh = trimesh.creation.box(extents=2 * size)
    elif t == G.mjGEOM_SPHERE:
        mesh = trimesh.creation.icosphere(subdivisions=2, radius=float(size[0]))
    elif t == G.mjGEOM_ELLIPSOID:
        mesh = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
        mesh.apply_scale(size)
    elif t == G.mjGEOM_CAPSULE:
        mesh = trimesh.creation.capsule(height=2 * float(size[1]), radius=float(size[0]), count=[8, 8])
    elif t == G.mjGEOM_CYLINDER:
        mesh = trimesh.creation.cylinder(radius=float(size[0]), height=2 * float(size[1]), sections=16)
    elif t == G.mjGEOM_PLANE:
        mesh = trimesh.creation.box(extents=(2 * _FLOOR_HALF_M, 2 * _FLOOR_HALF_M, 0.02))
        mesh.apply_translation((0, 0, -0.01))
    elif t == G.mjGEOM_MESH:
        m = int(model.geom_dataid[g])
        va, vn = int(model.mesh_vertadr[m]), int(model.mesh_vertnum[m])
        fa, fn = int(model.mesh_faceadr[m]), int(model.mesh_facenum[m])
        return model.mesh_vert[va : va + vn].copy(), model.mesh_face[fa : fa + fn].copy()
    elif t == G.mjGEOM_HFIELD:
        return hfield_mesh(model, int(model.geom_dataid[g]))
    else:
        return None
    return np.asarray(mesh.vertices), np.asarray(mesh.faces)


def hfield_mesh(model: mujoco.MjModel, h: int) -> tuple[np.ndarray, np.ndarray]:
    """The height field ``h`` as a grid mesh in its geom's frame (MuJoCo's layout: rows along y)."""
    nrow, ncol = int(model.hfield_nrow[h]), int(model.hfield_ncol[h])
    sx, sy, sz, _ = model.hfield_size[h]
    adr = int(model.hfield_adr[h])
    z = model.hfield_data[adr : adr + nrow * ncol].reshape(nrow, ncol) * sz
    x, y = np.meshgrid(np.linspace(-sx, sx, ncol), np.linspace(-sy, sy, nrow))
    verts = np.stack([x, y, z], axis=-1).reshape(-1, 3)
    r, c = np.meshgrid(np.arange(nrow - 1), np.arange(ncol - 1), indexing="ij")
    a = (r * ncol + c).reshape(-1)
    faces = np.concatenate([np.stack([a, a + 1, a + ncol], 1), np.stack([a + 1, a + ncol + 1, a + ncol], 1)])
    return verts, faces


class Go1Source:
    """A Go1 policy walking the command sequence live (module docstring)."""

    def __init__(self, policy: Go1Policy, seed: int, title: str) -> None:
        """Build the robot's world (one robot, nominal) and its visual model."""
        self.title = title
        self.policy = policy
        world = replace(nominal(policy.task_cfg), num_envs=1, episode_length_s=SEQUENCE_S + 10.0)
        self.env = Go1Env(world, seed=seed)
        self.dt_s = 1.0 / self.env.cfg.policy_hz
        self.steps = round(SEQUENCE_S * self.env.cfg.policy_hz)
        self.model = go1_model(self.env.model.opt.timestep, self.env.terrain, with_visuals=True)
        self.data = mujoco.MjData(self.model)
        self.qpos = self.env.sim.bind("qpos")
        self.obs, _ = self.env.observations()
        policy.reset()
        self.whole_body = self.env.cfg.whole_body.enabled
        self.frames: list[dict[str, Any]] = []
        self.t = 0
        self._record(np.zeros(3), np.zeros(3), False)
        self.server: Any = None

    @classmethod
    def load(cls, which: str, seed: int) -> Go1Source:
        """``which``: a Go1 checkpoint path, or ``shipped``."""
        path = resolve_checkpoint(None if which == "shipped" else Path(which))
        if not path.is_file():
            raise UserError(f"--go1 {which}: not found, expected a Go1 checkpoint or 'shipped'")
        return cls(load_go1_policy(path), seed, f"Go1 policy {path.name}")

    def _record(self, cmd: np.ndarray, vel_w: np.ndarray, fell: bool) -> None:
        self.data.qpos[:] = self.qpos[0]
        mujoco.mj_forward(self.model, self.data)
        self.frames.append(
            {
                "xpos": self.data.geom_xpos.copy(),
                "quat": np.stack([_quat(m) for m in self.data.geom_xmat]),
                "base": self.data.qpos[:3].copy(),
                "cmd": np.asarray(cmd, dtype=np.float64)[:3],
                "vel_w": vel_w,
                "fell": fell,
            }
        )

    def num_frames(self) -> int:
        """Frames recorded so far."""
        return len(self.frames)

    def extend(self) -> bool:
        """One policy step under the sequence's command of the moment (it repeats)."""
        cmd = command_at((self.t % self.steps) / self.steps, self.whole_body)
        self.env.hold_commands(np.array([cmd]))
        res = self.env.step(self.policy.act(self.obs))
        self.policy.reset(res.done)
        self.obs = res.actor_obs
        self.t += 1
        w, x, y, z = (float(q) for q in self.qpos[0, 3:7])
        yaw = float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
        c, s = np.cos(yaw), np.sin(yaw)
        v = res.state.lin_vel_b[0].numpy()
        cmd_w = np.array([c * cmd[0] - s * cmd[1], s * cmd[0] + c * cmd[1], 0.0])
        vel_w = np.array([c * v[0] - s * v[1], s * v[0] + c * v[1], 0.0])
        self._record(cmd_w, vel_w, bool(res.terminated[0]))
        return True

    def build(self, server: Any) -> None:
        """One mesh per visible geom; the two arrows."""
        self.server = server
        server.initial_camera.position = (1.6, -1.6, 1.0)  # beside the robot, looking at its start
        server.initial_camera.look_at = (0.0, 0.0, 0.3)
        self.geoms = []
        for g in range(self.model.ngeom):
            rgba = self.model.geom_rgba[g]
            if rgba[3] < 0.05:
                continue
            mesh = geom_mesh(self.model, g)
            if mesh is None:
                continue
            color = tuple(int(255 * c) for c in rgba[:3])
            h = server.scene.add_mesh_simple(
                f"/go1/geom{g}", mesh[0].astype(np.float32), mesh[1].astype(np.uint32), color=color
            )
            self.geoms.append((g, h, int(self.model.geom_bodyid[g]) != 0))
        self.arrows = None

    def show(self, frame: int) -> None:
        """Geoms where MuJoCo put them at ``frame``, arrows at the trunk."""
        f = self.frames[frame]
        with self.server.atomic():
            for g, h, moving in self.geoms:
                if moving or frame == 0:
                    h.position = tuple(f["xpos"][g])
                    h.wxyz = tuple(f["quat"][g])
            start = f["base"] + np.array([0.0, 0.0, _ARROW_Z_M])
            pts = np.stack([np.stack([start, start + f["cmd"]]), np.stack([start, start + f["vel_w"]])])
            colors = np.array([[255, 140, 0], [31, 111, 209]], dtype=np.uint8)
            if self.arrows is not None:
                self.arrows.remove()
            self.arrows = self.server.scene.add_arrows(
                "/go1/velocity",
                pts.astype(np.float32),
                colors,
                shaft_radius=0.015,
                head_radius=0.04,
                head_length=0.08,
            )

    def describe(self, frame: int) -> str:
        """Time, the command and the measured planar velocity (world frame)."""
        f = self.frames[frame]
        c, v = f["cmd"], f["vel_w"]
        fell = "  **fell**" if f["fell"] else ""
        return (
            f"t = {frame * self.dt_s:.2f} s — command (orange) {np.hypot(c[0], c[1]):.2f} m/s, "
            f"measured (blue) {np.hypot(v[0], v[1]):.2f} m/s{fell}"
        )
