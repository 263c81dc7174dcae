"""Export a :class:`Scene` as a MuJoCo world (MJCF), and the road-surface mesh shared with the USD export.

Road surface mesh (:func:`road_surface_mesh`). Each lane's centre polyline p_k (k = 0 … n−1, the
valid points) is offset by ± w_k/2 along its unit left normal n_k, where n_k is the left
perpendicular of the mean of the unit directions of the segments meeting at p_k (the single
segment's direction at either end)::

    left_k = p_k + (w_k / 2) · n_k,   right_k = p_k − (w_k / 2) · n_k,   z = 0

Vertices are interleaved per lane (left_0, right_0, left_1, right_1, …: 2n per lane) and each
segment k → k+1 is the two triangles (right_k, right_k+1, left_k+1) and (right_k, left_k+1, left_k),
counter-clockwise seen from above (normals +z). Lanes are not merged: where lanes overlap
(junctions) their strips overlap too. Without mitre scaling a bend of angle θ between two segments
narrows the strip there by cos(θ/2) (< 0.2 % for the ≤ 7° steps of the procedural lanes).

MuJoCo world (:func:`scene_to_mjcf`). The option block, the light and the road plane are taken from
:func:`scenefactory.vehicles.car.world_mjcf`, so an exported world has the engine's exact solver
settings and road contact: the infinite plane ``ground`` with ``priority`` 1 whose friction, the
scene's μ, governs every tyre contact. On top of it, visual only (``contype``/``conaffinity`` 0):
the lane-footprint mesh ``road_surface`` lifted by :data:`ROAD_MESH_Z_M`, and the road lines and
edges as capsules. Each valid controlled agent is a :func:`~scenefactory.vehicles.car.car_mjcf` car
at its spawn pose at ride height, with contiguous prefixes ``car0_``, ``car1_`` … over the valid
agents (what :class:`~scenefactory.vehicles.car.CarIndex` expects), so car j is the j-th valid agent
slot; the slot is recorded as the custom numeric ``car{j}_agent``.
"""

from __future__ import annotations

import itertools
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scenefactory.errors import UserError
from scenefactory.io import atomic_write_text
from scenefactory.scenes.roadgraph import RoadGraph, RoadLineType
from scenefactory.scenes.scene import Scene
from scenefactory.vehicles.car import GROUND_GEOM, CarParams, car_mjcf, car_prefix, world_mjcf

ROAD_MESH_Z_M = 0.005
"""Height of the visual lane-footprint mesh above the ground plane [m] (avoids z-fighting)."""

MARKING_Z_M = 0.01
"""Height of the road-line and road-edge visuals above the ground plane [m]."""

LINE_RADIUS_M = 0.06
"""Radius of a road-line capsule [m] (a 12 cm painted line)."""

EDGE_RADIUS_M = 0.10
"""Radius of a road-edge capsule [m]."""

MARKING_TOLERANCE_M = 0.02
"""Largest distance [m] of a dropped road-line/edge point from the capsule chain drawn in its place."""

GROUND_MARGIN_M = 50.0
"""Drawn ground plane reaches this far past the road graph's bounds [m] (collision is unbounded)."""

MJCF_SUFFIXES = (".xml", ".mjcf")
"""File extensions :func:`save_mjcf` accepts."""

_MIN_SEGMENT_M = 1e-9


class SceneExportError(UserError):
    """A scene that cannot be exported (degenerate geometry) or a bad output path."""


# ------------------------------------------------------------------------------------ road surface mesh


@dataclass(frozen=True)
class RoadMesh:
    """The lane-footprint triangle mesh of a road graph (module docstring).

    - ``vertices_m`` (V, 3) float64: x, y, z [m], z = 0; V = 2 · Σ valid points per lane.
    - ``faces`` (F, 3) int64: vertex indices, counter-clockwise seen from above; F = Σ 2 · (n_i − 1).
    - ``lane_vertex_start`` (L + 1,) int64: lane i owns vertices ``lane_vertex_start[i] …
      lane_vertex_start[i + 1] − 1``.
    """

    vertices_m: np.ndarray
    faces: np.ndarray
    lane_vertex_start: np.ndarray

    @property
    def face_areas_m2(self) -> np.ndarray:
        """Area of each triangle [m²], (F,), signed: positive for counter-clockwise seen from above."""
        a, b, c = (self.vertices_m[self.faces[:, i], :2] for i in range(3))
        ab, ac = b - a, c - a
        return 0.5 * (ab[:, 0] * ac[:, 1] - ab[:, 1] * ac[:, 0])


