"""Scene export to MJCF (MuJoCo) and USD: geometry, physics parameters and round-tripped metadata.

The MJCF tests pin that an exported world is simulation-ready: it compiles, has one car per valid
agent, the road plane carries the scene's μ (and, with its priority, governs tyre contact), and
cars parked at their spawn poses stay there at ride height for 2 s of zero controls. The USD tests
reopen the written file and rebuild from it what a consumer (Isaac Sim) needs.
"""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
from pxr import Usd, UsdGeom, UsdPhysics, UsdShade

from scene_fixtures import straight_scene
from scenefactory.scenes.export_mjcf import (
    RoadMesh,
    SceneExportError,
    lane_strip,
    marking_points,
    road_surface_mesh,
    save_mjcf,
    scene_to_mjcf,
)
from scenefactory.scenes.export_usd import (
    AGENTS,
    PHYSICS_PURPOSE,
    ROAD_EDGES,
    ROAD_LINES,
    ROAD_MATERIAL,
    ROAD_SURFACE,
    scene_metadata,
    scene_to_usd,
)
from scenefactory.scenes.library import procedural_scenes
from scenefactory.scenes.scene import Scene
from scenefactory.vehicles.car import GROUND_GEOM, CarIndex, CarParams

KINDS = ("straight", "curved", "intersection")


@functools.cache
def _scenes() -> tuple[Scene, ...]:
    return tuple(procedural_scenes("eval", 3, 4, kinds=KINDS))


@pytest.fixture(params=range(len(KINDS)), ids=KINDS)
def scene(request: pytest.FixtureRequest) -> Scene:
    """One procedural eval scene of each kind (4 agents)."""
    return _scenes()[request.param]


def _inside_mesh(mesh: RoadMesh, xy: np.ndarray) -> bool:
    """Whether point ``xy`` lies in some triangle of ``mesh`` (barycentric test, edges included)."""
    a, b, c = (mesh.vertices_m[mesh.faces[:, i], :2] for i in range(3))
    v0, v1, v2 = b - a, c - a, xy - a
    den = v0[:, 0] * v1[:, 1] - v0[:, 1] * v1[:, 0]
    u = (v2[:, 0] * v1[:, 1] - v2[:, 1] * v1[:, 0]) / den
    v = (v0[:, 0] * v2[:, 1] - v0[:, 1] * v2[:, 0]) / den
    return bool(np.any((u >= -1e-9) & (v >= -1e-9) & (u + v <= 1 + 1e-9)))


# ----------------------------------------------------------------------------------------- road mesh


def test_road_mesh_counts_and_area(scene: Scene) -> None:
    """2 vertices per valid lane point, 2 triangles per segment, all CCW, area ≈ Σ length × width."""
    rg = scene.roadgraph
    mesh = road_surface_mesh(rg)
    points = rg.lane_valid.sum(axis=1)
    np.testing.assert_array_equal(np.diff(mesh.lane_vertex_start), 2 * points)
    assert mesh.vertices_m.shape == (2 * points.sum(), 3)
    assert mesh.faces.shape == (2 * (points - 1).sum(), 3)
    assert np.all(mesh.vertices_m[:, 2] == 0.0)
    areas = mesh.face_areas_m2
    assert np.all(areas > 0.0), "every triangle is counter-clockwise seen from above"
    expected = 0.0
    for i in range(rg.num_lanes):
        xy, w = rg.lane(i), rg.lane_width_m[i][rg.lane_valid[i]]
        seg = np.linalg.norm(np.diff(xy, axis=0), axis=1)
        expected += float(np.sum(seg * 0.5 * (w[:-1] + w[1:])))
    assert areas.sum() == pytest.approx(expected, rel=0.05)


