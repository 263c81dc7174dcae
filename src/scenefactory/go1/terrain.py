"""Rough terrain for the Go1 worlds: a grid of tiles drawn in numpy, one MuJoCo height field.

Layout (world frame, metres; Isaac Lab's ``TerrainGenerator`` with curriculum): ``num_levels``
rows of tiles along x (row ``l`` is difficulty level ``l``), ``num_cols`` columns along y (column
``c`` is one kind, assigned by the config's proportions), each tile ``S = tile_size_m`` square,
surrounded by a flat border of ``border_m`` at height 0. Tile ``(l, c)`` covers
``x ∈ border + [l·S, (l + 1)·S]``, ``y ∈ border + [c·S, (c + 1)·S]``; its *origin* (where a robot
starts) is its centre, at the highest ground within :data:`SPAWN_RADIUS_M` of it.

Heights are sampled every ``h = horizontal_scale_m`` at cell centres: grid point ``(iy, ix)`` is at
``((ix + ½)·h, (iy + ½)·h)``. MuJoCo joins the points with two triangles per cell, split along the
diagonal from ``(iy, ix)`` to ``(iy + 1, ix + 1)``; :meth:`Terrain.height_at` interpolates the same
triangles, so the height scan reads exactly the surface the feet touch (a test checks it against
``mj_ray``). A vertical edge (a stair's riser, a block's side) is therefore a ramp one cell wide:
56° for a 15 cm step at the default 0.1 m (Isaac Lab's spacing; it turns the field into a mesh with
vertical walls, which MuJoCo's height field cannot). 0.05 m makes it 72° at about 1.4× the physics
cost of 0.1 m (MuJoCo C, one thread: 10.3k against 14.9k physics steps/s of 256 robots walking on
the default grid, 20.1k on the flat floor).

Tile kinds, each with a level's parameter ``p`` (``TerrainConfig``: ``lo + l/(L − 1)·(hi − lo)``),
in tile coordinates ``(u, v)`` from the centre and the square radius ``r = max(|u|, |v|)``; the
outermost ``edge_m`` of every tile but random ground is flat at 0, so neighbouring tiles meet level:

* ``random``: uniform heights in ``±p`` on a :data:`ROUGH_CELL_M` grid, interpolated;
* ``slope_up`` / ``slope_down``: a square pyramid of slope ``p`` degrees from the central platform
  (``platform_m`` wide) to the edge margin: its centre ``tan(p)·(S/2 − edge − platform/2)`` below
  (up: the robot climbs outward) or above (down) the tile's edge;
* ``stairs_up`` / ``stairs_down``: the same pyramid in steps ``step_width_m`` deep and ``p`` high;
* ``steps``: square blocks ``block_size_m`` wide, each uniform in ``±p`` high, around a flat platform.

A robot's ground height and the height scan (a yaw-aligned grid of points around the base,
:func:`scan_points_b`) are read analytically from the same arrays (:meth:`Terrain.height_at`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

from scenefactory.go1 import robot as go1
from scenefactory.go1.config import TERRAIN_KINDS, TerrainConfig

ROUGH_CELL_M = 0.1
"""Spacing of the random heights of ``random`` tiles (Isaac Lab's 0.1 m), interpolated in between."""
SPAWN_RADIUS_M = 0.3
"""A tile's origin stands on the highest ground within this distance of its centre."""
HFIELD_BASE_M = 0.5
"""Depth of the height field's solid below its lowest point."""
BELOW_M = 0.5
"""A plane this far under the height field's base catches a robot that walks off the grid (it
ends its episode as a fall)."""

Array = npt.NDArray[np.float64]


def level_value(bounds: tuple[float, float], level: int, num_levels: int) -> float:
    """A level's parameter: ``lo + l/(L − 1)·(hi − lo)`` (``lo`` when there is one level)."""
    lo, hi = bounds
    return lo if num_levels == 1 else lo + level / (num_levels - 1) * (hi - lo)


LEVEL_PARAMETERS = {
    "random": ("amplitude_m", "rough_amplitude_m"),
    "slope_up": ("slope_deg", "slope_deg"),
    "slope_down": ("slope_deg", "slope_deg"),
    "stairs_up": ("step_height_m", "step_height_m"),
    "stairs_down": ("step_height_m", "step_height_m"),
    "steps": ("block_height_m", "block_height_m"),
}
"""Kind → (the name of what its level sets, the config range it comes from)."""


def level_parameter(cfg: TerrainConfig, kind: str, level: int) -> tuple[str, float]:
    """(name, value) of what ``level`` sets for tiles of ``kind``: e.g. ``("step_height_m", 0.1)``."""
    name, field = LEVEL_PARAMETERS[kind]
    return name, level_value(getattr(cfg, field), level, cfg.num_levels)


def column_kinds(cfg: TerrainConfig) -> tuple[str, ...]:
    """The kind of every column: by ``proportions`` for ``rough`` (column ``c`` takes the first kind
    whose cumulative share exceeds ``c / num_cols``, as Isaac Lab), else ``kind`` everywhere."""
    if cfg.kind in TERRAIN_KINDS:
        return (cfg.kind,) * cfg.num_cols
    if cfg.kind != "rough":
        raise ValueError(f"terrain kind '{cfg.kind}' has no tiles")
    names = [k for k, _ in cfg.proportions]
    weights = np.array([w for _, w in cfg.proportions], dtype=np.float64)
    cum = np.cumsum(weights / weights.sum())
    return tuple(names[int(np.argmax(c / cfg.num_cols + 1e-3 < cum))] for c in range(cfg.num_cols))


def _tile_coords(cfg: TerrainConfig) -> tuple[Array, Array, Array]:
    """(m, m) tile coordinates ``u`` (x), ``v`` (y) of the grid points and their square radius."""
    m = round(cfg.tile_size_m / cfg.horizontal_scale_m)
    c = (np.arange(m) + 0.5) * cfg.horizontal_scale_m - cfg.tile_size_m / 2
    v, u = np.meshgrid(c, c, indexing="ij")
    return u, v, np.maximum(np.abs(u), np.abs(v))


def _pyramid_run(cfg: TerrainConfig, r: Array) -> Array:
    """Distance inward from the tile's edge margin, clipped at the central platform: (m, m) [m]."""
    inner = cfg.tile_size_m / 2 - cfg.edge_m
    return np.clip(inner - r, 0.0, inner - cfg.platform_m / 2)


def tile_heights(cfg: TerrainConfig, kind: str, level: int, rng: np.random.Generator) -> Array:
    """(m, m) heights [m] of one tile of ``kind`` at ``level``, rows along y (module docstring);
    ``rng`` is drawn from only by the random kinds (``random``, ``steps``)."""
    u, v, r = _tile_coords(cfg)
    L = cfg.num_levels
    if kind == "random":
        amp = level_value(cfg.rough_amplitude_m, level, L)
        k = math.ceil(cfg.tile_size_m / ROUGH_CELL_M) + 1
        coarse = rng.uniform(-amp, amp, (k, k))
        return _bilinear(
            coarse, (v + cfg.tile_size_m / 2) / ROUGH_CELL_M, (u + cfg.tile_size_m / 2) / ROUGH_CELL_M
        )
    if kind in ("slope_up", "slope_down"):
        rise = math.tan(math.radians(level_value(cfg.slope_deg, level, L))) * _pyramid_run(cfg, r)
        return rise if kind == "slope_down" else -rise
    if kind in ("stairs_up", "stairs_down"):
        step = level_value(cfg.step_height_m, level, L)
        inner = cfg.tile_size_m / 2 - cfg.edge_m
        top = math.floor((inner - cfg.platform_m / 2) / cfg.step_width_m + 1e-9)
        n = np.clip(np.ceil((inner - r) / cfg.step_width_m - 1e-9), 0, top)
        return step * n if kind == "stairs_down" else -step * n
    if kind == "steps":
        amp = level_value(cfg.block_height_m, level, L)
        k = math.ceil(cfg.tile_size_m / cfg.block_size_m / 2) * 2 + 1  # odd: a block on the centre
        blocks = rng.uniform(-amp, amp, (k, k))
        iy = np.floor(v / cfg.block_size_m + 0.5).astype(np.int64) + k // 2
        ix = np.floor(u / cfg.block_size_m + 0.5).astype(np.int64) + k // 2
        h = blocks[iy, ix]
        inside = (r >= cfg.platform_m / 2) & (r < cfg.tile_size_m / 2 - cfg.edge_m)
        return np.where(inside, h, 0.0)
    raise ValueError(f"unknown tile kind '{kind}', expected one of {TERRAIN_KINDS}")


def _bilinear(grid: Array, fy: Array, fx: Array) -> Array:
    """``grid`` (ky, kx) interpolated bilinearly at fractional indices ``fy``, ``fx``."""
    y0 = np.clip(np.floor(fy).astype(np.int64), 0, grid.shape[0] - 2)
    x0 = np.clip(np.floor(fx).astype(np.int64), 0, grid.shape[1] - 2)
    ty, tx = fy - y0, fx - x0
    g00, g01 = grid[y0, x0], grid[y0, x0 + 1]
    g10, g11 = grid[y0 + 1, x0], grid[y0 + 1, x0 + 1]
    return (g00 * (1 - tx) + g01 * tx) * (1 - ty) + (g10 * (1 - tx) + g11 * tx) * ty


@dataclass(frozen=True)
class Terrain:
    """A generated grid of tiles (module docstring): the height field and where robots start."""

    cfg: TerrainConfig
    heights_m: Array
    """(ny, nx) ground heights [m]; point ``(iy, ix)`` at ``((ix + ½)·h, (iy + ½)·h)``."""
    origins_m: Array
    """(num_levels, num_cols, 3) each tile's start point: its centre at the ground's height."""
    kinds: tuple[str, ...]
    """The kind of each column."""

    @property
    def scale_m(self) -> float:
        """Grid spacing [m]."""
        return self.cfg.horizontal_scale_m

    @property
    def size_m(self) -> tuple[float, float]:
        """Extent (x, y) of the whole grid, border included [m]."""
        ny, nx = self.heights_m.shape
        return nx * self.scale_m, ny * self.scale_m

    def height_at(self, xy_w: npt.ArrayLike) -> Array:
        """Ground height [m] under world points ``xy_w`` (..., 2): MuJoCo's triangles (module
        docstring); points beyond the grid read its edge (the flat border)."""
        xy = np.asarray(xy_w, dtype=np.float64)
        h = self.heights_m
        fx = np.clip(xy[..., 0] / self.scale_m - 0.5, 0.0, h.shape[1] - 1.0)
        fy = np.clip(xy[..., 1] / self.scale_m - 0.5, 0.0, h.shape[0] - 1.0)
        x0 = np.minimum(np.floor(fx).astype(np.int64), h.shape[1] - 2)
        y0 = np.minimum(np.floor(fy).astype(np.int64), h.shape[0] - 2)
        tx, ty = fx - x0, fy - y0
        h00, h01 = h[y0, x0], h[y0, x0 + 1]
        h10, h11 = h[y0 + 1, x0], h[y0 + 1, x0 + 1]
        below = h00 + tx * (h01 - h00) + ty * (h11 - h01)  # the triangle with corners 00, 01, 11
        above = h00 + ty * (h10 - h00) + tx * (h11 - h10)  # the triangle with corners 00, 10, 11
        return np.where(tx >= ty, below, above)

    def tile_of(self, xy_w: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(level, column) of the tile under world points (..., 2), −1 on the border."""
        xy = np.asarray(xy_w, dtype=np.float64) - self.cfg.border_m
        lv = np.floor(xy[..., 0] / self.cfg.tile_size_m).astype(np.int64)
        col = np.floor(xy[..., 1] / self.cfg.tile_size_m).astype(np.int64)
        inside = (lv >= 0) & (lv < self.cfg.num_levels) & (col >= 0) & (col < self.cfg.num_cols)
        return np.where(inside, lv, -1), np.where(inside, col, -1)


def generate(cfg: TerrainConfig) -> Terrain:
    """The terrain of ``cfg`` (not flat): tiles drawn level by level, column by column, from one
    generator seeded with ``cfg.seed`` (the same config gives the same heights)."""
    if not cfg.enabled:
        raise ValueError("flat ground has no height field (TerrainConfig.kind is 'flat')")
    rng = np.random.default_rng(cfg.seed)
    kinds = column_kinds(cfg)
    m = round(cfg.tile_size_m / cfg.horizontal_scale_m)
    b = round(cfg.border_m / cfg.horizontal_scale_m)
    heights = np.zeros((cfg.num_cols * m + 2 * b, cfg.num_levels * m + 2 * b))
    for lv in range(cfg.num_levels):
        for c, kind in enumerate(kinds):
            heights[b + c * m : b + (c + 1) * m, b + lv * m : b + (lv + 1) * m] = tile_heights(
                cfg, kind, lv, rng
            )
    origins = np.zeros((cfg.num_levels, cfg.num_cols, 3))
    centres = cfg.border_m + (np.arange(max(cfg.num_levels, cfg.num_cols)) + 0.5) * cfg.tile_size_m
    origins[..., 0] = centres[: cfg.num_levels, None]
    origins[..., 1] = centres[None, : cfg.num_cols]
    terrain = Terrain(cfg, heights, origins, kinds)
    ring = np.linspace(-SPAWN_RADIUS_M, SPAWN_RADIUS_M, 7)
    dx, dy = np.meshgrid(ring, ring)
    near = np.stack([dx, dy], axis=-1)[np.hypot(dx, dy) <= SPAWN_RADIUS_M + 1e-9]  # (k, 2)
    origins[..., 2] = terrain.height_at(origins[..., None, :2] + near).max(axis=-1)
    return terrain


# ------------------------------------------------------------------------------------ MuJoCo


def hfield_xml(terrain: Terrain, floor_friction: float = 1.0) -> tuple[str, str]:
    """(asset, worldbody) MJCF of the height field: ``<hfield name="terrain">`` and the ``floor``
    geom that carries it (``priority`` 1 so its friction governs, as the flat floor), and the
    catch plane below it. The elevation data is written by :func:`fill_hfield` after compiling."""
    ny, nx = terrain.heights_m.shape
    h = terrain.scale_m
    lo, hi = float(terrain.heights_m.min()), float(terrain.heights_m.max())
    span = max(hi - lo, 1e-3)
    sx, sy = (nx - 1) * h / 2, (ny - 1) * h / 2
    cx, cy = nx * h / 2, ny * h / 2
    size = f"{sx:.6g} {sy:.6g} {span:.6g} {HFIELD_BASE_M}"
    asset = f'    <hfield name="terrain" nrow="{ny}" ncol="{nx}" size="{size}"/>'
    body = (
        f'    <geom name="floor" type="hfield" hfield="terrain" pos="{cx:.6g} {cy:.6g} {lo:.6g}" '
        f'material="grid" contype="0" conaffinity="1" priority="1"\n'
        f'          friction="{floor_friction} 0.005 0.0001"/>\n'
        f'    <geom name="floor_below" type="plane" size="0 0 0.05" pos="{cx:.6g} {cy:.6g} '
        f'{lo - HFIELD_BASE_M - BELOW_M:.6g}" contype="0" conaffinity="1" rgba="0.2 0.2 0.2 1"/>'
    )
    return asset, body


def fill_hfield(model: mujoco.MjModel, terrain: Terrain) -> None:
    """Write ``terrain``'s heights into the compiled ``model``'s height field ``terrain``
    (MuJoCo's elevation data: row-major from −y, scaled to [0, 1] of the field's z size)."""
    hid = int(model.hfield("terrain").id)
    ny, nx = terrain.heights_m.shape
    if (int(model.hfield_nrow[hid]), int(model.hfield_ncol[hid])) != (ny, nx):
        raise ValueError(
            f"height field 'terrain' is {model.hfield_nrow[hid]}x{model.hfield_ncol[hid]}, "
            f"the terrain {ny}x{nx}"
        )
    lo = terrain.heights_m.min()
    span = float(model.hfield_size[hid, 2])
    adr = int(model.hfield_adr[hid])
    model.hfield_data[adr : adr + ny * nx] = ((terrain.heights_m - lo) / span).ravel()


# ------------------------------------------------------------------------------------- scan


def scan_points_b(cfg: TerrainConfig) -> Array:
    """(P, 2) the scan's points in the base's yaw frame [m]: ``scan_size_m`` (x, y) centred on the
    base every ``scan_spacing_m`` (17 × 11 = 187 by default), x slowest (row-major in x, then y)."""
    axes = []
    for size in cfg.scan_size_m:
        k = round(size / cfg.scan_spacing_m)
        axes.append((np.arange(k + 1) - k / 2) * cfg.scan_spacing_m)
    gx, gy = np.meshgrid(axes[0], axes[1], indexing="ij")
    return np.stack([gx.ravel(), gy.ravel()], axis=1)


def scan_dim(cfg: TerrainConfig) -> int:
    """Values in the height scan (0 when the task computes none)."""
    return len(scan_points_b(cfg)) if cfg.scans else 0


def height_scan(
    heights_at: Callable[[Array], Array] | None,
    pos_w: Array,
    yaw_rad: Array,
    points_b: Array,
    offset_m: float,
    clip_m: float,
) -> Array:
    """(N, P) ``clip(z_base − ground(p) − offset, ±clip)`` at the points ``points_b`` (P, 2)
    rotated by each base's yaw and moved to its position ``pos_w`` (N, 3) [m]; ``heights_at`` maps
    world points (..., 2) to ground heights, ``None`` for the flat floor at 0 (Isaac Lab's
    ``height_scan``, with the nominal trunk height as the offset)."""
    c, s = np.cos(yaw_rad)[:, None], np.sin(yaw_rad)[:, None]
    px, py = points_b[None, :, 0], points_b[None, :, 1]
    xy = np.stack([pos_w[:, None, 0] + c * px - s * py, pos_w[:, None, 1] + s * px + c * py], axis=-1)
    ground = np.zeros(xy.shape[:-1]) if heights_at is None else heights_at(xy)
    return np.clip(pos_w[:, 2:3] - ground - offset_m, -clip_m, clip_m)


def yaw_of(quat_wxyz: Array) -> Array:
    """(N,) yaw [rad] of unit quaternions (N, 4) (w, x, y, z)."""
    w, x, y, z = (quat_wxyz[:, i] for i in range(4))
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def go1_model(
    timestep_s: float,
    terrain: Terrain | None,
    with_visuals: bool = False,
    boxes_m: np.ndarray | None = None,
) -> mujoco.MjModel:
    """The compiled Go1 world: on the flat floor (``terrain`` ``None``: exactly
    ``robot.go1_mjcf``'s model), or on ``terrain``'s height field with its heights written in;
    ``boxes_m`` (B, 6): static obstacles (``robot.box_geoms_xml``)."""
    ground = None if terrain is None else hfield_xml(terrain)
    model = mujoco.MjModel.from_xml_string(
        go1.go1_mjcf(timestep_s=timestep_s, with_visuals=with_visuals, ground=ground, boxes_m=boxes_m)
    )
    if terrain is not None:
        fill_hfield(model, terrain)
    return model
