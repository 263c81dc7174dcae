"""Scene JSON refuses implausible numbers on load and on save, naming the file, field and range.

A finite number can still be nonsense (1e300 m passes ``math.isfinite`` and crashes route
resampling later), so every number a scene file holds has a plausible range
(:mod:`scenefactory.scenes.plausibility`). These tests try random implausible values in every kind
of field of a rich scene (a converted WOMD scenario: lanes, lines, edges, markings, agents, log,
replay) and check that every procedural scene and test fixture stays inside the ranges.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scene_fixtures import straight_scene
from scenefactory.errors import SceneFormatError
from scenefactory.scenes import plausibility as pl
from scenefactory.scenes.library import GENERATOR_KINDS
from scenefactory.scenes.routes import make_procedural_scene
from scenefactory.scenes.scene import Scene
from scenefactory.scenes.scene_json import load_scene, save_scene, scene_to_dict
from scenefactory.scenes.womd.convert import scenario_to_scene
from test_womd_reader import make_scenario

RICH = scenario_to_scene(make_scenario("rich", 3))[0]
RICH_DICT = scene_to_dict(RICH)

# One representative path per kind of number in the scene dict, with the range it must respect.
FIELDS: dict[tuple[Any, ...], pl.Bound] = {
    ("roadgraph", "lanes", 1, "xy", 3, 0): pl.COORDINATE,
    ("roadgraph", "lanes", 0, "width_m", 2): pl.LANE_WIDTH,
    ("roadgraph", "road_lines", 0, "xy", 1, 1): pl.COORDINATE,
    ("roadgraph", "road_edges", 1, "xy", 0, 0): pl.COORDINATE,
    ("roadgraph", "crosswalks", 0, 2, 1): pl.COORDINATE,
    ("roadgraph", "speed_bumps", 0, 0, 0): pl.COORDINATE,
    ("roadgraph", "stop_signs", 0, 1): pl.COORDINATE,
    ("agents", 0, "spawn_pose", 0): pl.COORDINATE,
    ("agents", 1, "spawn_pose", 2): pl.ANGLE,
    ("agents", 2, "spawn_speed_mps"): pl.SPAWN_SPEED,
    ("agents", 0, "route_xy", 5, 1): pl.COORDINATE,
    ("agents", 1, "goal_xy", 0): pl.COORDINATE,
    ("agents", 2, "goal_s_m"): pl.ROUTE_LENGTH,
    ("agents", 0, "length_m"): pl.LENGTH,
    ("agents", 1, "width_m"): pl.WIDTH,
    ("friction",): pl.FRICTION,
    ("water_film_mm",): pl.WATER_FILM,
    ("log", "dt_s"): pl.LOG_STEP,
    ("log", "agents", 1, "xy", 7, 0): pl.COORDINATE,
    ("log", "agents", 0, "yaw", 4): pl.ANGLE,
    ("log", "agents", 2, "speed", 9): pl.SPEED,
    ("replay", "dt_s"): pl.LOG_STEP,
    ("replay", "objects", 0, "xy", 3, 1): pl.COORDINATE,
    ("replay", "objects", 0, "vel_xy", 2, 1): pl.SPEED,
    ("replay", "objects", 0, "yaw", 6): pl.ANGLE,
    ("replay", "objects", 0, "length_m"): pl.LENGTH,
    ("replay", "objects", 0, "width_m"): pl.WIDTH,
}


def field_name(path: tuple[Any, ...]) -> str:
    """``("agents", 0, "route_xy", 5, 1)`` → ``"agents[0].route_xy[5][1]"``, as errors name fields."""
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text


def _set(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


@st.composite
def implausible(draw: st.DrawFn, bound: pl.Bound) -> float:
    """A number outside ``bound``: non-finite, astronomically large, or just past an end."""
    above = st.floats(min_value=bound.hi, exclude_min=True, allow_infinity=False)
    below = st.floats(max_value=bound.lo, exclude_max=not bound.lo_open, allow_infinity=False)
    fixed = st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e300])
    value = draw(st.one_of(fixed, above, below))
    assert not bound.contains(value)
    return value


@given(data=st.data(), path=st.sampled_from(sorted(FIELDS, key=str)))
def test_loading_an_implausible_number_names_file_field_and_range(
    data: st.DataObject, path: tuple[Any, ...], tmp_path: Path
) -> None:
    bound = FIELDS[path]
    value = data.draw(implausible(bound))
    file = tmp_path / "implausible.json"
    file.write_text(json.dumps(_set(RICH_DICT, path, value)))  # NaN/Infinity tokens, as Python writes them
    with pytest.raises(SceneFormatError) as err:
        load_scene(file)
    message = str(err.value)
    assert message.startswith(f"{file}: field '{field_name(path)}': expected {bound.describe()}, got ")


@given(data=st.data(), path=st.sampled_from(sorted(FIELDS, key=str)))
def test_the_bounds_themselves_load(data: st.DataObject, path: tuple[Any, ...], tmp_path: Path) -> None:
    bound = FIELDS[path]
    lo = math.nextafter(bound.lo, math.inf) if bound.lo_open else bound.lo
    value = data.draw(st.sampled_from([lo, bound.hi]) | st.floats(min_value=lo, max_value=bound.hi))
    file = tmp_path / "edge.json"
    file.write_text(json.dumps(_set(RICH_DICT, path, value)))
    if bound is pl.COORDINATE and abs(value) > pl.MAX_SCENE_EXTENT_M / 2:
        # each number inside its bound, but the scene as a whole spans too far (issue 49)
        with pytest.raises(SceneFormatError, match=r"the scene spans .* expected at most 4000 m a side"):
            load_scene(file)
        return
    load_scene(file)


ARRAYS = {  # Scene attribute, index of one element, field named in the error, bound
    "spawn_pose": ((1, 0), "agents[1].spawn_pose[0]", pl.COORDINATE),
    "spawn_speed_mps": ((0,), "agents[0].spawn_speed_mps", pl.SPAWN_SPEED),
    "goal_xy": ((2, 1), "agents[2].goal_xy[1]", pl.COORDINATE),
    "goal_s_m": ((1,), "agents[1].goal_s_m", pl.ROUTE_LENGTH),
    "length_m": ((2,), "agents[2].length_m", pl.LENGTH),
    "width_m": ((0,), "agents[0].width_m", pl.WIDTH),
    "route_xy": ((0, 3, 0), "agents[0].route_xy[3][0]", pl.COORDINATE),
}


@given(data=st.data(), attr=st.sampled_from(sorted(ARRAYS)))
def test_save_refuses_what_load_would_and_writes_nothing(
    data: st.DataObject, attr: str, tmp_path: Path
) -> None:
    index, field, bound = ARRAYS[attr]
    value = data.draw(implausible(bound))
    array = getattr(RICH, attr).copy()
    array[index] = value
    scene = dataclasses.replace(RICH, **{attr: array})
    target = tmp_path / "never.json"
    with pytest.raises(SceneFormatError, match=f"field '{re.escape(field)}'") as err:
        save_scene(scene, target)
    assert str(target) in str(err.value) and "not written" in str(err.value)
    assert bound.describe() in str(err.value)
    assert not target.exists() and not list(tmp_path.iterdir())


def test_save_refuses_friction_water_log_and_replay_values(tmp_path: Path) -> None:
    assert RICH.log is not None and RICH.replay is not None
    log = dataclasses.replace(RICH.log, speed=np.where(RICH.log.valid, 1e9, 0.0))
    replay = dataclasses.replace(RICH.replay, width_m=np.full_like(RICH.replay.width_m, 7.0))
    cases = {
        "friction": dataclasses.replace(RICH, friction=1e300),
        "water_film_mm": dataclasses.replace(RICH, water_film_mm=math.inf),
        "log.agents[0].speed[0]": dataclasses.replace(RICH, log=log),
        "replay.objects[0].width_m": dataclasses.replace(RICH, replay=replay),
        "params": dataclasses.replace(RICH, params={"origin_xy": [math.nan, 0.0]}),
    }
    for field, scene in cases.items():
        with pytest.raises(SceneFormatError, match=rf"not written\): field '{re.escape(field)}'"):
            save_scene(scene, tmp_path / "x.json")
    assert not list(tmp_path.iterdir())


def test_a_scene_without_agents_is_neither_saved_nor_loaded(tmp_path: Path) -> None:
    """The tools cannot run a scene with nothing to drive, so neither side lets one through."""
    nobody = straight_scene([])
    with pytest.raises(SceneFormatError, match="field 'agents': expected a non-empty list"):
        save_scene(nobody, tmp_path / "nobody.json")
    file = tmp_path / "nobody.json"
    file.write_text(json.dumps({**RICH_DICT, "agents": [], "log": {"dt_s": 0.1, "agents": []}}))
    with pytest.raises(SceneFormatError, match=r"nobody\.json: field 'agents'"):
        load_scene(file)


def _assert_within_bounds(scene: Scene, tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    save_scene(scene, path)  # raises if anything is out of range
    assert load_scene(path).num_agents == scene.num_agents


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_every_procedural_scene_is_plausible(kind: str, tmp_path: Path) -> None:
    """Seeds across both splits and agent counts up to 32: the generators stay far inside the ranges."""
    for seed in (0, 1, 7, 999_999, 1_000_000, 1_500_000):
        for agents in (1, 8, 32):
            _assert_within_bounds(make_procedural_scene(kind, seed, agents), tmp_path)


def test_fixture_and_converted_scenes_are_plausible(tmp_path: Path, road_scene: Scene) -> None:
    _assert_within_bounds(road_scene, tmp_path)
    _assert_within_bounds(RICH, tmp_path)
    for n in (1, 2, 5):
        _assert_within_bounds(scenario_to_scene(make_scenario(f"w{n}", n))[0], tmp_path)


def test_bounds_describe_their_range() -> None:
    assert pl.LENGTH.describe() == "a length in (0, 30] m"
    assert pl.COORDINATE.describe() == "a coordinate in [-1e+06, 1e+06] m"
    assert pl.FRICTION.describe() == "a friction coefficient in (0, 2]"
    assert pl.LENGTH.contains(30.0) and not pl.LENGTH.contains(0.0) and pl.WATER_FILM.contains(0.0)
    assert not any(b.contains(math.nan) for b in FIELDS.values())
