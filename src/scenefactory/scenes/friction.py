"""Peak tyre–road friction coefficient μ from the road surface and the water film on it.

Each simulated world gets one road friction coefficient (``Scene.friction``, passed to
``Engine.set_friction``). This module computes it from a named surface and a water film depth
h [mm] (0 = dry, ~12 mm = flooded), or from a rain rate [mm/h] through a stated mapping.
Speed does not enter: the values stand for ordinary road speeds (the Bosch-style figures below are
at 50 km/h); aquaplaning, the sharp fall of μ with speed in standing water, is not modelled.

**1. Zhao asphalt curve** (:func:`zhao_asphalt_mu`). Zhao, Zhao & Cai 2024 (IJTST 14:99–109), a
lumped LuGre-type model calibrated on GripTester data, give for asphalt concrete (AC)
μ = 1.174 (dry), 0.944 (0.5 mm), 0.506 (5 mm), 0.408 (12 mm). We pass a monotone Hill
(log-logistic) curve exactly through these four points::

    μ_AC(h) = μ_∞ + (μ_0 − μ_∞) / (1 + (h / h_0)^q)
    μ_0 = 1.174,  μ_∞ = 0.315475792024,  h_0 = 1.39260983149 mm,  q = 0.981420471001

(μ_∞, h_0, q solved from the three wet points; residuals < 1e-12). It falls monotonically,
stays above μ_∞ for any film, and gives e.g. 0.814 at 1 mm and 0.669 at 2 mm (not data).
The paper's other mixes differ by the texture influence coefficient θ, which it ties to the
real tyre–pavement contact patch: AC θ = 1.00 (mean texture depth 0.65 mm), stone mastic
asphalt SMA θ = 1.09 (0.80 mm), open-graded friction course OGFC θ = 1.21 (1.08 mm). We read θ
as a factor on the friction force and use μ_mix(h) = θ · μ_AC(h). That is our assumption: the
reference gives the AC points only, so the SMA and OGFC curves are not checked against data.

**2. Per-surface model** (:func:`friction`, :func:`friction_array`, :data:`SURFACES`)::

    μ(s, h) = max(μ_dry(s) · r(h)^k(s), MU_FLOOR),   r(h) = μ_AC(h) / μ_AC(0)
    k(s) = ln(μ_wet(s) / μ_dry(s)) / ln(r(h_wet)),   h_wet = REFERENCE_WET_FILM_MM = 1 mm

r is Zhao's AC curve normalised to its dry value; the exponent k scales its log, so every
surface keeps Zhao's shape, stays positive and is non-increasing in h, and μ(s, h_wet) = μ_wet(s)
exactly. μ_dry and μ_wet are the midpoints of the ranges in the literature table of peak μ for
passenger tyres (as quoted in the project reference)::

    surface       table dry   table wet   μ_dry   μ_wet    k       μ(12 mm)
    asphalt       0.70–0.90   0.45–0.60   0.800   0.525   1.150   0.237
    concrete      0.75–0.90   0.50–0.60   0.825   0.550   1.107   0.256
    gravel        0.35–0.70   0.40–0.50   0.525   0.450   0.421   0.337
    dirt          0.50–0.60   0.15–0.25   0.550   0.200   2.761   0.050 (floor)
    packed_snow   0.20–0.35   —           0.275   0.200   0.869   0.110
    ice           0.05–0.15   —           0.100   0.050   1.892   0.050 (floor)

- h_wet = 1 mm: the Bosch-style figures at 50 km/h (dry 0.85, wet 0.2 mm 0.65, heavy rain 1 mm
  0.55, puddles 2 mm 0.5, black ice ≤ 0.1) put 1 mm inside the table's asphalt wet range, and
  with h_wet = 1 mm the asphalt exponent is near 1 (Zhao's shape almost unchanged). Our asphalt
  gives 0.800 / 0.713 / 0.525 / 0.419 at 0 / 0.2 / 1 / 2 mm against Bosch's 0.85 / 0.65 / 0.55 / 0.5
  (ratios to dry 0.89 / 0.66 / 0.52 against Bosch's 0.76 / 0.65 / 0.59).
- Snow and ice have no wet value in the table. We assume water (melt, slush) makes them no
  better and takes them to the low end of their dry range at h_wet: μ_wet = 0.20 and 0.05.
- Consequences kept from the table: gravel, whose wet range barely differs from its dry one,
  loses little to water and overtakes asphalt and concrete past ~2 mm; dirt turns to mud and
  drops below packed snow past 1 mm (both 0.20 there). Dry, paved > gravel > packed snow > ice.
- MU_FLOOR = 0.05 is the lowest peak μ in the table (ice). Below it the power law would
  extrapolate far past every source (flooded dirt 0.03, flooded ice 0.01 at 12 mm), so we clip there;
  taking a max keeps μ non-increasing in h.
- The sources disagree on dry asphalt: Zhao's 1.174 is a lumped-model peak on one calibrated AC
  pavement, above the table (0.70–0.90) and Bosch (0.85). The per-surface model uses the table's
  0.80 (it covers all surfaces on one basis and matches the engines' ≈ 0.8 g dry braking limit)
  and takes only the *shape* of the wet reduction from Zhao.

**3. Rain → water film** (:func:`water_film_from_rain`), the simple mapping the project reference
accepts when stated, not a measured relation::

    h = clamp(RAIN_FILM_MM_PER_MM_H · rain_mm_per_h · drainage, 0, MAX_RAIN_FILM_MM)
      = clamp(0.05 mm/(mm/h) · rain · drainage, 0, 3 mm)

drainage = 1 for a normally drained road, > 1 for a poorly drained one. With drainage 1, 4 mm/h
gives Bosch's 0.2 mm "wet" film and 20 mm/h its 1 mm "heavy rain" film; deeper films (puddles,
flooding) come from setting h directly.

**4. Presets** (:data:`PRESETS`): ``dry`` asphalt 0 mm (0.800); ``wet`` asphalt at h_wet = 1 mm
(0.525, the table's wet midpoint; Bosch calls this film "heavy rain"); ``heavy_rain`` asphalt at
3 mm, the deepest film the rain mapping gives (≥ 60 mm/h; 0.363); ``flooded`` asphalt at 12 mm,
Zhao's deepest film (0.237); ``snow`` dry packed snow (0.275); ``ice`` dry ice (0.100, Bosch's
black ice ≤ 0.1).
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from scenefactory.errors import UserError

# Zhao, Zhao & Cai 2024: AC reference points and the Hill curve through them (module docstring, 1.)
ZHAO_AC_POINTS: tuple[tuple[float, float], ...] = ((0.0, 1.174), (0.5, 0.944), (5.0, 0.506), (12.0, 0.408))
_ZHAO_MU_DRY = 1.174
_ZHAO_MU_INF = 0.315475792024
_ZHAO_H0_MM = 1.39260983149
_ZHAO_EXPONENT = 0.981420471001

REFERENCE_WET_FILM_MM = 1.0  # film at which each surface takes its table "wet" value
MU_FLOOR = 0.05  # lowest peak μ in the literature table (ice); no surface goes below it
RAIN_FILM_MM_PER_MM_H = 0.05  # film depth [mm] per rain rate [mm/h], before drainage
MAX_RAIN_FILM_MM = 3.0  # rain alone never makes a deeper film than this
FLOODED_FILM_MM = 12.0  # Zhao's deepest calibrated film


@dataclass(frozen=True)
class AsphaltMix:
    """An asphalt mix of Zhao et al. 2024: texture influence coefficient θ and mean texture depth."""

    name: str
    theta: float  # texture influence coefficient, relative to AC
    mean_texture_depth_mm: float


ASPHALT_MIXES: Mapping[str, AsphaltMix] = types.MappingProxyType(
    {
        "AC": AsphaltMix("AC", 1.00, 0.65),
        "SMA": AsphaltMix("SMA", 1.09, 0.80),
        "OGFC": AsphaltMix("OGFC", 1.21, 1.08),
    }
)


def _zhao_ratio(h_mm: np.ndarray) -> np.ndarray:
    """Zhao's AC curve normalised to its dry value, r(h) = μ_AC(h) / μ_AC(0), in (0, 1]."""
    mu = _ZHAO_MU_INF + (_ZHAO_MU_DRY - _ZHAO_MU_INF) / (1.0 + (h_mm / _ZHAO_H0_MM) ** _ZHAO_EXPONENT)
    return mu / _ZHAO_MU_DRY


