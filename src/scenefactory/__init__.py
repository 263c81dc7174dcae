"""scenefactory: batched physics simulation for RL (driving and legged locomotion) and
cross-simulator transfer."""

import os as _os
import sys as _sys

# MuJoCo picks its OpenGL backend when it is first imported. On a Linux machine without a display
# the default (GLFW) cannot render, so offscreen rendering (``render go1``) uses EGL unless the
# user chose a backend (MUJOCO_GL=osmesa for software rendering).
if _sys.platform.startswith("linux") and not _os.environ.get("DISPLAY"):
    _os.environ.setdefault("MUJOCO_GL", "egl")

# torch's and numba's parallel loops share one OpenMP runtime (libgomp), read when torch is first
# imported. Its idle threads spin before they sleep: with as many threads as cores and another busy
# process on the machine, a driving step (dozens of parallel regions) ran 2 to 50 times slower on two
# threads than on one, while threads that sleep at once stay at one thread's speed and cost about 13 %
# on an idle machine (benchmarks/results/thread_sharing.json). Set OMP_WAIT_POLICY=ACTIVE (or any
# GOMP_SPINCOUNT) for a machine of your own.
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

__version__ = "0.1.0"
