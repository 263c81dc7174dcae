"""Frame helpers for legged robots, numpy only (the torch-free deploy runner uses them too)."""

from __future__ import annotations

import numpy as np


def gravity_in_body(quat_wxyz: np.ndarray) -> np.ndarray:
    """(..., 3) world gravity direction (0, 0, −1) in the body frame of quaternions (..., 4) (w, x, y, z).

    This is the IMU's "projected gravity": −(third row of the body-to-world rotation)."""
    q = np.asarray(quat_wxyz, dtype=np.float64)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return -np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=-1)


def body_to_world(quat_wxyz: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotation matrices taking body-frame vectors into the world frame, from unit
    quaternions (..., 4) (w, x, y, z)."""
    q = np.asarray(quat_wxyz, dtype=np.float64)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    rows = (
        (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
        (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
        (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
    )
    return np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)
