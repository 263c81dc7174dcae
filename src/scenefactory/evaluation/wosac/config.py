"""The Waymo Open Sim Agents Challenge (WOSAC) 2025 configuration, as constants and frozen dataclasses.

Sources (waymo-open-dataset 1.6.7, ``src/waymo_open_dataset``):

- ``wdl_limited/sim_agents_metrics/challenge_2025_sim_agents_config.textproto``: per feature the
  estimator (histogram range, bins, additive-smoothing pseudocount, or Bernoulli), whether time steps
  are pooled (``independent_timesteps``), and the meta-metric weight;
- ``protos/sim_agents_metrics.proto``: the Bernoulli estimator's default pseudocount, 0.001 (the 2025
  config leaves it at its default: ``bernoulli: {}``);
- ``utils/sim_agents/submission_specs.py``: ``current_time_index`` 10, 80 simulated steps of 0.1 s,
  32 rollouts; every object valid at the current step is simulated; the SDC and the tracks to
  predict are evaluated;
- ``wdl_limited/sim_agents_metrics/metrics.py``: the three buckets (kinematic, interactive,
  map-based) and their order.
"""

from __future__ import annotations

from dataclasses import dataclass

CURRENT_TIME_INDEX = 10
"""Index of the current step in a WOMD scenario (``submission_specs``)."""
N_SIMULATION_STEPS = 80
"""Simulated steps after the current one (``submission_specs``)."""
N_ROLLOUTS = 32
"""Parallel rollouts of a submission (``submission_specs``)."""
STEP_S = 0.1
"""Seconds a step (``submission_specs.STEP_DURATION_SECONDS``)."""
N_STEPS = CURRENT_TIME_INDEX + 1 + N_SIMULATION_STEPS
"""Steps of a WOMD scenario: 11 of history (current included) and 80 of future."""

# Constants of the feature files (interaction_features.py, map_metric_features.py).
COLLISION_DISTANCE_THRESHOLD_M = 0.0
CORNER_ROUNDING_FACTOR = 0.7
MAX_HEADING_DIFF_RAD = 75.0 * 3.141592653589793 / 180.0
MAX_HEADING_DIFF_FOR_SMALL_OVERLAP_RAD = 10.0 * 3.141592653589793 / 180.0
SMALL_OVERLAP_THRESHOLD_M = 0.5
MAXIMUM_TIME_TO_COLLISION_S = 5.0
OFFROAD_DISTANCE_THRESHOLD_M = 0.0
CYCLIC_MAP_FEATURE_TOLERANCE_M2 = 1.0
Z_STRETCH_FACTOR = 3.0
EXTREMELY_LARGE_DISTANCE = 1e10

VEHICLE = 1
"""``Track.ObjectType.TYPE_VEHICLE``: time to collision and traffic lights are scored for vehicles only."""
LANE_STATE_ARROW_STOP = 1
LANE_STATE_STOP = 4
"""The two signal states ``traffic_light_features.py`` counts as red (flashing stop is not one)."""
SURFACE_STREET = 2
"""``LaneCenter.TYPE_SURFACE_STREET``: the only lanes the traffic-light feature matches objects to."""


@dataclass(frozen=True)
class FeatureConfig:
    """One feature's estimator and weight (``SimAgentMetricsConfig.FeatureConfig``).

    ``bernoulli`` features are scored per object as "any event over the valid steps" with a 2-bin
    histogram over [-0.5, 1.5]; the others with a ``num_bins`` histogram over ``[min_val, max_val]``
    (values clipped into it), the simulated values of an object pooled over rollouts and steps.
    """

    weight: float
    bernoulli: bool = False
    min_val: float = 0.0
    max_val: float = 0.0
    num_bins: int = 0
    pseudocount: float = 0.001

    def __post_init__(self) -> None:
        """A histogram needs a positive bin count and ``min_val < max_val``."""
        if not self.bernoulli and (self.num_bins < 1 or not self.min_val < self.max_val):
            raise ValueError(f"FeatureConfig: a histogram needs num_bins >= 1 and min_val < max_val: {self}")
        if self.pseudocount < 0 or self.weight < 0:
            raise ValueError(f"FeatureConfig: need pseudocount >= 0 and weight >= 0: {self}")


def _hist(lo: float, hi: float, bins: int, weight: float) -> FeatureConfig:
    return FeatureConfig(weight=weight, min_val=lo, max_val=hi, num_bins=bins, pseudocount=0.1)


@dataclass(frozen=True)
class WosacConfig:
    """The ten features' estimators and weights; :data:`CHALLENGE_2025` is the 2025 challenge's."""

    linear_speed: FeatureConfig
    linear_acceleration: FeatureConfig
    angular_speed: FeatureConfig
    angular_acceleration: FeatureConfig
    distance_to_nearest_object: FeatureConfig
    collision_indication: FeatureConfig
    time_to_collision: FeatureConfig
    distance_to_road_edge: FeatureConfig
    offroad_indication: FeatureConfig
    traffic_light_violation: FeatureConfig

    def feature(self, name: str) -> FeatureConfig:
        """The config of feature ``name`` (one of :data:`FEATURES`)."""
        if name not in FEATURES:
            raise KeyError(f"unknown WOSAC feature {name!r}; expected one of {FEATURES}")
        cfg: FeatureConfig = getattr(self, name)
        return cfg


CHALLENGE_2025 = WosacConfig(
    linear_speed=_hist(0.0, 25.0, 10, 0.05),
    linear_acceleration=_hist(-12.0, 12.0, 11, 0.05),
    angular_speed=_hist(-0.628, 0.628, 11, 0.05),
    angular_acceleration=_hist(-3.14, 3.14, 11, 0.05),
    distance_to_nearest_object=_hist(-5.0, 40.0, 10, 0.10),
    collision_indication=FeatureConfig(weight=0.25, bernoulli=True),
    time_to_collision=_hist(0.0, 5.0, 10, 0.10),
    distance_to_road_edge=_hist(-20.0, 40.0, 10, 0.05),
    offroad_indication=FeatureConfig(weight=0.25, bernoulli=True),
    traffic_light_violation=FeatureConfig(weight=0.05, bernoulli=True),
)
"""``challenge_2025_sim_agents_config.textproto``: the weights sum to 1."""

BUCKETS: dict[str, tuple[str, ...]] = {
    "kinematic": ("linear_speed", "linear_acceleration", "angular_speed", "angular_acceleration"),
    "interactive": ("distance_to_nearest_object", "collision_indication", "time_to_collision"),
    "map_based": ("distance_to_road_edge", "offroad_indication", "traffic_light_violation"),
}
"""``metrics._METRIC_FIELD_NAMES_BY_BUCKET``."""
FEATURES: tuple[str, ...] = BUCKETS["kinematic"] + BUCKETS["interactive"] + BUCKETS["map_based"]
"""The ten features in the order of ``metrics._METRIC_FIELD_NAMES``."""
