"""Scene plausibility of the whole (issue 49, item 2): what each number's bound cannot see.

Each case of the issue's probe, written as a scene file a user could hold, gives one line naming
the file and the field (refused: ``plausibility.REFUSED``) or loads with a stated warning and a count
(``plausibility.WARNED``: real WOMD data has these). The extent is refused before any grid is built;
a 100,000-deep JSON value is one line, not a RecursionError. Hypothesis then throws random values
and nesting at a valid scene file: ``load_scene`` returns a scene or raises ``SceneFormatError``,
never anything else.
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenefactory.cli import main
from scenefactory.engines import EngineSpec
from scenefactory.errors import SceneFormatError
from scenefactory.evaluation.human import (
    agent_counts,
    figures_markdown,
    human_baseline,
    warning_counts,
    write_figures,
)
from scenefactory.scenes import plausibility as pl
from scenefactory.scenes.roadgraph import RoadGraph
from scenefactory.scenes.scene_checks import json_depth, scene_warnings, value_depth
from scenefactory.scenes.scene_json import load_scene, save_scene, scene_to_dict
from scenefactory.scenes.womd.convert import scenario_to_scene
from scenefactory.scenes.womd.tfrecord import write_records
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.drivable import MAX_GRID_NODES, build_drivable_grid
from womd_crossroads import crossroads_scenario


@pytest.fixture(scope="module")
def real() -> dict[str, Any]:
    """A converted WOMD-format scene (crossroads: 4 controlled agents with logs, replayed objects)."""
    scene, _ = scenario_to_scene(crossroads_scenario("crossroads"))
    return scene_to_dict(scene)


def _write(tmp_path: Path, data: dict[str, Any], name: str = "scene.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _refused(path: Path, *parts: str) -> str:
    with pytest.raises(SceneFormatError) as info:
        load_scene(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    for part in parts:
        assert part in msg, msg
    return msg


def test_the_real_scene_loads_without_warnings(real: dict[str, Any], tmp_path: Path, capsys: Any) -> None:
    scene = load_scene(_write(tmp_path, real))
    assert not any(scene_warnings(scene).values())
    assert "warning" not in capsys.readouterr().err


# ------------------------------------------------------------------------------------ refused


def test_lanes_moved_far_away_are_refused_before_any_grid(real: dict[str, Any], tmp_path: Path) -> None:
    d = copy.deepcopy(real)
    for lane in d["roadgraph"]["lanes"]:
        lane["xy"] = [[x + 9e5, y + 9e5] for x, y in lane["xy"]]
    start = time.perf_counter()
    _refused(_write(tmp_path, d), "the scene spans", "expected at most 4000 m a side", "roadgraph x [")
    assert time.perf_counter() - start < 5.0  # the probe's run died after 59 s asking for 101 GB


def test_the_grid_is_bounded_before_it_is_allocated() -> None:
    lanes = [np.array([[0.0, 0.0], [10.0, 0.0]]), np.array([[9e5, 9e5], [9e5 + 10, 9e5]])]
    rg = RoadGraph.from_lists(lanes, [np.full(2, 3.5)] * 2, [[], []], [[], []], [], [], [], [])
    with pytest.raises(
        SceneFormatError, match=r"drivable grid of 8\.1e\+11 nodes at 1 m .* expected at most"
    ):
        build_drivable_grid(rg)
    assert int((pl.MAX_SCENE_EXTENT_M + 41) ** 2) == MAX_GRID_NODES


def test_a_deeply_nested_value_is_one_line(real: dict[str, Any], tmp_path: Path) -> None:
    text = json.dumps(real).replace(
        '"params": {', '"params": {"junk": ' + "[" * 100_000 + "]" * 100_000 + ", ", 1
    )
    path = tmp_path / "deep.json"
    path.write_text(text)
    _refused(path, "nested 100002 deep", f"at most {pl.MAX_JSON_DEPTH}")
    d = copy.deepcopy(real)
    nested: Any = 0
    for _ in range(pl.MAX_JSON_DEPTH):
        nested = [nested]
    d["params"]["junk"] = nested  # parses, but deeper than a scene's free-form field may be
    _refused(_write(tmp_path, d), "nested")


@pytest.mark.parametrize(
    ("case", "field", "expected"),
    [
        ("lava", "'surface'", "expected one of asphalt"),
        ("time_index", "'params.current_time_index'", "[0, 9999], got 100000"),
        ("negative_speed", "'agents[1].spawn_speed_mps'", "a spawn speed in [0, 100] m/s, got -50"),
        ("duplicate", "'agents'", "agents [0, 4] are the same agent"),
        ("long_log", "'replay'", "expected at most 10000"),
    ],
)
def test_refused_cases_name_file_and_field(
    real: dict[str, Any], tmp_path: Path, case: str, field: str, expected: str
) -> None:
    d = copy.deepcopy(real)
    if case == "lava":
        d["surface"] = "lava"
    elif case == "time_index":
        d["params"]["current_time_index"] = 100000
    elif case == "negative_speed":
        d["agents"][1]["spawn_speed_mps"] = -50
    elif case == "duplicate":
        d["agents"].append(copy.deepcopy(d["agents"][0]))
        d["log"]["agents"].append(copy.deepcopy(d["log"]["agents"][0]))
    elif case == "long_log":
        n = pl.MAX_LOG_STEPS + 1
        d["replay"]["objects"] = [_parked([[500.0, 500.0]] * n)]
    _refused(_write(tmp_path, d), field, expected)


# ------------------------------------------------------------------------------------ warned


def _parked(xy: list[list[float]]) -> dict[str, Any]:
    """A replayed vehicle standing at ``xy`` (one point per step)."""
    n = len(xy)
    return {"xy": xy, "yaw": [0.0] * n, "vel_xy": [[0.0, 0.0]] * n, "valid": [True] * n,
            "length_m": 4.5, "width_m": 2.0, "kind": 1}  # fmt: skip


def _overlapping(real: dict[str, Any]) -> dict[str, Any]:
    """Agent 1 spawned (and logged) half a metre beside agent 0."""
    d = copy.deepcopy(real)
    a0, a1 = d["agents"][0], d["agents"][1]
    a1["spawn_pose"] = [a0["spawn_pose"][0] + 0.5, a0["spawn_pose"][1], a0["spawn_pose"][2]]
    a1["route_xy"] = [[x + 0.5, y] for x, y in a0["route_xy"]]
    a1["goal_xy"] = [a0["goal_xy"][0] + 0.5, a0["goal_xy"][1]]
    a1["goal_s_m"] = a0["goal_s_m"]
    log = d["log"]["agents"]
    log[1] = copy.deepcopy(log[0])
    log[1]["xy"] = [[x + 0.5, y] for x, y in log[0]["xy"]]
    return d


def test_warned_cases_load_with_a_line_and_a_count(real: dict[str, Any], tmp_path: Path, capsys: Any) -> None:
    cases = {
        "overlapping_spawns": (_overlapping(real), 2),
    }
    d = copy.deepcopy(real)
    steps = d["log"]["agents"][2]["xy"]
    d["replay"]["objects"] = [_parked([steps[40]] * len(steps)), _parked([[500.0, 500.0]] * len(steps))]
    cases["objects_on_agent_path"] = (d, 1)  # a car parked on agent 2's logged path, one far away
    d = copy.deepcopy(real)
    d["roadgraph"]["lanes"].append(
        {"xy": [[5.0, 5.0], [5.0, 5.0]], "width_m": [3.5, 3.5], "entry": [], "exit": []}
    )
    cases["zero_length_lanes"] = (d, 1)
    d = copy.deepcopy(real)
    d["roadgraph"]["lanes"][0]["exit"].append(0)
    cases["self_successor_lanes"] = (d, 1)
    for key, (data, n) in cases.items():
        path = _write(tmp_path, data, f"{key}.json")
        scene = load_scene(path)
        counts = scene_warnings(scene)
        assert counts[key] == n and sum(counts.values()) == n, (key, counts)
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{path}: kept, with {n} {key}" in err, err


def test_a_closed_loop_lane_may_be_its_own_successor(real: dict[str, Any], tmp_path: Path) -> None:
    d = copy.deepcopy(real)
    ring = [[50 + 10 * math.cos(a), 50 + 10 * math.sin(a)] for a in np.linspace(0, 2 * math.pi, 33)]
    me = len(d["roadgraph"]["lanes"])
    d["roadgraph"]["lanes"].append({"xy": ring, "width_m": [3.5] * 33, "entry": [me], "exit": [me]})
    assert not any(scene_warnings(load_scene(_write(tmp_path, d))).values())


def test_the_human_baseline_of_overlapping_spawns_is_flagged(real: dict[str, Any], tmp_path: Path) -> None:
    """The logged drivers of a scene whose agent 1 spawns on agent 0 collide; the human baseline's
    metrics count the overlap beside the figures and metrics.md says those collisions are the data's
    (``eval drive --policy expert`` writes both from these functions; 1 s episodes: the collision is
    at the first step)."""
    scene = load_scene(_write(tmp_path, _overlapping(real)))
    task = DrivingTaskConfig(num_worlds=1, agents_per_world=4, episode_length_s=1.0)
    metrics = human_baseline(task, [scene], EngineSpec(), num_worlds=1)
    assert metrics["collision_rate"] >= 0.5  # agents 0 and 1 of 4
    assert metrics["scene_warnings"]["overlapping_spawns"] == 2
    assert agent_counts([scene], 4)["scene_warnings"] == metrics["scene_warnings"]
    text = write_figures(tmp_path / "metrics.md", None, metrics, "kinematic").read_text()
    assert "**Data, not simulator:** 2 controlled agents overlap another at spawn" in text
    assert "Data, not simulator" not in figures_markdown(None, {"collision_rate": 0.5}, "x")


def test_warning_counts_sum_over_scenes(real: dict[str, Any], tmp_path: Path) -> None:
    a = load_scene(_write(tmp_path, _overlapping(real), "a.json"))
    b = load_scene(_write(tmp_path, real, "b.json"))
    counts = warning_counts([a, b, a])
    assert counts["overlapping_spawns"] == 4 and counts["scenes_with_warnings"] == 2


# ------------------------------------------------------------------------------------ many inputs

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet='[]{}"\\ab,:', max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_json_depth_of_the_text_is_the_value_s_depth(value: Any) -> None:
    assert json_depth(json.dumps(value)) == value_depth(value)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):
            out += _paths(v, (*prefix, i))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_value_anywhere_loads_or_is_a_scene_format_error(
    real: dict[str, Any], tmp_path: Path, data: st.DataObject
) -> None:
    d = copy.deepcopy(real)
    path = data.draw(st.sampled_from(_paths(d)[1:]))
    value = data.draw(JSON | st.integers(0, 200).map(lambda n: "[" * n + "]" * n))
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = json.loads(value) if isinstance(value, str) and value.startswith("[") else value
    file = tmp_path / "any.json"
    file.write_text(json.dumps(d))
    try:
        scene = load_scene(file)
    except SceneFormatError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(file))
        return
    save_scene(scene, tmp_path / "again.json")  # what loads saves


def test_convert_counts_what_it_keeps_in_summary_json(tmp_path: Path) -> None:
    """A WOMD record whose track 999 is track 0 labelled again half a metre over: converted (real data
    has such doubles), and ``summary.json`` counts the two overlapping agents."""
    doubled = crossroads_scenario("doubled")
    twin = doubled.tracks.add()
    twin.CopyFrom(doubled.tracks[0])
    twin.id = 999
    for state in twin.states:
        state.center_x += 0.5
    shard = tmp_path / "two.tfrecord"
    write_records(shard, [crossroads_scenario("plain").SerializeToString(), doubled.SerializeToString()])
    assert main(["--threads", "1", "convert", str(shard), "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["converted"] == 2
    assert summary["scene_warnings"] == {key: 2 if key == "overlapping_spawns" else 0 for key, _ in pl.WARNED}
