"""Export a :class:`Scene` as a simulation-ready USD stage (Isaac Sim style: metres, Z up).

Layout of the stage (default prim ``/World``; metres, kilograms, Z up)::

    /World                          Xform; customData["scenefactory"] = scene metadata
      PhysicsScene                  UsdPhysics.Scene, gravity (0, 0, -1) × 9.81 m/s²
      Looks/RoadPhysicsMaterial     UsdShade.Material + UsdPhysics.MaterialAPI:
                                    staticFriction = dynamicFriction = scene.friction, restitution 0
      Road/Surface                  UsdGeom.Mesh of the lane footprints (z = 0, CCW from above),
                                    CollisionAPI + MeshCollisionAPI (approximation "none": the exact
                                    triangles, for a static collider), the material bound for purpose
                                    "physics"; ``scenefactory:laneVertexStart`` int[] (L + 1)
      Road/Lines/line_000 …         UsdGeom.BasisCurves (linear), one per road line
      Road/Edges/edge_000 …         UsdGeom.BasisCurves (linear), one per road edge
      Agents/agent_000 …            Xform per valid controlled agent (suffix = agent slot), with a
                                    child ``Body`` Cube of length × width × AGENT_HEIGHT_M

The lane mesh is :func:`scenefactory.scenes.export_mjcf.road_surface_mesh`, the same as in MJCF.
Points are ``point3f`` (float32: ≈ 8 µm resolution 100 m from the origin); exact values are kept
where a consumer needs them: agent translate and yaw ops are double precision, goal ``double3``.

Curves lie :data:`~scenefactory.scenes.export_mjcf.MARKING_Z_M` above the road (visible over the
mesh). Their WOMD type code is the custom int attribute ``scenefactory:type`` (``RoadLine.Type``
for lines, ``RoadEdge.Type`` for edges), with its enum name in ``scenefactory:typeName`` when the
code is known: the schema attribute ``type`` of a BasisCurves is its basis (linear/cubic), so the
code cannot be named plain ``type``. A polyline with a single point is written as a one-vertex
curve (carried for its data; renderers draw nothing for it).

An agent Xform's ops are ``translate`` (x_m, y_m, 0) and ``rotateZ`` (yaw, degrees), both double:
its origin is the spawn point on the road, x forward. Its custom attributes (all ``scenefactory:``):

- ``agentIndex`` int: the agent slot in the scene's padded arrays.
- ``spawnYawRad`` double [rad], ``spawnSpeedMps`` double [m/s].
- ``goalPosition`` double3 (x_m, y_m, 0); ``goalArcLengthM`` double [m] along the route.
- ``route`` float3[] (x_m, y_m, 0): the valid route polyline from the spawn.
- ``lengthM``, ``widthM`` double [m]: the footprint (also the Body cube's x, y scale).

The Body cube is a marker for the spawn footprint, not a vehicle: it has no physics APIs.

Scene metadata (name, generator, seed, surface, water_film_mm, friction, params_json, format and
version) is the dictionary ``scenefactory`` in both the root layer's customLayerData and ``/World``'s
customData: the prim's survives when this file is referenced into another stage, the layer's does not.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, UsdShade, Vt

from scenefactory.scenes.export_mjcf import (
    MARKING_Z_M,
    SceneExportError,
    check_output_path,
    road_surface_mesh,
)
from scenefactory.scenes.roadgraph import RoadEdgeType, RoadLineType
from scenefactory.scenes.scene import Scene
from scenefactory.vehicles.car import GRAVITY_MPS2

USD_SUFFIXES = (".usda", ".usd", ".usdc")
"""File extensions :func:`scene_to_usd` accepts: text (``.usda``) or binary crate (``.usd``, ``.usdc``)."""

USD_EXPORT_FORMAT = "scenefactory.usd_scene"
USD_EXPORT_VERSION = 1

AGENT_HEIGHT_M = 1.5
"""Height of an agent's marker cube [m] (the scene stores only length and width)."""

ROOT = "/World"
PHYSICS_SCENE = f"{ROOT}/PhysicsScene"
ROAD_MATERIAL = f"{ROOT}/Looks/RoadPhysicsMaterial"
ROAD_SURFACE = f"{ROOT}/Road/Surface"
ROAD_LINES = f"{ROOT}/Road/Lines"
ROAD_EDGES = f"{ROOT}/Road/Edges"
AGENTS = f"{ROOT}/Agents"

PHYSICS_PURPOSE = "physics"
"""Material purpose of the road's physics material binding (UsdPhysics convention)."""

_NS = "scenefactory:"


