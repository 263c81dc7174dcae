"""A video of a Go1 policy: MuJoCo's offscreen renderer (EGL by default on a Linux machine without a
display, see ``scenefactory/__init__``; ``MUJOCO_GL`` to change),
a tracking camera, and an overlay of the command and the measured velocity.

The robot runs in the training simulator (nominal, one world) through a fixed command sequence
scaled to the video length: stand, walk 1.0 m/s, run 2.0 m/s, turn at 1.8 rad/s, turn the other
way, walk backwards, step sideways, stand; a policy with whole-body commands walks through
:data:`WHOLE_BODY_SEQUENCE` instead (crouched, tall, nose down and up, leaning left and right), and
the overlay adds the commanded and measured height, pitch and roll. Besides ``go1.mp4`` it writes
``go1_frames.png``, six frames side by side, to see at a glance.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from scenefactory.errors import UserError
from scenefactory.go1.config import nominal
from scenefactory.go1.env import Go1Env
from scenefactory.go1.rewards import pitch_roll
from scenefactory.go1.terrain import go1_model
from scenefactory.go1.train import Go1Policy

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


def command_at(frac: float, whole_body: bool = False) -> tuple[float, ...]:
    """The sequence's command at a fraction of the video (:data:`WHOLE_BODY_SEQUENCE`'s with
    ``whole_body``)."""
    sequence: tuple[tuple[float, tuple[float, ...]], ...] = WHOLE_BODY_SEQUENCE if whole_body else SEQUENCE
    for end, cmd in sequence:
        if frac < end:
            return cmd
    return sequence[-1][1]


def render_go1(policy: Go1Policy, path: Path, seconds: float = 16.0, seed: int = 0) -> Path:
    """Write ``path`` (MP4) and ``go1_frames.png`` beside it; returns ``path``."""
    import imageio.v2 as imageio
    import mujoco
    from PIL import Image, ImageDraw

    if not seconds > 0:
        raise UserError(f"--seconds must be positive, got {seconds}")
    env = Go1Env(replace(nominal(policy.task_cfg), num_envs=1, episode_length_s=seconds + 10.0), seed=seed)
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
        cmd = command_at(t / steps, whole_body)
        env.hold_commands(np.array([cmd]))
        res = env.step(policy.act(obs))
        policy.reset(res.done)
        obs = res.actor_obs
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
            f"yaw {cmd[2]:+.1f}" + body_cmd,
            fill=(255, 255, 255),
        )
        d.text(
            (8, 20),
            f"              measured vx {v[0]:+.2f}  vy {v[1]:+.2f}  yaw {w:+.2f}"
            + body_meas
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
