"""Per-scene road data (sample points, drivable grid, spatial-index cells), built once per scene.

Building a real map's drivable grid and index takes a fraction of a second; a pool of thousands of
scenes would spend minutes on it at every start. :func:`scene_roads` therefore keeps each scene's
result in a content-addressed cache: the key is a SHA-256 of the road graph's arrays, the build
parameters and :data:`CACHE_VERSION` (bumped whenever what is built changes), so an edited scene or a
new parameter never reads a stale entry. Entries are ``.npz`` files written atomically (temporary
file, then rename) and read with ``allow_pickle=False``; an unreadable or inconsistent entry is
rebuilt (and rewritten) with a warning, never trusted.

The cache lives in ``$SCENEFACTORY_CACHE_DIR`` (default ``~/.cache/scenefactory``), under
``roads/``; set ``SCENEFACTORY_CACHE_DIR=off`` to build without it. ``convert`` fills it for the
scenes it writes (with the default observation settings), so the first training run reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

from scenefactory.errors import SceneFormatError
from scenefactory.scenes.roadgraph import RoadGraph
from scenefactory.scenes.scene import Scene
from scenefactory.tasks.driving.config import ObservationConfig
from scenefactory.tasks.driving.drivable import DrivableGrid, build_drivable_grid
from scenefactory.tasks.driving.road_index import (
    DEFAULT_CELL_M,
    SceneCells,
    build_scene_cells,
    roadgraph_points,
)

CACHE_VERSION = 2
"""Bumped whenever road points, drivable grids or index cells are built differently (2: the index
cells' search radii of the final index; entries written by earlier code held other radii).
``tests/tasks/test_road_cache.py`` pins a digest of the built data per version, so a change to what is
built fails there until this is bumped."""

CACHE_ENV = "SCENEFACTORY_CACHE_DIR"


@dataclass(frozen=True)
class RoadParams:
    """What a scene's road data depends on besides its road graph (defaults: the task's defaults)."""

    spacing_m: float = ObservationConfig.road_point_spacing_m
    num_road_points: int = ObservationConfig.num_road_points
    range_m: float = ObservationConfig.road_point_range_m
    cell_m: float = DEFAULT_CELL_M


@dataclass(frozen=True)
class SceneRoads:
    """One scene's road data: sample points ``xy`` (P, 2) with features ``feat`` (P, 5), its drivable
    grid and its index cells."""

    xy: np.ndarray
    feat: np.ndarray
    grid: DrivableGrid
    cells: SceneCells


def cache_dir() -> Path | None:
    """The cache folder (``None`` when switched off)."""
    value = os.environ.get(CACHE_ENV, "")
    if value.lower() == "off":
        return None
    root = Path(value) if value else Path.home() / ".cache" / "scenefactory"
    return root / "roads"


def cache_key(roadgraph: RoadGraph, params: RoadParams) -> str:
    """SHA-256 of the road graph's arrays, ``params`` and :data:`CACHE_VERSION`."""
    h = hashlib.sha256()
    h.update(json.dumps({"version": CACHE_VERSION, **vars(params)}, sort_keys=True).encode())
    for f in fields(roadgraph):
        a = np.ascontiguousarray(getattr(roadgraph, f.name))
        h.update(f"{f.name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def build_scene_roads(roadgraph: RoadGraph, params: RoadParams) -> SceneRoads:
    """Build one scene's road data (no cache)."""
    xy, feat = roadgraph_points(roadgraph, params.spacing_m)
    grid = build_drivable_grid(roadgraph)
    cells = build_scene_cells(xy, grid, params.num_road_points, params.range_m, params.cell_m)
    return SceneRoads(xy=xy, feat=feat, grid=grid, cells=cells)


def scene_roads(roadgraph: RoadGraph, params: RoadParams, where: str = "") -> SceneRoads:
    """One scene's road data from the cache, or built (and cached). ``where`` names the scene in warnings."""
    try:
        return _cached_roads(roadgraph, params, where)
    except SceneFormatError as exc:  # a map too large for its grid: name the scene
        raise SceneFormatError(f"{where or 'a scene'}: {exc}") from None


def _cached_roads(roadgraph: RoadGraph, params: RoadParams, where: str) -> SceneRoads:
    folder = cache_dir()
    if folder is None:
        return build_scene_roads(roadgraph, params)
    key = cache_key(roadgraph, params)
    path = folder / key[:2] / f"{key}.npz"
    if path.exists():
        try:
            return _read(path)
        except (OSError, ValueError, TypeError) as exc:
            warnings.warn(
                f"road cache entry {path} for {where or 'a scene'} is unreadable ({exc}); rebuilding it",
                stacklevel=2,
            )
    roads = build_scene_roads(roadgraph, params)
    try:
        _write(path, roads)
    except OSError as exc:
        if folder not in _UNWRITABLE:  # once per folder: a read-only cache would warn for every scene
            _UNWRITABLE.add(folder)
            warnings.warn(
                f"could not write the road cache entry {path}: {exc}; building without caching"
                f" (set {CACHE_ENV} to a writable folder, or to 'off')",
                stacklevel=2,
            )
    return roads


_UNWRITABLE: set[Path] = set()
"""Cache folders a write failed in during this process (warned about once)."""


def _write(path: Path, roads: SceneRoads) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(
                f,
                xy=roads.xy,
                feat=roads.feat,
                grid_origin=roads.grid.origin_xy,
                grid_resolution=np.array(roads.grid.resolution_m),
                grid_values=roads.grid.values,
                cells_origin=roads.cells.origin_xy,
                cells_shape=np.array(roads.cells.shape_rc, dtype=np.int64),
                cells_side=np.array(roads.cells.cell_m),
                cells_order=roads.cells.order,
                cells_counts=roads.cells.counts,
                cells_radius=roads.cells.radius,
            )
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_DTYPES = {
    "xy": np.float64,
    "feat": np.float64,
    "grid_origin": np.float64,
    "grid_resolution": np.float64,
    "grid_values": np.float32,
    "cells_origin": np.float64,
    "cells_shape": np.int64,
    "cells_side": np.float64,
    "cells_order": np.int64,
    "cells_counts": np.int64,
    "cells_radius": np.int16,
}
"""Every array an entry holds and its dtype, as :func:`build_scene_roads` makes them; an entry with
another dtype, a missing array or a non-finite number is not one this code wrote (or it was damaged)."""


def _read(path: Path) -> SceneRoads:
    """An entry, checked whole (dtypes, shapes, finite values, consistent counts; the zip's CRC-32
    covers the bytes); ``ValueError`` naming what is wrong otherwise, so the caller rebuilds it.
    ``OSError`` when the file cannot be opened."""
    with open(path, "rb") as f:
        try:
            with np.load(f, allow_pickle=False) as z:
                arrays = {k: z[k] for k in _DTYPES}
        except Exception as exc:
            raise ValueError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    for key, dtype in _DTYPES.items():
        a = arrays[key]
        if a.dtype != dtype:
            raise ValueError(f"'{key}' is {a.dtype}, expected {np.dtype(dtype)}")
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise ValueError(f"'{key}' holds NaN or infinite values")
    xy, feat, order, counts, radius = (
        arrays[k] for k in ("xy", "feat", "cells_order", "cells_counts", "cells_radius")
    )
    shape = tuple(int(v) for v in arrays["cells_shape"].reshape(-1))
    scalars = [arrays[k].shape == () for k in ("grid_resolution", "cells_side")]
    ok = (
        all(scalars)
        and float(arrays["grid_resolution"]) > 0.0
        and float(arrays["cells_side"]) > 0.0
        and arrays["grid_origin"].shape == (2,)
        and arrays["cells_origin"].shape == (2,)
        and xy.ndim == 2
        and xy.shape[1] == 2
        and feat.ndim == 2
        and feat.shape[0] == xy.shape[0]
        and len(shape) == 2
        and min(shape) >= 1
        and counts.shape == (shape[0] * shape[1],)
        and radius.shape == counts.shape
        and int(counts.sum()) == len(xy)
        and order.shape == (len(xy),)
        and np.array_equal(np.sort(order), np.arange(len(xy)))
    )
    if not ok:
        raise ValueError("arrays of inconsistent shapes")
    grid = DrivableGrid(
        origin_xy=arrays["grid_origin"],
        resolution_m=float(arrays["grid_resolution"]),
        values=arrays["grid_values"],
    )
    cells = SceneCells(
        origin_xy=arrays["cells_origin"],
        shape_rc=(shape[0], shape[1]),
        cell_m=float(arrays["cells_side"]),
        order=order,
        counts=counts,
        radius=radius,
    )
    return SceneRoads(xy=xy, feat=feat, grid=grid, cells=cells)


def warm(scene: Scene) -> None:
    """Build and cache ``scene``'s road data for the default observation settings (``convert`` runs
    this in its workers for every scene it writes, one torch thread each: the parallelism is the
    workers'); nothing when the cache is off."""
    if cache_dir() is None:
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        scene_roads(scene.roadgraph, RoadParams(), f"scene '{scene.name}'")
    finally:
        torch.set_num_threads(threads)