def scene_metadata(scene: Scene) -> dict[str, Any]:
    """The ``scenefactory`` metadata dictionary written into the stage (module docstring)."""
    return {
        "format": USD_EXPORT_FORMAT,
        "version": USD_EXPORT_VERSION,
        "name": scene.name,
        "generator": scene.generator,
        "seed": int(scene.seed),
        "surface": scene.surface,
        "water_film_mm": float(scene.water_film_mm),
        "friction": float(scene.friction),
        "params_json": json.dumps(scene.params, sort_keys=True),
    }


def _custom(prim: Usd.Prim, name: str, type_name: Sdf.ValueTypeName, value: Any, doc: str) -> None:
    """A custom attribute ``scenefactory:<name>`` on ``prim`` with ``value`` and a documentation string."""
    attr = prim.CreateAttribute(_NS + name, type_name, custom=True)
    attr.Set(value)
    attr.SetDocumentation(doc)


def _vec3f_array(xy: np.ndarray, z: float) -> Vt.Vec3fArray:
    """(n, 2) points [m] as a ``Vec3fArray`` at height ``z`` [m]."""
    pts = np.zeros((len(xy), 3), dtype=np.float32)
    pts[:, :2] = xy
    pts[:, 2] = z
    return Vt.Vec3fArray.FromNumpy(pts)


def _define_physics(stage: Usd.Stage, friction: float) -> UsdShade.Material:
    """The physics scene (gravity −z) and the road's physics material; returns the material."""
    physics = UsdPhysics.Scene.Define(stage, PHYSICS_SCENE)
    physics.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
    physics.CreateGravityMagnitudeAttr(GRAVITY_MPS2)
    UsdGeom.Scope.Define(stage, ROAD_MATERIAL.rsplit("/", 1)[0])
    material = UsdShade.Material.Define(stage, ROAD_MATERIAL)
    api = UsdPhysics.MaterialAPI.Apply(material.GetPrim())
    api.CreateStaticFrictionAttr(float(friction))
    api.CreateDynamicFrictionAttr(float(friction))
    api.CreateRestitutionAttr(0.0)
    return material


def _define_road_surface(stage: Usd.Stage, scene: Scene, material: UsdShade.Material) -> None:
    """The lane-footprint mesh, a static triangle-mesh collider bound to the road material."""
    road = road_surface_mesh(scene.roadgraph)
    mesh = UsdGeom.Mesh.Define(stage, ROAD_SURFACE)
    points = road.vertices_m.astype(np.float32)
    mesh.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(points))
    mesh.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(road.faces), 3, dtype=np.int32)))
    mesh.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(road.faces.astype(np.int32).ravel()))
    mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    mesh.CreateOrientationAttr(UsdGeom.Tokens.rightHanded)
    mesh.CreateExtentAttr(Vt.Vec3fArray.FromNumpy(np.stack([points.min(axis=0), points.max(axis=0)])))
    mesh.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(0.22, 0.22, 0.24)]))
    prim = mesh.GetPrim()
    UsdPhysics.CollisionAPI.Apply(prim)
    UsdPhysics.MeshCollisionAPI.Apply(prim).CreateApproximationAttr(UsdPhysics.Tokens.none)
    binding = UsdShade.MaterialBindingAPI.Apply(prim)
    binding.Bind(material, UsdShade.Tokens.weakerThanDescendants, PHYSICS_PURPOSE)
    _custom(
        prim,
        "laneVertexStart",
        Sdf.ValueTypeNames.IntArray,
        Vt.IntArray.FromNumpy(road.lane_vertex_start.astype(np.int32)),
        "lane i owns points laneVertexStart[i] .. laneVertexStart[i+1]-1 (2 per centre point: left, right)",
    )


def _define_curves(
    stage: Usd.Stage, parent: str, stem: str, polylines: list[np.ndarray], codes: np.ndarray, enum: Any
) -> None:
    """One linear BasisCurves per polyline under ``parent``, with its WOMD type code."""
    UsdGeom.Scope.Define(stage, parent)
    known = {t.value: t.name for t in enum}
    for j, (xy, code) in enumerate(zip(polylines, codes, strict=True)):
        curve = UsdGeom.BasisCurves.Define(stage, f"{parent}/{stem}_{j:03d}")
        curve.CreateTypeAttr(UsdGeom.Tokens.linear)
        curve.CreateCurveVertexCountsAttr(Vt.IntArray([len(xy)]))
        curve.CreatePointsAttr(_vec3f_array(xy, MARKING_Z_M))
        curve.CreateWidthsAttr(Vt.FloatArray([0.15]))
        curve.SetWidthsInterpolation(UsdGeom.Tokens.constant)
        prim = curve.GetPrim()
        _custom(prim, "type", Sdf.ValueTypeNames.Int, int(code), f"WOMD {enum.__name__} code")
        if int(code) in known:
            _custom(prim, "typeName", Sdf.ValueTypeNames.String, known[int(code)], f"WOMD {enum.__name__}")


