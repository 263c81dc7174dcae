"""scenefactory: batched physics simulation for RL (driving and legged locomotion) and
cross-simulator transfer."""

import os as _os
import sys as _sys

# MuJoCo picks its OpenGL backend when it is first imported. On a Linux machine without a display
# the default (GLFW) cannot render, so offscreen rendering (``render go1``) uses EGL unless the
# user chose a backend (MUJOCO_GL=osmesa for software rendering).
if _sys.platform.startswith("linux") and not _os.environ.get("DISPLAY"):
    _os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"
