"""Tests of the road friction model (``scenefactory.scenes.friction``).

They pin the model to its sources (Zhao et al. 2024's AC points, the literature table of peak μ,
the rain mapping) and to the properties the simulator relies on: μ never rises with more water,
the vectorised and scalar forms agree, and bad input fails with a message naming the value.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from scenefactory.errors import UserError
from scenefactory.scenes import friction as fr

# The literature table of peak μ (passenger tyres) from the project reference: (dry range, wet range).
TABLE: dict[str, tuple[tuple[float, float], tuple[float, float] | None]] = {
    "asphalt": ((0.70, 0.90), (0.45, 0.60)),
    "concrete": ((0.75, 0.90), (0.50, 0.60)),
    "gravel": ((0.35, 0.70), (0.40, 0.50)),
    "dirt": ((0.50, 0.60), (0.15, 0.25)),
    "packed_snow": ((0.20, 0.35), None),
    "ice": ((0.05, 0.15), None),
}
DENSE_FILM_MM = np.linspace(0.0, 15.0, 3001)
REPORT_FILMS_MM = (0.0, 0.5, 1.0, 2.0, 5.0, 12.0)


def test_surfaces_cover_the_table() -> None:
    assert set(fr.SURFACE_NAMES) == set(TABLE)


@pytest.mark.parametrize(("h_mm", "mu"), [(0.0, 1.174), (0.5, 0.944), (5.0, 0.506), (12.0, 0.408)])
def test_zhao_ac_reference_points(h_mm: float, mu: float) -> None:
    """The Hill curve passes through Zhao et al. 2024's four AC points (fitted exactly)."""
    assert fr.zhao_asphalt_mu(h_mm) == pytest.approx(mu, abs=1e-9)
    assert fr.zhao_asphalt_mu(h_mm, "AC") == pytest.approx(mu, abs=1e-9)


def test_zhao_points_constant_matches_curve() -> None:
    for h_mm, mu in fr.ZHAO_AC_POINTS:
        assert fr.zhao_asphalt_mu(h_mm) == pytest.approx(mu, abs=1e-9)


@pytest.mark.parametrize(("mix", "theta"), [("AC", 1.00), ("SMA", 1.09), ("OGFC", 1.21)])
def test_zhao_mixes_scale_by_texture_factor(mix: str, theta: float) -> None:
    for h_mm in (0.0, 0.5, 3.0, 12.0):
        assert fr.zhao_asphalt_mu(h_mm, mix) == pytest.approx(theta * fr.zhao_asphalt_mu(h_mm), rel=1e-12)


def test_zhao_curve_monotone_and_bounded() -> None:
    mu = np.array([fr.zhao_asphalt_mu(float(h)) for h in DENSE_FILM_MM])
    assert np.all(np.diff(mu) < 0.0)
    assert mu[-1] > 0.3  # stays above its asymptote μ_∞ ≈ 0.315


def test_zhao_unknown_mix() -> None:
    with pytest.raises(UserError, match=r"'PA'.*AC, SMA, OGFC"):
        fr.zhao_asphalt_mu(0.0, "PA")


@pytest.mark.parametrize("name", list(TABLE))
def test_monotone_non_increasing_in_water(name: str) -> None:
    """More water never gives more grip, on every surface, from dry to beyond flooded (15 mm)."""
    mu = fr.friction_array([name] * DENSE_FILM_MM.size, DENSE_FILM_MM)
    assert np.all(np.diff(mu) <= 0.0)
    assert np.all(mu >= fr.MU_FLOOR)


@pytest.mark.parametrize("name", list(TABLE))
def test_dry_value_in_table_range(name: str) -> None:
    lo, hi = TABLE[name][0]
    assert lo <= fr.friction(name) <= hi
    assert fr.friction(name) == pytest.approx(fr.SURFACES[name].dry_mu)


@pytest.mark.parametrize("name", [n for n, (_, wet) in TABLE.items() if wet is not None])
def test_wet_value_in_table_range(name: str) -> None:
    """At the documented wet film (1 mm) each surface sits at its table wet midpoint."""
    wet = TABLE[name][1]
    assert wet is not None
    mu = fr.friction(name, fr.REFERENCE_WET_FILM_MM)
    assert wet[0] <= mu <= wet[1]
    assert mu == pytest.approx(0.5 * (wet[0] + wet[1]), abs=1e-12)


