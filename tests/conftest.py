"""Shared pytest fixtures."""

from __future__ import annotations

import numpy as np
import pytest

from scene_fixtures import straight_scene
from scenefactory.scenes.scene import Scene


@pytest.fixture
def road_scene() -> Scene:
    """Two agents eastbound 30 m apart and one westbound, all at 5 m/s."""
    return straight_scene([(10.0, 0.0, 0.0, 5.0), (40.0, 0.0, 0.0, 5.0), (100.0, 3.5, np.pi, 5.0)])
