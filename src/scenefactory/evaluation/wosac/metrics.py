"""WOSAC scenario metrics: per-feature likelihoods, the meta-metric, the bucket scores, (min)ADE and the
simulated event rates, from the features of the logged scene and of the rollouts.

Follows ``wdl_limited/sim_agents_metrics/metrics.py`` (``compute_scenario_metrics_for_features_bundle``,
``aggregate_scenario_metrics``, ``aggregate_metrics_to_buckets``, ``_compute_metametric``):

- kinematic likelihoods are averaged over the logged steps whose neighbours are valid (speeds) or
  whose neighbours' neighbours are (accelerations), within the 80 simulated steps;
- distance to the nearest object and to the road edge over the logged valid steps; time to
  collision over the logged valid steps of vehicles;
- collision, off-road and traffic-light violation are "any event over the logged valid steps" per
  object (traffic lights: vehicles only), scored with the Bernoulli estimator;
- each likelihood is ``exp(mean log-likelihood)``; the meta-metric their weighted sum; a bucket the
  weighted mean of its features; a corpus figure the mean over scenarios of the scenario figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from scenefactory.evaluation.wosac.config import BUCKETS, CHALLENGE_2025, FEATURES, VEHICLE, WosacConfig
from scenefactory.evaluation.wosac.estimators import feature_log_likelihood
from scenefactory.evaluation.wosac.features import Features, kinematic_validity

RATES = ("simulated_collision_rate", "simulated_offroad_rate", "simulated_traffic_light_violation_rate")


def _mean_valid(x: torch.Tensor, valid: torch.Tensor) -> float:
    n = valid.sum()
    total = torch.where(valid, x, torch.zeros_like(x)).sum()
    return float(total / n.to(torch.float32))


def scenario_metrics(
    log: Features, sim: Features, object_type: torch.Tensor, config: WosacConfig = CHALLENGE_2025
) -> dict[str, float]:
    """One scenario's figures from the logged scene's features ``log`` (B = 1) and the rollouts'
    ``sim`` (B = R); ``object_type`` (E,) of the evaluated objects. Keys: ``<feature>_likelihood``
    for the ten features, ``metametric``, ``kinematic_metrics``, ``interactive_metrics``,
    ``map_based_metrics``, ``average_displacement_error``, ``min_average_displacement_error`` and the
    three ``simulated_*_rate``. A likelihood with no valid logged step is NaN (as 0/0 is in the
    official code) and makes the meta-metric NaN."""
    valid = log.valid[0]  # (E, T)
    speed_valid, accel_valid = kinematic_validity(valid)
    is_vehicle = object_type == VEHICLE
    veh_valid = valid & is_vehicle[:, None]
    out: dict[str, float] = {}
    for name, mask in (
        ("linear_speed", speed_valid),
        ("angular_speed", speed_valid),
        ("linear_acceleration", accel_valid),
        ("angular_acceleration", accel_valid),
        ("distance_to_nearest_object", valid),
        ("time_to_collision", veh_valid),
        ("distance_to_road_edge", valid),
    ):
        ll = feature_log_likelihood(config.feature(name), getattr(log, name)[0], getattr(sim, name))
        out[f"{name}_likelihood"] = float(torch.exp(torch.tensor(_mean_valid(ll, mask))))
    events = {
        "collision_indication": ("collision_per_step", valid),
        "offroad_indication": ("offroad_per_step", valid),
        "traffic_light_violation": ("traffic_light_violation_per_step", veh_valid),
    }
    indications: dict[str, torch.Tensor] = {}
    for name, (field, mask) in events.items():
        log_any = (getattr(log, field)[0] & mask).any(dim=-1)
        sim_any = (getattr(sim, field) & mask[None]).any(dim=-1)  # (R, E)
        indications[name] = sim_any
        ll = feature_log_likelihood(config.feature(name), log_any, sim_any)
        out[f"{name}_likelihood"] = float(torch.exp(ll.mean()))
    out["metametric"] = sum(config.feature(n).weight * out[f"{n}_likelihood"] for n in FEATURES)
    for bucket, names in BUCKETS.items():
        w = sum(config.feature(n).weight for n in names)
        out[f"{bucket}_metrics"] = sum(config.feature(n).weight * out[f"{n}_likelihood"] for n in names) / w
    out["average_displacement_error"] = float(sim.ade.mean())
    out["min_average_displacement_error"] = float(sim.ade.mean(dim=1).min())
    out["simulated_collision_rate"] = float(indications["collision_indication"].float().mean())
    out["simulated_offroad_rate"] = float(indications["offroad_indication"].float().mean())
    # The official rate counts violations over the logged valid steps of every object, not only vehicles.
    tl_any = (sim.traffic_light_violation_per_step & valid[None]).any(dim=-1)
    out["simulated_traffic_light_violation_rate"] = float(tl_any.float().mean())
    return out


def aggregate(per_scenario: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """``aggregate_scenario_metrics``: the mean over scenarios of every figure."""
    if not per_scenario:
        raise ValueError("aggregate: no scenario metrics")
    keys = [k for k, v in per_scenario[0].items() if isinstance(v, float | int)]
    return {k: sum(float(m[k]) for m in per_scenario) / len(per_scenario) for k in keys}


def buckets(metrics: Mapping[str, float], config: WosacConfig = CHALLENGE_2025) -> dict[str, float]:
    """``aggregate_metrics_to_buckets`` of aggregated figures: the realism meta-metric, the three bucket
    scores, minADE and the event rates."""
    out = {"realism_meta_metric": float(metrics["metametric"])}
    for bucket, names in BUCKETS.items():
        w = sum(config.feature(n).weight for n in names)
        out[f"{bucket}_metrics"] = (
            sum(config.feature(n).weight * metrics[f"{n}_likelihood"] for n in names) / w
        )
    out["min_ade"] = float(metrics["min_average_displacement_error"])
    for r in RATES:
        out[r] = float(metrics[r])
    return out
