"""The package makes OpenMP's idle threads sleep unless the user chose (``scenefactory/__init__.py``):
on a machine with another busy process, spinning threads made two-thread driving steps several
times slower than one thread (``benchmarks/results/thread_sharing.json``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SHOW = "import os, scenefactory; print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"


@pytest.mark.parametrize(
    ("given", "seen"),
    [
        ({}, "PASSIVE None"),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE None"),
        ({"GOMP_SPINCOUNT": "300000"}, "None 300000"),
    ],
)
def test_idle_threads_sleep_unless_the_user_chose(given: dict[str, str], seen: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", SHOW], env={**env, **given}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == seen
