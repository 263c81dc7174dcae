"""The driving source of ``scenefactory view`` (:mod:`~scenefactory.jobs.view`): scenes in 3D, their
logged drivers or a checkpoint's policy driving them live.

The road is a flat mesh of the lane footprints with the road lines (white, yellow) and edges (dark)
as line segments just above it; controlled agents are boxes coloured by status (the renderers'
colours), logged objects boxes coloured by type. Up to ``worlds`` scenes run together in one
:class:`~scenefactory.tasks.driving.env.DrivingEnv` (kinematic tier); a dropdown chooses the one
shown. A world whose episode has ended holds its last frame.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.colors import to_rgb

from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.evaluation.html_replay import OBJECT_KINDS
from scenefactory.evaluation.human import replay_beyond
from scenefactory.evaluation.render_scene import STATUS_COLORS
from scenefactory.evaluation.rollout import EXPERT, PolicyFn
from scenefactory.jobs.scenes import eval_scenes, signal_cycle
from scenefactory.rl.driving import load_policy
from scenefactory.scenes.library import load_scene_dir
from scenefactory.scenes.roadgraph import RoadEdgeType, RoadLineType
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.env import DrivingEnv
from scenefactory.tasks.driving.status import AgentStatus

MAX_WORLDS = 8
"""The most scenes one viewer runs together."""
_OBJECT_RGB = {
    "vehicle": (122, 92, 168),
    "pedestrian": (216, 27, 144),
    "cyclist": (0, 137, 123),
    "other": (109, 109, 109),
}
_CAR_HEIGHT_M = 1.5
_LINE_Z_M = 0.03


def _rgb(color: str) -> tuple[int, int, int]:
    r, g, b = to_rgb(color)
    return round(255 * r), round(255 * g), round(255 * b)


def _yaw_wxyz(yaw: float) -> tuple[float, float, float, float]:
    return (float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2)))


def lane_mesh(scene: Scene, origin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (V, 3) and triangles (F, 3) of the lane footprints: each centre polyline offset by
    ± half its width along its normals, one quad per segment."""
    verts: list[np.ndarray] = []
    faces: list[np.ndarray] = []
    rg = scene.roadgraph
    for i in range(rg.num_lanes):
        c = rg.lane_xy[i][rg.lane_valid[i]] - origin
        w = rg.lane_width_m[i][rg.lane_valid[i]]
        keep = np.ones(len(c), dtype=bool)
        keep[1:] = np.linalg.norm(np.diff(c, axis=0), axis=1) > 1e-6
        c, w = c[keep], w[keep]
        if len(c) < 2:
            continue
        tangent = np.gradient(c, axis=0)
        tangent /= np.maximum(np.linalg.norm(tangent, axis=1, keepdims=True), 1e-9)
        normal = np.stack([-tangent[:, 1], tangent[:, 0]], axis=1) * (0.5 * w)[:, None]
        left, right = c + normal, c - normal
        base = int(sum(len(v) for v in verts))
        n = len(c)
        verts.append(np.concatenate([np.c_[left, np.zeros(n)], np.c_[right, np.zeros(n)]]))
        j = np.arange(n - 1)
        faces.append(np.stack([base + j, base + n + j, base + j + 1], axis=1))
        faces.append(np.stack([base + j + 1, base + n + j, base + n + j + 1], axis=1))
    if not verts:
        return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.uint32)
    return np.concatenate(verts).astype(np.float32), np.concatenate(faces).astype(np.uint32)


def _segments(polys: list[np.ndarray], origin: np.ndarray) -> np.ndarray:
    """(N, 2, 3) line segments of polylines, just above the road."""
    segs = [np.stack([p[:-1], p[1:]], axis=1) for p in polys if len(p) >= 2]
    if not segs:
        return np.zeros((0, 2, 3), np.float32)
    s = np.concatenate(segs) - origin
    return np.concatenate([s, np.full((*s.shape[:2], 1), _LINE_Z_M)], axis=2).astype(np.float32)