def polyline_left_normals(xy: np.ndarray, what: str = "polyline") -> np.ndarray:
    """Unit left normals (n, 2) of a polyline ``xy`` (n ≥ 2, metres) at its points (module docstring).

    Raises :class:`SceneExportError` naming ``what`` and the point for a zero-length segment or a
    point where the polyline turns back on itself (no defined normal).
    """
    xy = np.asarray(xy, dtype=np.float64)
    if xy.ndim != 2 or xy.shape[1] != 2 or len(xy) < 2:
        raise SceneExportError(f"{what}: expected (n >= 2, 2) points, got shape {xy.shape}")
    d = np.diff(xy, axis=0)
    seg = np.linalg.norm(d, axis=1)
    short = np.flatnonzero(seg <= _MIN_SEGMENT_M)
    if short.size:
        k = int(short[0])
        raise SceneExportError(f"{what}: points {k} and {k + 1} coincide at {xy[k].tolist()} (no direction)")
    u = d / seg[:, None]
    t = np.empty_like(xy)
    t[0], t[-1] = u[0], u[-1]
    t[1:-1] = u[:-1] + u[1:]
    tn = np.linalg.norm(t, axis=1)
    back = np.flatnonzero(tn <= 1e-9)
    if back.size:
        k = int(back[0])
        raise SceneExportError(f"{what}: turns back on itself at point {k} {xy[k].tolist()} (no normal)")
    t /= tn[:, None]
    return np.stack([-t[:, 1], t[:, 0]], axis=1)


def lane_strip(xy: np.ndarray, width_m: np.ndarray, what: str = "lane") -> tuple[np.ndarray, np.ndarray]:
    """Vertices (2n, 3) [m] and faces (2(n − 1), 3) of one lane's footprint (module docstring).

    ``xy`` (n, 2) are the lane's valid centre points [m], ``width_m`` (n,) its full widths [m].
    Face indices are local to the strip (0 … 2n − 1).
    """
    n = len(xy)
    width_m = np.asarray(width_m, dtype=np.float64)
    if width_m.shape != (n,) or not np.all(width_m > 0.0):
        raise SceneExportError(f"{what}: need {n} positive widths, got {width_m.tolist()}")
    offset = 0.5 * width_m[:, None] * polyline_left_normals(xy, what)
    verts = np.zeros((2 * n, 3), dtype=np.float64)
    verts[0::2, :2] = xy + offset
    verts[1::2, :2] = xy - offset
    k = np.arange(n - 1, dtype=np.int64)
    left, right, left1, right1 = 2 * k, 2 * k + 1, 2 * k + 2, 2 * k + 3
    faces = np.empty((2 * (n - 1), 3), dtype=np.int64)
    faces[0::2] = np.stack([right, right1, left1], axis=1)
    faces[1::2] = np.stack([right, left1, left], axis=1)
    return verts, faces


def road_surface_mesh(roadgraph: RoadGraph) -> RoadMesh:
    """The lane-footprint mesh of every lane of ``roadgraph``, lanes in index order (module docstring)."""
    verts, faces, start = [], [], [0]
    for i in range(roadgraph.num_lanes):
        valid = roadgraph.lane_valid[i]
        v, f = lane_strip(roadgraph.lane_xy[i][valid], roadgraph.lane_width_m[i][valid], f"lane {i}")
        faces.append(f + start[-1])
        verts.append(v)
        start.append(start[-1] + len(v))
    return RoadMesh(
        vertices_m=np.concatenate(verts, axis=0),
        faces=np.concatenate(faces, axis=0),
        lane_vertex_start=np.asarray(start, dtype=np.int64),
    )