def test_snow_and_ice_wet_no_better_and_low() -> None:
    for name in ("packed_snow", "ice"):
        lo = TABLE[name][0][0]
        assert fr.friction(name, fr.REFERENCE_WET_FILM_MM) == pytest.approx(lo)
    assert fr.friction("ice") <= 0.15
    assert max(fr.friction("ice", h) for h in REPORT_FILMS_MM) <= 0.1  # Bosch: black ice ≤ 0.1


@pytest.mark.parametrize("h_mm", REPORT_FILMS_MM)
def test_surface_ordering(h_mm: float) -> None:
    """Gravel > packed snow > ice under any film; paved roads above gravel up to 2 mm.

    Past ~2 mm the wet-insensitive gravel (table: wet 0.40–0.50, near its dry range) overtakes
    asphalt and concrete; that follows from the table and is kept.
    """
    mu = {name: fr.friction(name, h_mm) for name in TABLE}
    assert mu["gravel"] > mu["packed_snow"] > mu["ice"]
    assert mu["concrete"] > mu["asphalt"]
    if h_mm <= 2.0:
        assert mu["asphalt"] > mu["gravel"]


def test_dry_ordering() -> None:
    mu = {name: fr.friction(name) for name in TABLE}
    assert min(mu["asphalt"], mu["concrete"]) > mu["gravel"] > mu["packed_snow"] > mu["ice"]


def test_asphalt_below_zhao_peak() -> None:
    """The per-surface asphalt uses the table's dry 0.80, not Zhao's lumped-model 1.174."""
    for h_mm in REPORT_FILMS_MM:
        assert fr.friction("asphalt", h_mm) < fr.zhao_asphalt_mu(h_mm)


def test_values_pinned() -> None:
    """Regression pin of the reported table (μ at 0, 0.5, 1, 2, 5, 12 mm), to 1e-3."""
    expected = {
        "asphalt": (0.800, 0.623, 0.525, 0.419, 0.304, 0.237),
        "concrete": (0.825, 0.648, 0.550, 0.443, 0.325, 0.256),
        "gravel": (0.525, 0.479, 0.450, 0.414, 0.368, 0.337),
        "dirt": (0.550, 0.301, 0.200, 0.117, 0.054, 0.050),
        "packed_snow": (0.275, 0.228, 0.200, 0.169, 0.132, 0.110),
        "ice": (0.100, 0.066, 0.050, 0.050, 0.050, 0.050),
    }
    for name, values in expected.items():
        got = [fr.friction(name, h) for h in REPORT_FILMS_MM]
        assert got == pytest.approx(values, abs=1e-3), name


def test_rain_mapping() -> None:
    assert fr.water_film_from_rain(0.0) == 0.0
    assert fr.water_film_from_rain(4.0) == pytest.approx(0.2)  # Bosch "wet" film
    assert fr.water_film_from_rain(20.0) == pytest.approx(1.0)  # Bosch "heavy rain" film
    assert fr.water_film_from_rain(10.0, drainage=2.0) == pytest.approx(1.0)
    assert fr.water_film_from_rain(60.0) == pytest.approx(3.0)
    assert fr.water_film_from_rain(500.0) == 3.0
    assert fr.water_film_from_rain(100.0, drainage=0.1) == pytest.approx(0.5)


def test_from_rain_constructor() -> None:
    assert fr.RoadCondition.from_rain("asphalt", 0.0).mu == fr.friction("asphalt")
    road = fr.RoadCondition.from_rain("concrete", 20.0)
    assert road == fr.RoadCondition("concrete", 1.0)
    assert road.mu == pytest.approx(0.55)


def test_presets() -> None:
    assert set(fr.PRESETS) == {"dry", "wet", "heavy_rain", "flooded", "snow", "ice"}
    mu = {name: fr.preset(name).mu for name in fr.PRESETS}
    assert mu["dry"] == pytest.approx(0.80)
    assert mu["wet"] == pytest.approx(0.525)
    assert mu["dry"] > mu["wet"] > mu["heavy_rain"] > mu["flooded"] > mu["ice"]
    assert mu["snow"] == pytest.approx(0.275)
    assert mu["ice"] == pytest.approx(0.10)
    assert fr.preset("flooded").water_film_mm == 12.0
    assert fr.preset("heavy_rain").water_film_mm == fr.water_film_from_rain(1e3)
    with pytest.raises(UserError, match=r"'drizzle'.*dry, wet, heavy_rain, flooded, snow, ice"):
        fr.preset("drizzle")