def test_lane_strip_arc_is_exact() -> None:
    """A quarter circle of radius 20 m, 3.5 m wide: strip area → (π/2)·R·w as the sampling refines."""
    theta = np.linspace(0.0, 0.5 * math.pi, 200)
    xy = 20.0 * np.stack([np.cos(theta), np.sin(theta)], axis=1)
    verts, faces = lane_strip(xy, np.full(200, 3.5))
    mesh = RoadMesh(verts, faces, np.array([0, len(verts)]))
    assert mesh.face_areas_m2.sum() == pytest.approx(0.5 * math.pi * 20.0 * 3.5, rel=1e-3)
    left = np.linalg.norm(verts[0::2, :2], axis=1)  # left of a CCW arc is towards the centre
    np.testing.assert_allclose(left[1:-1], 20.0 - 1.75, atol=1e-9)  # chord-bisector normals are radial
    np.testing.assert_allclose(left[[0, -1]], 20.0 - 1.75, atol=1e-4)  # end normals: half a step off


def test_degenerate_lane_raises() -> None:
    """Repeated centre points have no normal: the error names the lane and the points."""
    xy = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    with pytest.raises(SceneExportError, match=r"lane 7: points 1 and 2 coincide"):
        lane_strip(xy, np.full(4, 3.0), "lane 7")


def test_marking_points_simplify_within_tolerance() -> None:
    """A straight line keeps its ends only; a curve keeps enough points to stay within 2 cm."""
    straight = np.stack([np.linspace(0, 100, 101), np.zeros(101)], axis=1)
    np.testing.assert_array_equal(marking_points(straight), straight[[0, -1]])
    theta = np.linspace(0.0, math.pi, 181)
    arc = 30.0 * np.stack([np.cos(theta), np.sin(theta)], axis=1)
    kept = marking_points(arc)
    assert 2 < len(kept) < len(arc)
    # Every dropped arc point is within tolerance of the kept chain.
    for p in arc:
        d = [
            np.linalg.norm(p - (a + np.clip((p - a) @ (b - a) / ((b - a) @ (b - a)), 0, 1) * (b - a)))
            for a, b in itertools.pairwise(kept)
        ]
        assert min(d) <= 0.02 + 1e-9


# ----------------------------------------------------------------------------------------------- MJCF


def test_mjcf_loads_and_cars_stay_on_road(scene: Scene) -> None:
    """One car per agent at its spawn pose; ground μ = scene μ; 2 s at rest leaves every car in place."""
    car = CarParams()
    model = mujoco.MjModel.from_xml_string(scene_to_mjcf(scene, car))
    index = CarIndex.from_model(model)
    assert index.num_cars == scene.num_agents
    assert model.geom_friction[index.ground_geom, 0] == scene.friction
    assert model.opt.timestep == pytest.approx(1.0 / 120.0)
    # Visual road geoms do not collide.
    visual = [g for g in range(model.ngeom) if g != index.ground_geom and model.geom_bodyid[g] == 0]
    assert visual and all(model.geom_contype[g] == 0 and model.geom_conaffinity[g] == 0 for g in visual)
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "road_surface") in visual

    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    spawn = scene.spawn_pose[scene.agent_valid]
    np.testing.assert_allclose(data.qpos[index.free_qpos[:, :2]], spawn[:, :2], atol=1e-6)
    yaw0 = 2.0 * np.arctan2(data.qpos[index.free_qpos[:, 6]], data.qpos[index.free_qpos[:, 3]])
    np.testing.assert_allclose(np.angle(np.exp(1j * (yaw0 - spawn[:, 2]))), 0.0, atol=1e-6)
    mesh = road_surface_mesh(scene.roadgraph)
    assert all(_inside_mesh(mesh, xy) for xy in spawn[:, :2]), "spawns lie on the lane footprint"

    data.ctrl[:] = 0.0  # zero steering angle and drive torque; brakes (frictionloss) are 0 in the model
    for _ in range(round(2.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    assert np.all(np.isfinite(data.qpos))
    pos = data.qpos[index.free_qpos[:, :3]]
    np.testing.assert_allclose(pos[:, :2], spawn[:, :2], atol=0.05)
    np.testing.assert_allclose(pos[:, 2], car.com_height_m, atol=0.03)
    assert all(_inside_mesh(mesh, xy) for xy in pos[:, :2])


def test_mjcf_records_scene_metadata(road_scene: Scene) -> None:
    """Model name, custom fields (friction, surface, per-car agent slot and goal) round-trip."""
    model = mujoco.MjModel.from_xml_string(scene_to_mjcf(road_scene))
    assert model.names.split(b"\0")[0].decode() == f"scenefactory:{road_scene.name}"  # model name first

    def numeric(name: str) -> np.ndarray:
        i = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_NUMERIC, name)
        assert i >= 0, name
        adr, size = model.numeric_adr[i], model.numeric_size[i]
        return np.asarray(model.numeric_data[adr : adr + size])

    assert numeric("scene_friction")[0] == road_scene.friction
    assert numeric("scene_water_film_mm")[0] == road_scene.water_film_mm
    for j in range(road_scene.num_agents):
        assert numeric(f"car{j}_agent")[0] == j
        np.testing.assert_array_equal(numeric(f"car{j}_goal_xy"), road_scene.goal_xy[j])
    surface = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_TEXT, "scene_surface")
    adr = model.text_adr[surface]
    assert model.text_data[adr : adr + model.text_size[surface] - 1].decode() == road_scene.surface
    ground = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, GROUND_GEOM)
    assert model.geom_priority[ground] == 1