# ------------------------------------------------------------------------------------ road markings


def marking_points(xy: np.ndarray, tolerance_m: float = MARKING_TOLERANCE_M) -> np.ndarray:
    """The points of a road line/edge drawn as a capsule chain, (m, 2) [m], for the MJCF visuals.

    Consecutive repeated points are dropped, then greedily every point whose removal keeps all the
    dropped points within ``tolerance_m`` of the chain (a straight 200 m edge becomes one capsule).
    The first and last points are always kept; a single point stays a single point.
    """
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    if len(xy) == 0:
        return xy
    keep_dup = np.concatenate([[True], np.linalg.norm(np.diff(xy, axis=0), axis=1) > _MIN_SEGMENT_M])
    xy = xy[keep_dup]
    kept, i = [0], 0
    while i < len(xy) - 1:
        j = i + 1
        while (
            j + 1 < len(xy) and _max_distance_to_segment(xy[i + 1 : j + 1], xy[i], xy[j + 1]) <= tolerance_m
        ):
            j += 1
        kept.append(j)
        i = j
    return xy[kept]


def _max_distance_to_segment(points: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """Largest distance [m] of ``points`` (m, 2) from the segment a → b."""
    ab = b - a
    t = np.clip((points - a) @ ab / max(float(ab @ ab), _MIN_SEGMENT_M**2), 0.0, 1.0)
    return float(np.max(np.linalg.norm(points - (a + t[:, None] * ab), axis=1)))


def _line_class(code: int) -> str:
    """The MJCF default class drawing road-line type ``code`` (a WOMD ``RoadLine.Type``)."""
    name = RoadLineType(code).name if code in {t.value for t in RoadLineType} else ""
    if "YELLOW" in name:
        return "road_line_yellow"
    if "WHITE" in name:
        return "road_line_white"
    return "road_line_other"


_MARKING_CLASSES = {
    # class: (radius [m], rgba)
    "road_line_yellow": (LINE_RADIUS_M, "0.95 0.75 0.1 1"),
    "road_line_white": (LINE_RADIUS_M, "0.95 0.95 0.95 1"),
    "road_line_other": (LINE_RADIUS_M, "0.6 0.6 0.6 1"),
    "road_edge": (EDGE_RADIUS_M, "0.75 0.3 0.2 1"),
}


# ------------------------------------------------------------------------------------ MJCF world


def _f(*values: float) -> str:
    """Numbers for MJCF attributes, 9 significant digits (as in ``vehicles.car``)."""
    return " ".join(f"{v:.9g}" for v in values)


def _coords(values: np.ndarray | list[float]) -> str:
    """Mesh and marking coordinates [m], 7 significant digits (≤ 1 mm up to 10 km from the origin)."""
    return " ".join(f"{v:.7g}" for v in np.asarray(values, dtype=np.float64).ravel())


def _comment_text(text: str) -> str:
    """``text`` made safe for an XML comment (no ``--``)."""
    while "--" in text:
        text = text.replace("--", "- -")
    return f" {text} "


def _engine_world(
    car: CarParams, friction: float, timestep_s: float, extent_m: float
) -> dict[str, ET.Element]:
    """compiler, option, visual, light and ground elements of :func:`world_mjcf` (its one car dropped).

    Drawing only differs: the ground is greenish (off-road) and the light casts no shadows.

    The ground's friction is rewritten with the exact float (``world_mjcf`` writes 9 digits), so
    ``geom_friction[ground, 0]`` equals ``friction``.
    """
    ref = ET.fromstring(world_mjcf(1, car, friction=friction, timestep_s=timestep_s, extent_m=extent_m))
    found = {
        "compiler": ref.find("compiler"),
        "option": ref.find("option"),
        "visual": ref.find("visual"),
        "light": ref.find("worldbody/light"),
        "ground": ref.find(f"worldbody/geom[@name='{GROUND_GEOM}']"),
    }
    missing = [k for k, v in found.items() if v is None]
    if missing:
        raise RuntimeError(
            f"vehicles.car.world_mjcf no longer has {missing}: update export_mjcf._engine_world"
        )
    out = {k: v for k, v in found.items() if v is not None}
    out["ground"].set("friction", f"{float(friction)!r} 0 0")
    out["ground"].set("rgba", "0.32 0.4 0.3 1")  # off-road: greenish, the visual road mesh is grey
    # Overlapping coplanar lane strips (junctions) shadow each other in speckles ("shadow acne").
    out["light"].set("castshadow", "false")
    return out


def _defaults() -> ET.Element:
    """Default classes of the visual-only geoms (no collision, no mass)."""
    default = ET.Element("default")
    visual = {"contype": "0", "conaffinity": "0", "group": "1", "mass": "0"}
    road = ET.SubElement(default, "default", {"class": "road_surface"})
    ET.SubElement(road, "geom", {"type": "mesh", "rgba": "0.22 0.22 0.24 1", **visual})
    for cls, (radius, rgba) in _MARKING_CLASSES.items():
        sub = ET.SubElement(default, "default", {"class": cls})
        ET.SubElement(sub, "geom", {"type": "capsule", "size": _f(radius), "rgba": rgba, **visual})
    return default


def _marking_geoms(worldbody: ET.Element, polylines: list[np.ndarray], classes: list[str]) -> None:
    """Capsules (spheres for single points) along each road line/edge, ``MARKING_Z_M`` above the road."""
    for xy, cls in zip(polylines, classes, strict=True):
        pts = marking_points(xy)
        if len(pts) == 1:
            radius = _MARKING_CLASSES[cls][0]
            attrs = {
                "class": cls,
                "type": "sphere",
                "size": _f(radius),
                "pos": _coords([*pts[0], MARKING_Z_M]),
            }
            ET.SubElement(worldbody, "geom", attrs)
        for a, b in itertools.pairwise(pts):
            fromto = _coords([a[0], a[1], MARKING_Z_M, b[0], b[1], MARKING_Z_M])
            ET.SubElement(worldbody, "geom", {"class": cls, "fromto": fromto})


def _scene_description(scene: Scene) -> str:
    """One line naming the scene and its road condition, for the MJCF comment."""
    return (
        f"scenefactory scene '{scene.name}': generator '{scene.generator}', seed {scene.seed}, "
        f"surface {scene.surface}, water film {float(scene.water_film_mm)!r} mm, "
        f"friction {float(scene.friction)!r}, "
        f"{scene.num_agents} controlled agents (cars car0_ … in valid-agent order)"
    )


def scene_to_mjcf(scene: Scene, car: CarParams | None = None, timestep_s: float = 1.0 / 120.0) -> str:
    """A MuJoCo world of ``scene`` as an MJCF string (module docstring for its contents).

    - ``car``: parameters of every car (default :class:`CarParams`). Like the MuJoCo engine, all
      cars use these; the scene's per-agent ``length_m``/``width_m`` are not applied to the model.
    - ``timestep_s``: physics step [s], passed to :func:`world_mjcf` (its limits apply).

    The model is named ``scenefactory:<scene name>``; a comment and ``<custom>`` fields carry the
    scene's name, generator, seed, surface, water film [mm] and friction (texts ``scene_name``,
    ``scene_generator``, ``scene_surface``, absent when empty; numerics ``scene_seed``,
    ``scene_water_film_mm``, ``scene_friction``), and per car ``car{j}_agent`` (agent slot),
    ``car{j}_spawn_speed_mps`` [m/s] and ``car{j}_goal_xy`` [m]. Cars start at rest (spawn speeds
    are recorded, not applied).
    """
    car = car or CarParams()
    xmin, ymin, xmax, ymax = scene.roadgraph.bounds()
    extent = max(abs(xmin), abs(ymin), abs(xmax), abs(ymax)) + GROUND_MARGIN_M
    engine = _engine_world(car, scene.friction, timestep_s, extent)

    root = ET.Element("mujoco", {"model": f"scenefactory:{scene.name}"})
    root.append(ET.Comment(_comment_text(_scene_description(scene))))
    for key in ("compiler", "option", "visual"):
        root.append(engine[key])
    root.append(_defaults())

    mesh = road_surface_mesh(scene.roadgraph)
    asset = ET.SubElement(root, "asset")
    ET.SubElement(
        asset,
        "mesh",
        {
            "name": "road_surface",
            "inertia": "shell",  # a flat mesh has no volume; it is visual only anyway
            "vertex": _coords(mesh.vertices_m),
            "face": " ".join(str(int(i)) for i in mesh.faces.ravel()),
        },
    )

    worldbody = ET.SubElement(root, "worldbody")
    worldbody.append(engine["light"])
    worldbody.append(engine["ground"])
    ET.SubElement(
        worldbody,
        "geom",
        {
            "name": "road_surface",
            "class": "road_surface",
            "mesh": "road_surface",
            "pos": _f(0, 0, ROAD_MESH_Z_M),
        },
    )
    rg = scene.roadgraph
    _marking_geoms(worldbody, rg.lines(), [_line_class(int(t)) for t in rg.line_type])
    _marking_geoms(worldbody, rg.edges(), ["road_edge"] * len(rg.edge_type))

    actuator = ET.Element("actuator")
    sensor = ET.Element("sensor")
    sections = {"worldbody": worldbody, "actuator": actuator, "sensor": sensor}
    custom = ET.Element("custom")
    for key, value in (("name", scene.name), ("generator", scene.generator), ("surface", scene.surface)):
        if value:  # MuJoCo rejects an empty text field: an empty value is left out
            ET.SubElement(custom, "text", {"name": f"scene_{key}", "data": value})
    for key, number in (
        ("seed", float(scene.seed)),
        ("water_film_mm", scene.water_film_mm),
        ("friction", scene.friction),
    ):
        ET.SubElement(custom, "numeric", {"name": f"scene_{key}", "data": repr(float(number))})

    for j, slot in enumerate(np.flatnonzero(scene.agent_valid)):
        x, y, yaw = (float(v) for v in scene.spawn_pose[slot])
        prefix = car_prefix(j)
        fragment = ET.fromstring(f"<mujoco>{car_mjcf(car, prefix, (x, y), yaw)}</mujoco>")
        for section in fragment:
            if section.tag not in sections:
                raise RuntimeError(f"car_mjcf returned an unexpected <{section.tag}> section")
            sections[section.tag].extend(list(section))
        for key, data in (
            ("agent", [float(slot)]),
            ("spawn_speed_mps", [float(scene.spawn_speed_mps[slot])]),
            ("goal_xy", [float(v) for v in scene.goal_xy[slot]]),
        ):
            ET.SubElement(custom, "numeric", {"name": f"{prefix}{key}", "data": " ".join(map(repr, data))})
    for element in (actuator, sensor):
        if len(element):
            root.append(element)
    root.append(custom)
    ET.indent(root, space=" ")
    return ET.tostring(root, encoding="unicode") + "\n"


def check_output_path(path: str | os.PathLike[str], suffixes: tuple[str, ...], what: str) -> Path:
    """``path`` as a ``Path`` if it ends in one of ``suffixes`` and is not a folder, else a clear error."""
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise SceneExportError(
            f"cannot write {what} to {str(p)!r}: the file name must end in {', '.join(suffixes)}"
        )
    if p.is_dir():
        raise SceneExportError(f"cannot write {what} to {str(p)!r}: it is a folder")
    return p


def save_mjcf(scene: Scene, path: str | os.PathLike[str], car: CarParams | None = None) -> None:
    """Write :func:`scene_to_mjcf` of ``scene`` to ``path`` (``.xml`` or ``.mjcf``), atomically.

    Raises :class:`SceneExportError` for another extension or a folder.
    """
    p = check_output_path(path, MJCF_SUFFIXES, "an MJCF world")
    atomic_write_text(p, scene_to_mjcf(scene, car))