def test_road_condition_frozen_and_replaceable() -> None:
    road = fr.preset("dry")
    with pytest.raises(dataclasses.FrozenInstanceError):
        road.water_film_mm = 1.0  # type: ignore[misc]
    assert dataclasses.replace(road, water_film_mm=1.0).mu == pytest.approx(0.525)


def test_unknown_surface_message() -> None:
    with pytest.raises(UserError) as info:
        fr.friction("tarmac")
    msg = str(info.value)
    assert "'tarmac'" in msg
    for name in fr.SURFACE_NAMES:
        assert name in msg
    with pytest.raises(UserError, match="'mud'"):
        fr.RoadCondition("mud")
    with pytest.raises(UserError, match="'mud'"):
        fr.friction_array(["asphalt", "mud"], 0.0)


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf, -math.inf])
def test_bad_film_or_rain(bad: float) -> None:
    with pytest.raises(UserError, match=r"water_film_mm.*" + repr(bad)):
        fr.friction("asphalt", bad)
    with pytest.raises(UserError, match="water_film_mm"):
        fr.RoadCondition("asphalt", bad)
    with pytest.raises(UserError, match="water_film_mm"):
        fr.zhao_asphalt_mu(bad)
    with pytest.raises(UserError, match="water_film_mm"):
        fr.friction_array(["asphalt", "ice"], [0.0, bad])
    with pytest.raises(UserError, match="rain_mm_per_h"):
        fr.water_film_from_rain(bad)
    with pytest.raises(UserError, match="drainage"):
        fr.water_film_from_rain(1.0, drainage=bad)


def test_bad_types_and_drainage() -> None:
    with pytest.raises(UserError, match="must be a number"):
        fr.friction("asphalt", "wet")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="drainage must be > 0"):
        fr.water_film_from_rain(1.0, drainage=0.0)
    with pytest.raises(UserError, match="surface id 6 out of range"):
        fr.friction_array(np.array([0, 6]), 0.0)
    with pytest.raises(UserError, match="names or integer ids"):
        fr.friction_array(np.array([0.5]), 0.0)


def test_vectorised_equals_scalar() -> None:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, len(fr.SURFACE_NAMES), size=(4, 50))
    films = rng.uniform(0.0, 15.0, size=(4, 50))
    films[:, 0] = 0.0
    by_id = fr.friction_array(ids, films)
    by_name = fr.friction_array(np.array(fr.SURFACE_NAMES)[ids], films)
    assert by_id.shape == (4, 50) and by_id.dtype == np.float64
    np.testing.assert_array_equal(by_id, by_name)
    scalar = np.array(
        [
            [fr.friction(fr.SURFACE_NAMES[i], float(h)) for i, h in zip(r_ids, r_h, strict=True)]
            for r_ids, r_h in zip(ids, films, strict=True)
        ]
    )
    np.testing.assert_allclose(by_id, scalar, rtol=1e-14, atol=0.0)  # SIMD pow may differ by 1 ulp


def test_vectorised_broadcasts() -> None:
    """One film for every surface, and every surface by its id."""
    mu = fr.friction_array(np.arange(len(fr.SURFACE_NAMES)), 1.0)
    expected = [fr.friction(name, 1.0) for name in fr.SURFACE_NAMES]
    np.testing.assert_allclose(mu, expected, rtol=1e-14, atol=0.0)
    grid = fr.friction_array(np.arange(len(fr.SURFACE_NAMES))[:, None], np.array(REPORT_FILMS_MM)[None, :])
    assert grid.shape == (len(fr.SURFACE_NAMES), len(REPORT_FILMS_MM))
    assert fr.friction_array([], []).shape == (0,)


def test_surface_lookup() -> None:
    assert fr.get_surface("ice") is fr.SURFACES["ice"]
    assert fr.get_surface(fr.SURFACES["ice"]) is fr.SURFACES["ice"]
    assert fr.SURFACE_NAMES[fr.surface_index("gravel")] == "gravel"
    assert fr.friction(fr.SURFACES["dirt"], 1.0) == pytest.approx(0.2)
    with pytest.raises(TypeError):
        fr.SURFACES["asphalt"] = fr.SURFACES["ice"]  # type: ignore[index]


def test_surface_validation() -> None:
    with pytest.raises(UserError, match="wet_mu <= dry_mu"):
        fr.Surface("odd", "wetter is grippier", 0.5, 0.6)
    with pytest.raises(UserError, match="wet_mu"):
        fr.Surface("slick", "below the floor", 0.1, 0.01)