class DriveSource:
    """Scenes driven live by the logged drivers or a policy (module docstring)."""

    def __init__(
        self, scenes: list[Scene], policy: PolicyFn | str, task: DrivingTaskConfig, title: str
    ) -> None:
        """Start the worlds (one per scene) and record their spawn frame."""
        self.title = title
        self.scenes = scenes
        self.policy = policy
        cfg = replace(task, num_worlds=len(scenes), water_film_randomization_mm=None, min_active_fraction=0.0)
        self.dt_s = cfg.dt_s
        self.env = DrivingEnv(cfg, scenes, engine=EngineSpec(tier="kinematic"), sequential_scenes=True)
        self.obs = self.env.observations()
        self.ended = np.zeros(len(scenes), dtype=bool)
        self.live = any(sc.log is not None for sc in scenes) or policy != EXPERT
        self.frames = [self._frame()]
        self.world = 0
        self.server: Any = None
        self.handles: list[Any] = []

    @classmethod
    def load(
        cls, scenes_dir: Path | None, split: str, checkpoint: Path | None, worlds: int, seed: int
    ) -> DriveSource:
        """The scenes of ``scenes_dir`` (or held-out procedural ones for a checkpoint) and who drives."""
        if not 1 <= worlds <= MAX_WORLDS:
            raise UserError(f"--worlds must be between 1 and {MAX_WORLDS}, got {worlds}")
        if checkpoint is None:
            assert scenes_dir is not None
            scenes = load_scene_dir(scenes_dir, split, worlds)
            k = max(1, max(sc.num_agents for sc in scenes))
            task = DrivingTaskConfig(agents_per_world=k)
            return cls([replay_beyond(sc, k) for sc in scenes], EXPERT, task, f"scenes of {scenes_dir}")
        policy = load_policy(checkpoint)
        task = policy.task_cfg
        k = task.agents_per_world
        scenes = eval_scenes(worlds, k, seed + 7, scenes_dir, signal_cycle(task), split)
        return cls([replay_beyond(sc, k) for sc in scenes], policy.act, task, f"evaluation of {checkpoint}")

    # -------------------------------------------------------------------------------------- frames

    def _frame(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        st = self.env.engine.state()
        step = self.env.step_count.cpu().numpy().copy()
        return (
            st.pos_xy.cpu().numpy().copy(),
            st.yaw.cpu().numpy().copy(),
            self.env.status.cpu().numpy().copy(),
            step,
        )

    def num_frames(self) -> int:
        """Frames recorded so far."""
        return len(self.frames)

    def extend(self) -> bool:
        """One more policy step of every world; worlds whose episode ended hold their last frame."""
        if not self.live or self.ended.all():
            return False
        with torch.inference_mode():
            act = self.env.expert_actions() if isinstance(self.policy, str) else self.policy(self.obs)
            res = self.env.step(act)
        self.obs = res.obs
        pos, yaw, status, step = self._frame()
        prev = self.frames[-1]
        done = res.reset_worlds.cpu().numpy()
        state = res.state
        for w in range(len(self.scenes)):
            if self.ended[w]:
                pos[w], yaw[w], status[w], step[w] = prev[0][w], prev[1][w], prev[2][w], prev[3][w]
            elif w in done:  # the world's last step: the state before its reset
                pos[w], yaw[w] = state.pos_xy[w].cpu().numpy(), state.yaw[w].cpu().numpy()
                s = prev[2][w].copy()
                f = res.finished
                for i in (f.world == w).nonzero().squeeze(-1).tolist():
                    s[int(f.agent[i])] = int(f.outcome[i])
                s[s == int(AgentStatus.ACTIVE)] = int(AgentStatus.TIMEOUT)
                status[w], step[w] = s, prev[3][w] + 1
                self.ended[w] = True
        self.frames.append((pos, yaw, status, step))
        return True

    # ---------------------------------------------------------------------------------------- scene

    def build(self, server: Any) -> None:
        """The world dropdown and the first world's road."""
        self.server = server
        names = [f"{i}: {sc.name}" for i, sc in enumerate(self.scenes)]
        with server.gui.add_folder("World"):
            pick = server.gui.add_dropdown("Scene", names, initial_value=names[0])

        def chosen(_: Any) -> None:
            self.select(names.index(pick.value))

        pick.on_update(chosen)
        self.select(0)

    def select(self, world: int) -> None:
        """Show world ``world``: rebuild its road and its agents' and objects' boxes."""
        for h in self.handles:
            h.remove()
        self.handles = []
        self.world = world
        sc = self.scenes[world]
        s = self.server.scene
        xmin, ymin, xmax, ymax = sc.roadgraph.bounds()
        self.origin = np.array([(xmin + xmax) / 2, (ymin + ymax) / 2])
        span = max(xmax - xmin, ymax - ymin, 30.0)
        cam = self.server.initial_camera  # above the road, looking down at it from the south
        cam.position = (0.0, -0.55 * span, 0.75 * span)
        cam.look_at = (0.0, 0.0, 0.0)
        for client in self.server.get_clients().values():
            client.camera.position, client.camera.look_at = cam.position, cam.look_at
        v, f = lane_mesh(sc, self.origin)
        add = self.handles.append
        add(s.add_mesh_simple("/road/lanes", v, f, color=(110, 114, 118), side="double", flat_shading=True))
        rg = sc.roadgraph
        yellow = {int(t) for t in RoadLineType if "YELLOW" in t.name}
        lines = rg.lines()
        groups = {
            "yellow": (
                [p for p, t in zip(lines, rg.line_type, strict=True) if int(t) in yellow],
                (240, 180, 0),
            ),
            "white": (
                [p for p, t in zip(lines, rg.line_type, strict=True) if int(t) not in yellow],
                (255, 255, 255),
            ),
            "edges": (rg.edges(), (47, 51, 55)),
        }
        medians = [p for p, t in zip(rg.edges(), rg.edge_type, strict=True) if int(t) == RoadEdgeType.MEDIAN]
        groups["medians"] = (medians, (74, 79, 85))
        for name, (polys, rgb) in groups.items():
            segs = _segments(polys, self.origin)
            if len(segs):
                add(s.add_line_segments(f"/road/{name}", segs, rgb, thickness=0.25))
        valid = np.flatnonzero(sc.agent_valid)
        self.agents = [
            (
                int(i),
                s.add_box(
                    f"/agents/{i}",
                    color=_rgb(STATUS_COLORS[AgentStatus.ACTIVE]),
                    dimensions=(float(sc.length_m[i]), float(sc.width_m[i]), _CAR_HEIGHT_M),
                ),
            )
            for i in valid
        ]
        self.handles += [h for _, h in self.agents]
        self.objects = []
        rep = sc.replay
        if rep is not None:
            for j in range(rep.num_objects):
                kind = OBJECT_KINDS.get(int(rep.kind[j]), "other")
                height = 1.7 if kind == "pedestrian" else _CAR_HEIGHT_M
                dims = (float(rep.length_m[j]), float(rep.width_m[j]), height)
                h = s.add_box(f"/objects/{j}", color=_OBJECT_RGB[kind], dimensions=dims, opacity=0.8)
                self.objects.append(h)
        self.handles += self.objects

    def show(self, frame: int) -> None:
        """Move the boxes of the shown world to ``frame``."""
        pos, yaw, status, step = self.frames[frame]
        w = self.world
        with self.server.atomic():
            for i, h in self.agents:
                h.position = (*(pos[w, i] - self.origin), _CAR_HEIGHT_M / 2)
                h.wxyz = _yaw_wxyz(float(yaw[w, i]))
                h.color = _rgb(STATUS_COLORS.get(AgentStatus(int(status[w, i])), "#000000"))
            rep = self.scenes[w].replay
            t = int(step[w])
            for j, h in enumerate(self.objects):
                assert rep is not None
                ok = t < rep.valid.shape[1] and bool(rep.valid[j, t])
                h.visible = ok
                if ok:
                    h.position = (*(rep.xy[j, t] - self.origin), float(h.dimensions[2]) / 2)
                    h.wxyz = _yaw_wxyz(float(rep.yaw[j, t]))

    def describe(self, frame: int) -> str:
        """Time, step and the shown world's statuses."""
        _, _, status, step = self.frames[frame]
        w = self.world
        counts = np.bincount(status[w, [i for i, _ in self.agents]], minlength=len(AgentStatus))
        parts = ", ".join(f"{AgentStatus(c).name.lower()} {n}" for c, n in enumerate(counts) if n)
        ended = " (ended)" if self.ended[w] and frame == len(self.frames) - 1 else ""
        return f"**{self.scenes[w].name}** t = {int(step[w]) * self.dt_s:.1f} s{ended}: {parts}"