def test_save_mjcf_writes_and_rejects_bad_paths(road_scene: Scene, tmp_path: Path) -> None:
    """``save_mjcf`` writes a loadable file; another extension or a folder is a clear error."""
    path = tmp_path / "world.xml"
    save_mjcf(road_scene, path)
    assert mujoco.MjModel.from_xml_path(str(path)).nbody > 1
    with pytest.raises(SceneExportError, match=r"must end in \.xml, \.mjcf"):
        save_mjcf(road_scene, tmp_path / "world.json")
    folder = tmp_path / "dir.xml"
    folder.mkdir()
    with pytest.raises(SceneExportError, match="it is a folder"):
        save_mjcf(road_scene, folder)


# ------------------------------------------------------------------------------------------------ USD


@pytest.mark.parametrize("suffix", [".usda", ".usdc"])
def test_usd_round_trip(scene: Scene, suffix: str, tmp_path: Path) -> None:
    """Reopened stage: units, physics scene, material μ, collider, curves, agents and metadata."""
    path = tmp_path / f"scene{suffix}"
    scene_to_usd(scene, path)
    stage = Usd.Stage.Open(str(path))
    assert stage.GetDefaultPrim().GetPath() == "/World"
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0

    physics = [UsdPhysics.Scene(p) for p in stage.Traverse() if p.IsA(UsdPhysics.Scene)]
    assert len(physics) == 1
    assert tuple(physics[0].GetGravityDirectionAttr().Get()) == (0.0, 0.0, -1.0)
    assert physics[0].GetGravityMagnitudeAttr().Get() == pytest.approx(9.81)

    material_api = UsdPhysics.MaterialAPI(stage.GetPrimAtPath(ROAD_MATERIAL))
    for attr in (material_api.GetStaticFrictionAttr(), material_api.GetDynamicFrictionAttr()):
        assert attr.Get() == pytest.approx(scene.friction, rel=1e-7)  # stored as float32
    assert material_api.GetRestitutionAttr().Get() == 0.0

    road = stage.GetPrimAtPath(ROAD_SURFACE)
    assert road.HasAPI(UsdPhysics.CollisionAPI)
    bound, _ = UsdShade.MaterialBindingAPI(road).ComputeBoundMaterial(PHYSICS_PURPOSE)
    assert bound and bound.GetPath() == ROAD_MATERIAL
    mesh = road_surface_mesh(scene.roadgraph)
    points = np.array(UsdGeom.Mesh(road).GetPointsAttr().Get())
    np.testing.assert_allclose(points, mesh.vertices_m, atol=1e-4)
    np.testing.assert_array_equal(
        np.array(UsdGeom.Mesh(road).GetFaceVertexIndicesAttr().Get()), mesh.faces.ravel()
    )

    rg = scene.roadgraph
    for parent, polylines, codes in (
        (ROAD_LINES, rg.lines(), rg.line_type),
        (ROAD_EDGES, rg.edges(), rg.edge_type),
    ):
        curves = [UsdGeom.BasisCurves(p) for p in stage.GetPrimAtPath(parent).GetChildren()]
        assert len(curves) == len(polylines)
        for curve, xy, code in zip(curves, polylines, codes, strict=True):
            assert curve.GetTypeAttr().Get() == UsdGeom.Tokens.linear
            assert curve.GetPrim().GetAttribute("scenefactory:type").Get() == int(code)
            np.testing.assert_allclose(np.array(curve.GetPointsAttr().Get())[:, :2], xy, atol=1e-4)

    agents = stage.GetPrimAtPath(AGENTS).GetChildren()
    assert len(agents) == scene.num_agents
    for prim in agents:
        i = prim.GetAttribute("scenefactory:agentIndex").Get()
        x, y, yaw = scene.spawn_pose[i]
        xform = UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(Usd.TimeCode.Default())
        origin = xform.ExtractTranslation()
        assert abs(origin[0] - x) < 1e-6 and abs(origin[1] - y) < 1e-6 and abs(origin[2]) < 1e-12
        forward = xform.TransformDir((1.0, 0.0, 0.0))
        assert math.atan2(forward[1], forward[0]) == pytest.approx(math.atan2(math.sin(yaw), math.cos(yaw)))
        goal = prim.GetAttribute("scenefactory:goalPosition").Get()
        assert (goal[0], goal[1]) == (scene.goal_xy[i, 0], scene.goal_xy[i, 1])
        route = np.array(prim.GetAttribute("scenefactory:route").Get())
        np.testing.assert_allclose(route[:, :2], scene.route(i), atol=1e-4)
        assert prim.GetAttribute("scenefactory:spawnSpeedMps").Get() == scene.spawn_speed_mps[i]

    expected = scene_metadata(scene)
    assert dict(stage.GetRootLayer().customLayerData["scenefactory"]) == expected
    assert dict(stage.GetDefaultPrim().GetCustomDataByKey("scenefactory")) == expected
    assert expected["friction"] == scene.friction and expected["surface"] == scene.surface