@dataclass(frozen=True)
class Surface:
    """A road surface: peak μ dry and at the reference wet film (``REFERENCE_WET_FILM_MM``).

    ``dry_mu`` and ``wet_mu`` are midpoints of the literature table's ranges (module docstring);
    ``wet_exponent`` k follows from them so that μ(REFERENCE_WET_FILM_MM) = ``wet_mu``.
    """

    name: str
    description: str
    dry_mu: float
    wet_mu: float

    def __post_init__(self) -> None:
        if not (MU_FLOOR <= self.wet_mu <= self.dry_mu and math.isfinite(self.dry_mu)):
            raise UserError(
                f"surface {self.name!r}: need {MU_FLOOR} <= wet_mu <= dry_mu, "
                f"got wet_mu={self.wet_mu!r}, dry_mu={self.dry_mu!r}"
            )

    @property
    def wet_exponent(self) -> float:
        """k in μ = dry_mu · r(h)^k (dimensionless, ≥ 0)."""
        r_wet = float(_zhao_ratio(np.asarray(REFERENCE_WET_FILM_MM)))
        return math.log(self.wet_mu / self.dry_mu) / math.log(r_wet)


SURFACES: Mapping[str, Surface] = types.MappingProxyType(
    {
        s.name: s
        for s in (
            Surface("asphalt", "asphalt concrete", 0.800, 0.525),
            Surface("concrete", "cement concrete", 0.825, 0.550),
            Surface("gravel", "gravel / crushed stone", 0.525, 0.450),
            Surface("dirt", "dirt road", 0.550, 0.200),
            Surface("packed_snow", "packed snow", 0.275, 0.200),
            Surface("ice", "ice", 0.100, 0.050),
        )
    }
)
SURFACE_NAMES: tuple[str, ...] = tuple(SURFACES)  # index order of surface ids in friction_array