def _define_agents(stage: Usd.Stage, scene: Scene) -> None:
    """One Xform per valid controlled agent at its spawn pose, with its task attributes."""
    UsdGeom.Scope.Define(stage, AGENTS)
    double = UsdGeom.XformOp.PrecisionDouble
    for slot in np.flatnonzero(scene.agent_valid):
        i = int(slot)
        x, y, yaw = (float(v) for v in scene.spawn_pose[i])
        length, width = float(scene.length_m[i]), float(scene.width_m[i])
        agent = UsdGeom.Xform.Define(stage, f"{AGENTS}/agent_{i:03d}")
        agent.AddTranslateOp(precision=double).Set(Gf.Vec3d(x, y, 0.0))
        agent.AddRotateZOp(precision=double).Set(math.degrees(yaw))
        body = UsdGeom.Cube.Define(stage, f"{AGENTS}/agent_{i:03d}/Body")
        body.CreateSizeAttr(1.0)
        body.AddTranslateOp(precision=double).Set(Gf.Vec3d(0.0, 0.0, 0.5 * AGENT_HEIGHT_M))
        body.AddScaleOp(precision=double).Set(Gf.Vec3d(length, width, AGENT_HEIGHT_M))
        body.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(0.2, 0.4, 0.8)]))
        prim = agent.GetPrim()
        names = Sdf.ValueTypeNames
        gx, gy = (float(v) for v in scene.goal_xy[i])
        for name, type_name, value, doc in (
            ("agentIndex", names.Int, i, "agent slot in the scene's padded arrays"),
            ("spawnYawRad", names.Double, yaw, "spawn heading [rad], counter-clockwise from +x"),
            ("spawnSpeedMps", names.Double, float(scene.spawn_speed_mps[i]), "spawn speed [m/s]"),
            ("goalPosition", names.Double3, Gf.Vec3d(gx, gy, 0.0), "goal (x, y, 0) [m]"),
            ("goalArcLengthM", names.Double, float(scene.goal_s_m[i]), "goal arc length on the route [m]"),
            ("route", names.Float3Array, _vec3f_array(scene.route(i), 0.0), "route polyline (x, y, 0) [m]"),
            ("lengthM", names.Double, length, "footprint length [m]"),
            ("widthM", names.Double, width, "footprint width [m]"),
        ):
            _custom(prim, name, type_name, value, doc)


def build_usd_stage(scene: Scene) -> Usd.Stage:
    """An in-memory USD stage of ``scene`` (module docstring for its layout)."""
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    world = UsdGeom.Xform.Define(stage, ROOT)
    stage.SetDefaultPrim(world.GetPrim())
    metadata = scene_metadata(scene)
    stage.GetRootLayer().customLayerData = {"scenefactory": metadata}
    world.GetPrim().SetCustomDataByKey("scenefactory", metadata)
    world.GetPrim().SetDocumentation(f"scenefactory scene '{scene.name}'")

    material = _define_physics(stage, scene.friction)
    UsdGeom.Xform.Define(stage, f"{ROOT}/Road")
    _define_road_surface(stage, scene, material)
    rg = scene.roadgraph
    _define_curves(stage, ROAD_LINES, "line", rg.lines(), rg.line_type, RoadLineType)
    _define_curves(stage, ROAD_EDGES, "edge", rg.edges(), rg.edge_type, RoadEdgeType)
    _define_agents(stage, scene)
    return stage


def scene_to_usd(scene: Scene, path: str | os.PathLike[str]) -> Usd.Stage:
    """Write ``scene`` as a USD file at ``path`` atomically and return the (in-memory) stage written.

    ``.usda`` writes text, ``.usd``/``.usdc`` the binary crate format. Raises
    :class:`~scenefactory.scenes.export_mjcf.SceneExportError` for another extension, a folder, or a
    failed write.
    """
    p = check_output_path(path, USD_SUFFIXES, "a USD stage")
    stage = build_usd_stage(scene)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.stem}.", suffix=p.suffix)
    os.close(fd)
    try:
        if not stage.GetRootLayer().Export(tmp):
            raise SceneExportError(f"USD failed to write {str(p)!r}")
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return stage