def test_usd_rejects_bad_paths(road_scene: Scene, tmp_path: Path) -> None:
    """A non-USD extension or a folder is a clear error, and nothing is written."""
    with pytest.raises(SceneExportError, match=r"must end in \.usda, \.usd, \.usdc"):
        scene_to_usd(road_scene, tmp_path / "scene.xml")
    with pytest.raises(SceneExportError, match=r"must end in"):
        scene_to_usd(road_scene, tmp_path / "scene")
    folder = tmp_path / "dir.usda"
    folder.mkdir()
    with pytest.raises(SceneExportError, match="it is a folder"):
        scene_to_usd(road_scene, folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.usda"]


def test_fixture_scene_exports(road_scene: Scene, tmp_path: Path) -> None:
    """The hand-built two-lane fixture (one westbound agent) exports to both formats consistently."""
    straight = straight_scene([(10.0, 0.0, 0.0, 5.0)])
    for sc in (road_scene, straight):
        stage = scene_to_usd(sc, tmp_path / f"{sc.num_agents}.usda")
        assert len(stage.GetPrimAtPath(AGENTS).GetChildren()) == sc.num_agents
        model = mujoco.MjModel.from_xml_string(scene_to_mjcf(sc))
        assert CarIndex.from_model(model).num_cars == sc.num_agents