def get_surface(surface: str | Surface) -> Surface:
    """The ``Surface`` named ``surface`` (a ``Surface`` passes through); ``UserError`` if unknown."""
    if isinstance(surface, Surface):
        return surface
    if isinstance(surface, str) and surface in SURFACES:
        return SURFACES[surface]
    raise UserError(f"unknown road surface {surface!r}; valid surfaces: {', '.join(SURFACE_NAMES)}")


def surface_index(surface: str) -> int:
    """The id of ``surface`` in ``SURFACE_NAMES`` (for one-hot encodings and ``friction_array``)."""
    return SURFACE_NAMES.index(get_surface(surface).name)


def _check_nonnegative(value: float, what: str) -> float:
    """``value`` as a float if it is a finite number ≥ 0, else ``UserError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise UserError(f"{what} must be a number, got {value!r}")
    if not (math.isfinite(value) and value >= 0.0):
        raise UserError(f"{what} must be a finite number >= 0, got {value!r}")
    return float(value)


def _check_film_array(water_film_mm: ArrayLike) -> np.ndarray:
    """``water_film_mm`` as a float64 array; ``UserError`` naming the first negative or non-finite value."""
    h = np.asarray(water_film_mm, dtype=np.float64)
    bad = ~(np.isfinite(h) & (h >= 0.0))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise UserError(f"water_film_mm must be finite and >= 0 [mm], got {h[idx]!r} at index {idx}")
    return h


def zhao_asphalt_mu(water_film_mm: float, mix: str = "AC") -> float:
    """Peak μ of Zhao et al. 2024 for asphalt ``mix`` (AC, SMA, OGFC) under a water film [mm].

    μ_mix(h) = θ_mix · μ_AC(h), with μ_AC the Hill curve through Zhao's AC points (module
    docstring, 1.). Dry AC gives 1.174, a lumped-model peak above the per-surface ``asphalt``.
    """
    if mix not in ASPHALT_MIXES:
        raise UserError(f"unknown asphalt mix {mix!r}; valid mixes: {', '.join(ASPHALT_MIXES)}")
    h = _check_nonnegative(water_film_mm, "water_film_mm")
    return ASPHALT_MIXES[mix].theta * _ZHAO_MU_DRY * float(_zhao_ratio(np.asarray(h)))


def _mu(dry_mu: np.ndarray, exponent: np.ndarray, h_mm: np.ndarray) -> np.ndarray:
    """μ = max(dry_mu · r(h)^k, MU_FLOOR), elementwise with broadcasting."""
    return np.maximum(dry_mu * _zhao_ratio(h_mm) ** exponent, MU_FLOOR)


def friction(surface: str | Surface, water_film_mm: float = 0.0) -> float:
    """Peak tyre–road μ of ``surface`` under a water film of ``water_film_mm`` [mm] (0 = dry).

    μ = max(μ_dry · r(h)^k, 0.05); see the module docstring for the curve and its sources.
    Non-increasing in the film depth; ``UserError`` for an unknown surface or a negative/NaN film.
    """
    s = get_surface(surface)
    h = _check_nonnegative(water_film_mm, "water_film_mm")
    return float(_mu(np.asarray(s.dry_mu), np.asarray(s.wet_exponent), np.asarray(h)))


def friction_array(surfaces: Sequence[str] | np.ndarray, water_film_mm: ArrayLike) -> np.ndarray:
    """Vectorised :func:`friction`: μ for each (surface, film) pair, broadcast together.

    ``surfaces``: surface names, or integer ids into ``SURFACE_NAMES``, shape (...).
    ``water_film_mm``: film depths [mm], shape broadcastable with ``surfaces``.
    Returns float64 μ of the broadcast shape; equal to the scalar :func:`friction` elementwise
    (to float rounding: numpy's SIMD power may differ in the last bit).
    """
    ids = np.asarray(surfaces)
    if ids.size == 0:
        ids = ids.astype(np.int64)
    if ids.dtype.kind in "US":
        ids = np.vectorize(surface_index, otypes=[np.int64])(ids)
    elif ids.dtype.kind in "iu":
        bad = (ids < 0) | (ids >= len(SURFACE_NAMES))
        if bad.any():
            raise UserError(
                f"surface id {int(ids[bad].flat[0])} out of range; valid ids 0..{len(SURFACE_NAMES) - 1} "
                f"({', '.join(SURFACE_NAMES)})"
            )
    else:
        raise UserError(f"surfaces must be surface names or integer ids, got dtype {ids.dtype}")
    h = _check_film_array(water_film_mm)
    dry = np.array([s.dry_mu for s in SURFACES.values()])
    exponent = np.array([s.wet_exponent for s in SURFACES.values()])
    return _mu(dry[ids], exponent[ids], h)


def water_film_from_rain(rain_mm_per_h: float, drainage: float = 1.0) -> float:
    """Water film depth [mm] from a rain rate [mm/h]: clamp(0.05 · rain · drainage, 0, 3 mm).

    ``drainage`` (dimensionless, > 0) is 1 for a normally drained road and larger for a poorly
    drained one. A stated modelling assumption, not a measured relation (module docstring, 3.).
    """
    rain = _check_nonnegative(rain_mm_per_h, "rain_mm_per_h")
    d = _check_nonnegative(drainage, "drainage")
    if d == 0.0:
        raise UserError(f"drainage must be > 0, got {drainage!r}")
    return min(RAIN_FILM_MM_PER_MM_H * rain * d, MAX_RAIN_FILM_MM)


@dataclass(frozen=True)
class RoadCondition:
    """A world's road: surface name and water film depth [mm]; ``mu`` is its peak friction."""

    surface: str
    water_film_mm: float = 0.0

    def __post_init__(self) -> None:
        get_surface(self.surface)
        _check_nonnegative(self.water_film_mm, "water_film_mm")

    @property
    def mu(self) -> float:
        """Peak tyre–road friction coefficient (dimensionless)."""
        return friction(self.surface, self.water_film_mm)

    @classmethod
    def from_rain(cls, surface: str, rain_mm_per_h: float, drainage: float = 1.0) -> RoadCondition:
        """The road under rain of ``rain_mm_per_h`` [mm/h], film by :func:`water_film_from_rain`."""
        return cls(surface, water_film_from_rain(rain_mm_per_h, drainage))


PRESETS: Mapping[str, RoadCondition] = types.MappingProxyType(
    {
        "dry": RoadCondition("asphalt", 0.0),
        "wet": RoadCondition("asphalt", REFERENCE_WET_FILM_MM),  # table "wet": μ = 0.525
        "heavy_rain": RoadCondition("asphalt", MAX_RAIN_FILM_MM),  # deepest film rain makes
        "flooded": RoadCondition("asphalt", FLOODED_FILM_MM),
        "snow": RoadCondition("packed_snow", 0.0),
        "ice": RoadCondition("ice", 0.0),  # Bosch black ice ≤ 0.1
    }
)


def preset(name: str) -> RoadCondition:
    """The named road condition of ``PRESETS``; ``UserError`` listing the valid names if unknown."""
    if name not in PRESETS:
        raise UserError(f"unknown road condition preset {name!r}; valid presets: {', '.join(PRESETS)}")
    return PRESETS[name]
