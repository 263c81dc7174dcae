"""Scene JSON: lossless round trips for every generator, and errors that name the file and the field."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scenefactory.errors import SceneFormatError, UserError
from scenefactory.scenes.library import GENERATOR_KINDS, load_scene_dir
from scenefactory.scenes.routes import make_procedural_scene
from scenefactory.scenes.scene import Scene
from scenefactory.scenes.scene_json import load_scene, save_scene, scene_to_dict

METADATA = ("name", "surface", "friction", "generator", "seed", "params")


def assert_scenes_equal(a: Scene, b: Scene) -> None:
    """Every array field bit-identical (shape, dtype and values) and equal metadata."""
    for obj_a, obj_b in ((a.roadgraph, b.roadgraph), (a, b)):
        for f in dataclasses.fields(obj_a):
            va, vb = getattr(obj_a, f.name), getattr(obj_b, f.name)
            if isinstance(va, np.ndarray):
                assert va.dtype == vb.dtype and np.array_equal(va, vb), f.name
    for name in METADATA:
        assert getattr(a, name) == getattr(b, name), name


@pytest.fixture(scope="module")
def scene_dict() -> dict[str, Any]:
    return scene_to_dict(make_procedural_scene("t_junction", 3, 4))


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_round_trip_is_exact(kind: str, tmp_path: Path) -> None:
    scene = make_procedural_scene(kind, 11, 16)
    path = tmp_path / f"{kind}.json"
    save_scene(scene, path)
    loaded = load_scene(path)
    assert_scenes_equal(scene, loaded)
    save_scene(loaded, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_text() == path.read_text()


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value

    return edit


def _delete(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        for key in path[:-1]:
            d = d[key]
        del d[path[-1]]

    return edit


LANE0 = ("roadgraph", "lanes", 0)
MALFORMED = {
    "wrong version": (_set(("version",), 99), "version"),
    "wrong format": (_set(("format",), "other"), "format"),
    "missing friction": (_delete(("friction",)), "friction"),
    "missing lane exit": (_delete((*LANE0, "exit")), "roadgraph.lanes[0].exit"),
    "missing agent goal": (_delete(("agents", 0, "goal_s_m")), "agents[0].goal_s_m"),
    "negative width": (_set((*LANE0, "width_m", 0), -3.5), "roadgraph.lanes[0].width_m"),
    "exit out of range": (_set((*LANE0, "exit"), [10_000]), "roadgraph.lanes[0].exit"),
    "negative entry": (_set((*LANE0, "entry"), [-1]), "roadgraph.lanes[0].entry"),
    "non-numeric x": (_set((*LANE0, "xy", 1, 0), "east"), "roadgraph.lanes[0].xy[1][0]"),
    "null route y": (_set(("agents", 0, "route_xy", 2, 1), None), "agents[0].route_xy[2][1]"),
    "nan friction": (_set(("friction",), "NaN"), "friction"),
    "zero vehicle width": (_set(("agents", 0, "width_m"), 0.0), "agents[0].width_m"),
    "one-point lane": (
        lambda d: d["roadgraph"]["lanes"][0].update(xy=[[0.0, 0.0]], width_m=[3.5]),
        "lanes[0].xy",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_file_names_file_and_field(case: str, scene_dict: dict[str, Any], tmp_path: Path) -> None:
    edit, field = MALFORMED[case]
    data = copy.deepcopy(scene_dict)
    edit(data)
    path = tmp_path / "bad_scene.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SceneFormatError) as err:
        load_scene(path)
    assert str(path) in str(err.value)
    assert field in str(err.value)


def test_not_json_names_file(tmp_path: Path) -> None:
    path = tmp_path / "garbage.json"
    path.write_text('{"format": "scenefactory.scene", ')
    with pytest.raises(SceneFormatError, match=r"garbage\.json"):
        load_scene(path)


def test_load_scene_dir(tmp_path: Path) -> None:
    scenes = [make_procedural_scene(kind, 2, 3) for kind in ("merge", "curved", "roundabout")]
    for i, scene in enumerate(scenes):
        save_scene(scene, tmp_path / f"{i:02d}_{scene.name}.json")
    (tmp_path / "notes.txt").write_text("not a scene")
    loaded = load_scene_dir(tmp_path)
    assert [s.name for s in loaded] == ["merge-2", "curved-2", "roundabout-2"]
    for a, b in zip(scenes, loaded, strict=True):
        assert_scenes_equal(a, b)


def test_load_scene_dir_reads_only_the_first_limit(tmp_path: Path) -> None:
    # `eval --episodes N` on a folder of thousands of scenes reads N files, not all of them: a
    # broken file after the first N is never opened.
    scene = make_procedural_scene("curved", 2, 3)
    save_scene(scene, tmp_path / "00_first.json")
    (tmp_path / "01_broken.json").write_text("{ not json")
    (loaded,) = load_scene_dir(tmp_path, limit=1)
    assert_scenes_equal(scene, loaded)
    with pytest.raises(SceneFormatError):
        load_scene_dir(tmp_path)


def test_load_scene_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="missing_dir"):
        load_scene_dir(tmp_path / "missing_dir")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"no \*\.json"):
        load_scene_dir(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.json").write_text("[]")
    with pytest.raises(SceneFormatError, match=r"x\.json"):
        load_scene_dir(tmp_path / "bad")
