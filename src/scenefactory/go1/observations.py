"""Observation terms: what the actor (a real robot's sensors) and the critic (privileged) see.

Actor frame, 45 values (the deployable layout, written into the export sidecar):

=======  ====  =====================================================================
slice    size  quantity
=======  ====  =====================================================================
0:3      3     gyro, body angular velocity [rad/s]
3:6      3     projected gravity (unit vector, body frame), from the IMU orientation
6:9      3     command vx, vy [m/s], yaw rate [rad/s]
9:21     12    joint positions minus the home pose [rad]
21:33    12    joint velocities [rad/s]
33:45    12    last action
=======  ====  =====================================================================

With whole-body commands (``config.WholeBodyConfig.enabled``) the command slice is 6 wide —
vx, vy, yaw rate, trunk height [m], pitch [rad], roll [rad] at 6:12 — and every later slice moves
by 3: a 48-value frame (:func:`frame_layout`).

The actor gets ``history`` such frames, newest first, with uniform sensor noise on the measured
parts. No base linear velocity: a real Go1 has no sensor for it. The critic gets one clean frame,
then base linear velocity (3), trunk height (1), foot contacts (4) and the randomized physical
parameters (20, ``Randomizer.privileged``; 21 when the joint damping/friction scale is randomized).
"""

from __future__ import annotations

import numpy as np

from scenefactory.go1.config import NoiseConfig

FRAME_DIM = 45
FRAME_LAYOUT = (
    ("gyro_radps", 0, 3),
    ("projected_gravity", 3, 6),
    ("command", 6, 9),
    ("joint_pos_minus_home_rad", 9, 21),
    ("joint_vel_radps", 21, 33),
    ("last_action", 33, 45),
)
"""(name, start, stop) of each slice of an actor frame."""
PARAMS_START = FRAME_DIM + 3 + 1 + 4
"""Critic observations from this column on are the randomized parameters (the ``params`` group)."""
PRIVILEGED_DIM = 3 + 1 + 4 + 20
CRITIC_DIM = FRAME_DIM + PRIVILEGED_DIM
"""The critic's width without joint damping/friction randomization (one more with it)."""
VELOCITY_COMMANDS = ("vx_mps", "vy_mps", "yaw_radps")
WHOLE_BODY_COMMANDS = ("height_m", "pitch_rad", "roll_rad")
"""The commands a whole-body frame adds, in order, after the velocity command."""
COMMAND_START = 6
"""First column of the command slice in a frame."""


def command_names(whole_body: bool) -> tuple[str, ...]:
    """The command slice's entries, in order: 3, or 6 with whole-body commands."""
    return VELOCITY_COMMANDS + (WHOLE_BODY_COMMANDS if whole_body else ())


def frame_dim(whole_body: bool) -> int:
    """Values per actor frame: :data:`FRAME_DIM`, 3 more with whole-body commands."""
    return FRAME_DIM + (len(WHOLE_BODY_COMMANDS) if whole_body else 0)


def frame_layout(whole_body: bool) -> tuple[tuple[str, int, int], ...]:
    """(name, start, stop) of each slice of an actor frame: :data:`FRAME_LAYOUT` with the command
    slice widened to 6 for whole-body commands."""
    extra = frame_dim(whole_body) - FRAME_DIM
    return tuple(
        (name, a + (extra if a > COMMAND_START else 0), b + (extra if b > COMMAND_START else 0))
        for name, a, b in FRAME_LAYOUT
    )


def params_start(whole_body: bool) -> int:
    """First critic column of the randomized parameters (:data:`PARAMS_START` without whole-body
    commands)."""
    return frame_dim(whole_body) + 3 + 1 + 4


def actor_frame(
    arrays: dict[str, np.ndarray], noise: NoiseConfig | None = None, rng: np.random.Generator | None = None
) -> np.ndarray:
    """(N, 45) float32 actor frame (48 with whole-body commands: ``arrays["command"]`` (N, 6)) from
    the state arrays, with uniform noise from ``rng`` when ``noise`` is set."""
    gyro = arrays["ang_vel_b"]
    grav = arrays["gravity_b"]
    qrel = arrays["joint_pos"] - arrays["home"]
    qd = arrays["joint_vel"]
    if noise is not None:
        if rng is None:
            raise ValueError("actor_frame: sensor noise needs a generator")
        gyro = gyro + rng.uniform(-noise.gyro_radps, noise.gyro_radps, gyro.shape)
        grav = grav + rng.uniform(-noise.gravity, noise.gravity, grav.shape)
        qrel = qrel + rng.uniform(-noise.joint_pos_rad, noise.joint_pos_rad, qrel.shape)
        qd = qd + rng.uniform(-noise.joint_vel_radps, noise.joint_vel_radps, qd.shape)
    frame = np.concatenate([gyro, grav, arrays["command"], qrel, qd, arrays["actions"]], axis=1)
    return frame.astype(np.float32)


def critic_obs(arrays: dict[str, np.ndarray], privileged: np.ndarray) -> np.ndarray:
    """(N, 73) float32 (74 with the joint damping/friction scale): a clean actor frame plus
    privileged state (module docstring)."""
    clean = actor_frame(arrays)
    extra = np.concatenate(
        [
            arrays["lin_vel_b"],
            arrays["height_m"][:, None],
            arrays["foot_contact"].astype(np.float64),
            privileged,
        ],
        axis=1,
    )
    return np.concatenate([clean, extra.astype(np.float32)], axis=1)
