"""The per-scene road cache: same data as a fresh build, keyed on content, never trusting a bad entry."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from scenefactory.scenes.library import procedural_scenes
from scenefactory.tasks.driving import road_cache
from scenefactory.tasks.driving.road_cache import RoadParams, build_scene_roads, cache_key, scene_roads


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(road_cache.CACHE_ENV, str(tmp_path))
    return tmp_path / "roads"


def _same(a: road_cache.SceneRoads, b: road_cache.SceneRoads) -> None:
    np.testing.assert_array_equal(a.xy, b.xy)
    np.testing.assert_array_equal(a.feat, b.feat)
    np.testing.assert_array_equal(a.grid.values, b.grid.values)
    np.testing.assert_array_equal(a.grid.origin_xy, b.grid.origin_xy)
    np.testing.assert_array_equal(a.cells.order, b.cells.order)
    np.testing.assert_array_equal(a.cells.counts, b.cells.counts)
    np.testing.assert_array_equal(a.cells.radius, b.cells.radius)
    assert a.cells.shape_rc == b.cells.shape_rc


def test_cached_entry_equals_a_fresh_build(cache: Path) -> None:
    rg = procedural_scenes("train", 1, 2)[0].roadgraph
    params = RoadParams()
    first = scene_roads(rg, params)
    entries = list(cache.rglob("*.npz"))
    assert len(entries) == 1
    stamp = entries[0].stat().st_mtime_ns
    again = scene_roads(rg, params)
    assert entries[0].stat().st_mtime_ns == stamp  # read, not rebuilt
    _same(first, again)
    _same(again, build_scene_roads(rg, params))


def test_key_follows_content_and_parameters() -> None:
    a, b = (sc.roadgraph for sc in procedural_scenes("train", 2, 2))
    p = RoadParams()
    assert cache_key(a, p) == cache_key(a, RoadParams())
    assert cache_key(a, p) != cache_key(b, p)
    assert cache_key(a, p) != cache_key(a, replace(p, range_m=40.0))
    moved = replace(a, lane_xy=a.lane_xy + 0.01)
    assert cache_key(a, p) != cache_key(moved, p)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "wrong_arrays"])
def test_bad_entry_is_rebuilt_with_a_warning(cache: Path, damage: str) -> None:
    rg = procedural_scenes("train", 1, 2)[0].roadgraph
    params = RoadParams()
    good = scene_roads(rg, params)
    (entry,) = cache.rglob("*.npz")
    if damage == "truncate":
        entry.write_bytes(entry.read_bytes()[:100])
    elif damage == "garbage":
        entry.write_bytes(b"not an npz")
    else:
        np.savez(entry.open("wb"), xy=np.zeros((3, 2)))
    with pytest.warns(UserWarning, match="unreadable"):
        rebuilt = scene_roads(rg, params, "scene 'x'")
    _same(good, rebuilt)
    _same(good, scene_roads(rg, params))  # the rewritten entry reads back


def test_cache_can_be_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(road_cache.CACHE_ENV, "off")
    rg = procedural_scenes("train", 1, 2)[0].roadgraph
    scene_roads(rg, RoadParams())
    assert road_cache.cache_dir() is None
    assert not list(tmp_path.rglob("*.npz"))


def test_convert_fills_the_cache_that_training_reads(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `convert` builds each written scene's road data in its workers; loading the JSON files for a
    # pool then reads every entry (same key after the JSON round trip) and builds nothing.
    import torch

    from scenefactory.scenes.library import load_scene_dir
    from scenefactory.scenes.womd.batch import convert_files
    from scenefactory.scenes.womd.synthetic import write_corpus
    from scenefactory.tasks.driving.pool import build_pool

    shards = write_corpus(tmp_path / "in", 2, seed=3, road_points=(1000, 1200), vehicles=(2, 3), workers=1)
    summary = convert_files(shards, tmp_path / "out", prepare_scene=road_cache.warm)
    assert summary["converted"] == 2 and not summary["warnings"]
    assert len(list(cache.rglob("*.npz"))) == 2

    def no_build(*args: object) -> None:
        raise AssertionError("road data rebuilt although convert cached it")

    monkeypatch.setattr(road_cache, "build_scene_roads", no_build)
    pool = build_pool(load_scene_dir(tmp_path / "out" / "json"), 4, 3.0, torch.device("cpu"))
    assert pool.num_scenes == 2


BUILT_DIGESTS = {
    2: {
        "straight-0": "6c1d1a347701ffd8",
        "intersection-2": "2e23ce381184d26d",
        "roundabout-4": "4073206ff7625d0a",
    },
}
"""SHA-256 (first 16 hex digits) of what ``build_scene_roads`` makes of three procedural scenes, per
``CACHE_VERSION``. Entries in a user's cache are keyed on the version: if what is built changes while
the version stays, old entries would be read as if they were current (seen: entries written by
earlier code held other index radii, and training on them gave other numbers)."""


def _exact(a: np.ndarray) -> np.ndarray:
    """``a`` as bytes that mean the same on every machine: integers as they are, floats in units
    of 1e-4 (metres, radians; far below what the cache's users read). Raw float bytes differ in the
    last bit between CPUs (vectorized libm), which pinned nothing but the machine."""
    a = np.asarray(a)
    if np.issubdtype(a.dtype, np.floating):
        return np.ascontiguousarray(np.rint(a.astype(np.float64) * 1e4).astype(np.int64))
    return np.ascontiguousarray(a.astype(np.int64))


def test_what_is_built_is_pinned_to_the_cache_version() -> None:
    assert road_cache.CACHE_VERSION in BUILT_DIGESTS, (
        f"CACHE_VERSION {road_cache.CACHE_VERSION} has no pinned digests: add them to BUILT_DIGESTS"
    )
    wanted = BUILT_DIGESTS[road_cache.CACHE_VERSION]
    for scene in procedural_scenes("train", 6, 4):
        if scene.name not in wanted:
            continue
        r = build_scene_roads(scene.roadgraph, RoadParams())
        h = hashlib.sha256()
        for a in (
            r.xy,
            r.feat,
            r.grid.origin_xy,
            r.grid.values,
            r.cells.origin_xy,
            r.cells.order,
            r.cells.counts,
            r.cells.radius,
        ):
            h.update(_exact(a).tobytes())
        assert h.hexdigest()[:16] == wanted[scene.name], (
            f"road data of {scene.name} is built differently from what CACHE_VERSION "
            f"{road_cache.CACHE_VERSION} pinned: bump CACHE_VERSION (old cache entries would be read "
            "as current) and pin the new digests"
        )
