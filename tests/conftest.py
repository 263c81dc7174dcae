"""Shared pytest fixtures."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings

from scene_fixtures import straight_scene
from scenefactory.scenes.scene import Scene

# Property-based tests: a fixed, derandomized budget so `make test` is repeatable and bounded on two
# cores; no per-example deadline (a CLI call builds torch models and can take a second).
settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile("ci")

# Road data built once per scene is cached (tasks/driving/road_cache.py); the tests, and the CLI
# subprocesses they start, use a cache of their own, not the user's.
# Removed when the session ends (every pytest run left one behind in /tmp).
_CACHE_DIR = tempfile.mkdtemp(prefix="scenefactory-test-cache-")
os.environ["SCENEFACTORY_CACHE_DIR"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Tiny batches: on a shared machine more torch threads only spin (tens of times slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def road_scene() -> Scene:
    """Two agents eastbound 30 m apart and one westbound, all at 5 m/s."""
    return straight_scene([(10.0, 0.0, 0.0, 5.0), (40.0, 0.0, 0.0, 5.0), (100.0, 3.5, np.pi, 5.0)])


@pytest.fixture
def cli_error(capsys: pytest.CaptureFixture[str]) -> Callable[..., str]:
    """``cli_error(*argv)``: run the CLI, assert it fails as a user error (exit 2, one line on
    stderr, no traceback) and return that line."""
    from scenefactory.cli import main

    def run(*argv: str) -> str:
        assert main(list(argv)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        return err

    return run
