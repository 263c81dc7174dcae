"""A video of a Go1 policy: MuJoCo's offscreen renderer (EGL by default on a Linux machine without a
display, see ``scenefactory/__init__``; ``MUJOCO_GL`` to change),
a tracking camera, and an overlay of the command and the measured velocity.

The robot runs in the training simulator (nominal, one world) through a fixed command sequence
scaled to the video length: stand, walk 1.0 m/s, run 2.0 m/s, turn at 1.8 rad/s, turn the other
way, walk backwards, step sideways, stand; a policy with whole-body commands walks through
:data:`WHOLE_BODY_SEQUENCE` instead (crouched, tall, nose down and up, leaning left and right), and
the overlay adds the commanded and measured height, pitch and roll. Besides ``go1.mp4`` it writes
``go1_frames.png``, six frames side by side, to see at a glance.

With a :class:`TileWalk` the robot instead crosses one terrain tile as ``eval go1``'s terrain table
runs it: the evaluation's grid (``terrain_eval.eval_terrain``), started at the centre of the tile
of that kind and level facing +x, commanded straight ahead at one speed for the whole video; the
overlay adds the distance covered along +x. After a fall it restarts at the centre.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from scenefactory.errors import UserError
from scenefactory.go1.config import TERRAIN_KINDS, nominal
from scenefactory.go1.env import Go1Env
from scenefactory.go1.rewards import pitch_roll
from scenefactory.go1.terrain import go1_model, level_parameter
from scenefactory.go1.terrain_eval import eval_terrain, start_on_tiles
from scenefactory.go1.train import Go1Policy
from scenefactory.go1.whole_body import full_commands

SEQUENCE = (
    (0.10, (0.0, 0.0, 0.0)),
    (0.25, (1.0, 0.0, 0.0)),
    (0.42, (2.0, 0.0, 0.0)),
    (0.57, (0.0, 0.0, 1.8)),
    (0.70, (0.0, 0.0, -1.8)),
    (0.80, (-1.0, 0.0, 0.0)),
    (0.92, (0.0, 0.5, 0.0)),
    (1.00, (0.0, 0.0, 0.0)),
)
"""(end as a fraction of the video, command) — each command holds until its end."""

WHOLE_BODY_SEQUENCE = (
    (0.08, (0.0, 0.0, 0.0, 0.28, 0.0, 0.0)),
    (0.20, (1.0, 0.0, 0.0, 0.28, 0.0, 0.0)),
    (0.30, (2.0, 0.0, 0.0, 0.28, 0.0, 0.0)),
    (0.40, (0.5, 0.0, 0.0, 0.20, 0.0, 0.0)),
    (0.50, (0.5, 0.0, 0.0, 0.34, 0.0, 0.0)),
    (0.60, (0.5, 0.0, 0.0, 0.28, 0.3, 0.0)),
    (0.70, (0.5, 0.0, 0.0, 0.28, -0.3, 0.0)),
    (0.78, (0.5, 0.0, 0.0, 0.28, 0.0, 0.2)),
    (0.86, (0.5, 0.0, 0.0, 0.28, 0.0, -0.2)),
    (0.94, (0.0, 0.0, 1.8, 0.28, 0.0, 0.0)),
    (1.00, (0.0, 0.0, 0.0, 0.28, 0.0, 0.0)),
)
"""The same for a whole-body policy: (vx, vy, yaw rate, height [m], pitch [rad], roll [rad])."""

WIDTH, HEIGHT, FPS = 640, 360, 25


@dataclass(frozen=True)
class TileWalk:
    """Walk across one tile: its ``kind`` (one of :data:`TERRAIN_KINDS`), difficulty ``level`` and
    the forward command ``speed_mps``."""

    kind: str
    level: int
    speed_mps: float = 0.5

    def __post_init__(self) -> None:
        """Validate the kind and level (the speed may be any forward command)."""
        if self.kind not in TERRAIN_KINDS:
            raise ValueError(f"tile kind must be one of {TERRAIN_KINDS}, got '{self.kind}'")
        if self.level < 0:
            raise ValueError(f"level must be non-negative, got {self.level}")


def command_at(frac: float, whole_body: bool = False) -> tuple[float, ...]:
    """The sequence's command at a fraction of the video (:data:`WHOLE_BODY_SEQUENCE`'s with
    ``whole_body``)."""
    sequence: tuple[tuple[float, tuple[float, ...]], ...] = WHOLE_BODY_SEQUENCE if whole_body else SEQUENCE
    for end, cmd in sequence:
        if frac < end:
            return cmd
    return sequence[-1][1]


def render_go1(
    policy: Go1Policy, path: Path, seconds: float = 16.0, seed: int = 0, tile: TileWalk | None = None
) -> Path:
    """Write ``path`` (MP4) and ``go1_frames.png`` beside it; returns ``path``. ``tile``: cross
    that tile (module docstring) instead of the command sequence."""
    import imageio.v2 as imageio
    import mujoco
    from PIL import Image, ImageDraw

    if not seconds > 0:
        raise UserError(f"--seconds must be positive, got {seconds}")
    world = replace(nominal(policy.task_cfg), num_envs=1, episode_length_s=seconds + 10.0)
    if tile is not None:
        world = replace(world, terrain=eval_terrain(world, (tile.kind,), seed))
        top = world.terrain.num_levels - 1
        if tile.level > top:
            raise UserError(f"--level {tile.level}: the terrain has levels 0 … {top}")
    env = Go1Env(world, seed=seed)
    zero, start_xy, where = np.zeros(1, dtype=np.int64), np.zeros(2), ""
    if tile is not None:
        start_xy = start_on_tiles(env, tile.level, zero, np.zeros(1))[0]
        name, value = level_parameter(world.terrain, tile.kind, tile.level)
        where = f"   {tile.kind} level {tile.level} ({name} {value:.3g})"
    # the ground the robot walks on: the flat floor, or a terrain policy's height field
    vis_model = go1_model(env.model.opt.timestep, env.terrain, with_visuals=True)
    vis_data = mujoco.MjData(vis_model)
    try:
        renderer = mujoco.Renderer(vis_model, HEIGHT, WIDTH)
    except Exception as exc:  # GL context creation fails in many ways
        raise UserError(
            f"MuJoCo's offscreen renderer is unavailable ({exc}); set MUJOCO_GL=egl or MUJOCO_GL=osmesa"
        ) from exc
    cam = vis_model.camera("track").id
    steps = round(seconds * env.cfg.policy_hz)
    every = max(1, round(env.cfg.policy_hz / FPS))
    frames: list[np.ndarray] = []
    qpos = env.sim.bind("qpos")
    obs, _ = env.observations()
    policy.reset()
    whole_body = env.cfg.whole_body.enabled
    for t in range(steps):
        if tile is None:
            cmd = command_at(t / steps, whole_body)
        else:  # straight ahead (at the nominal body command)
            cmd = tuple(full_commands(np.array([[tile.speed_mps, 0.0, 0.0]]), env.cfg.whole_body, 1)[0])
        env.hold_commands(np.array([cmd]))
        res = env.step(policy.act(obs))
        policy.reset(res.done)
        obs = res.actor_obs
        along = float(qpos[0, 0] - start_xy[0])
        if tile is not None and bool(res.done[0]):  # start over at the tile's centre, facing +x
            start_xy = start_on_tiles(env, tile.level, zero, np.zeros(1))[0]
            obs, _ = env.observations()
        if t % every:
            continue
        vis_data.qpos[:] = qpos[0]
        mujoco.mj_forward(vis_model, vis_data)
        renderer.update_scene(vis_data, camera=cam)
        img = Image.fromarray(renderer.render())
        v = res.state.lin_vel_b[0].numpy()
        w = float(res.state.ang_vel_b[0, 2])
        d = ImageDraw.Draw(img)
        body_cmd = body_meas = ""
        if whole_body:
            pitch, roll = (float(x) for x in pitch_roll(res.state.gravity_b[0]))
            body_cmd = f"  height {cmd[3]:.2f}  pitch {cmd[4]:+.2f}  roll {cmd[5]:+.2f}"
            body_meas = f"  height {float(res.state.height_m[0]):.2f}  pitch {pitch:+.2f}  roll {roll:+.2f}"
        d.rectangle((0, 0, WIDTH, 38), fill=(0, 0, 0))
        d.text(
            (8, 4),
            f"t {t / env.cfg.policy_hz:5.1f} s   command  vx {cmd[0]:+.1f}  vy {cmd[1]:+.1f}  "
            f"yaw {cmd[2]:+.1f}" + body_cmd + where,
            fill=(255, 255, 255),
        )
        d.text(
            (8, 20),
            f"              measured vx {v[0]:+.2f}  vy {v[1]:+.2f}  yaw {w:+.2f}"
            + body_meas
            + ("" if tile is None else f"   along {along:.2f} m")
            + ("   FELL" if bool(res.terminated[0]) else ""),
            fill=(255, 220, 120),
        )
        frames.append(np.asarray(img))
    renderer.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.mp4")
    ims: list[Any] = list(frames)
    imageio.mimwrite(tmp, ims, fps=FPS, codec="libx264", macro_block_size=8, quality=7)
    os.replace(tmp, path)
    picks = np.linspace(0, len(frames) - 1, 6).astype(int)
    sheet = np.concatenate(
        [
            np.concatenate([frames[i] for i in picks[:3]], axis=1),
            np.concatenate([frames[i] for i in picks[3:]], axis=1),
        ],
        axis=0,
    )
    Image.fromarray(sheet).save(path.with_name("go1_frames.png"))
    return path
