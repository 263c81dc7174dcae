"""Standard vehicle manoeuvres on the physics tier, per road condition, with pass/fail checks.

Every manoeuvre drives the mujoco engine through the same normalized actions a policy sends
(``[steer, accel]``), one world per road condition, all conditions stepped together:

- **braking**: from 20 m/s, full brake (``accel = −1``) until stopped; the distance is compared with
  the tyre-limited ``v² / (2·μ_eff·g)``, where ``μ_eff = min(μ, a_brake/g)`` (the brake command asks
  for 8 m/s², so on a road with more grip than that the brakes, not the tyres, limit). Check:
  within ±20 %.
- **acceleration**: full throttle from rest for 30 s with the speed governor lifted; reports the
  0–100 km/h time (if reached) and the top speed. Check: the top speed is at least 25 m/s on
  dry roads (SceneFactory's PhysX car tops out near 5 m/s).
- **circle**: steady steering at 0.25 of full lock while the speed ramps up slowly (1 m/s²); the
  lateral acceleration (:func:`lateral_acceleration`) peaks where the tyres saturate. Check: the
  peak divided by μ·g lies within ±25 % of its mean over the conditions — the limit scales with μ.

Found on the way (physics, not a bug): with rear-wheel drive and no traction control, full throttle
on a wet or icy road spins the rear wheels, the rear loses lateral grip and the car yaws away, so
0–100 km/h and top speed are only meaningful on dry roads.

``validate_vehicle`` returns the JSON-ready results; ``plot_validation`` draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.engines import make_engine
from scenefactory.engines.base import Engine
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.scenes.friction import PRESETS, RoadCondition
from scenefactory.vehicles.car import GRAVITY_MPS2
from scenefactory.vehicles.params import VehicleParams

DEFAULT_CONDITIONS = ("dry", "wet", "ice")
POLICY_HZ = 30.0
BRAKE_SPEED_MPS = 20.0
KMH100_MPS = 100.0 / 3.6


def _engine(n: int, spec: EngineSpec, params: VehicleParams) -> Engine:
    return make_engine(spec, n, 1, dt=1.0 / POLICY_HZ, params=params)


def _start(engine: Engine, mu: np.ndarray, speed: float) -> None:
    n = engine.num_worlds
    ids = torch.arange(n)
    engine.set_friction(ids, torch.as_tensor(mu, dtype=torch.float32))
    engine.reset(ids, torch.zeros(n, 1, 3), torch.full((n, 1), speed), torch.ones(n, 1, dtype=torch.bool))


def _run(engine: Engine, action: tuple[float, float], seconds: float) -> dict[str, np.ndarray]:
    """Hold ``action`` for ``seconds``; returns time series (T, n) of position, speed, yaw rate."""
    n = engine.num_worlds
    act = torch.tensor(action, dtype=torch.float32).expand(n, 1, 2).clone()
    active = torch.ones(n, 1, dtype=torch.bool)
    rows: dict[str, list[np.ndarray]] = {
        "t": [],
        "x": [],
        "y": [],
        "vx": [],
        "vy": [],
        "speed": [],
        "yaw_rate": [],
    }
    for i in range(round(seconds * POLICY_HZ)):
        st = engine.step(act, active)
        rows["t"].append(np.full(n, (i + 1) / POLICY_HZ))
        rows["x"].append(st.pos_xy[:, 0, 0].numpy().astype(np.float64))
        rows["y"].append(st.pos_xy[:, 0, 1].numpy().astype(np.float64))
        rows["vx"].append(st.vel_xy[:, 0, 0].numpy().astype(np.float64))
        rows["vy"].append(st.vel_xy[:, 0, 1].numpy().astype(np.float64))
        rows["speed"].append(st.vel_xy[:, 0].norm(dim=-1).numpy().astype(np.float64))
        rows["yaw_rate"].append(st.yaw_rate[:, 0].numpy().astype(np.float64))
    return {k: np.stack(v) for k, v in rows.items()}


def lateral_acceleration(vx: np.ndarray, vy: np.ndarray, dt: float, window: int = 5) -> np.ndarray:
    """Acceleration of the centre of mass normal to its velocity, |v × a| / |v| [m/s²], (T, n).

    ``a`` is the finite difference of the world-frame velocity, averaged over ``window`` steps;
    unlike v·r it stays the physical lateral acceleration when the car slides or spins.
    """
    ax, ay = np.gradient(vx, dt, axis=0), np.gradient(vy, dt, axis=0)
    kernel = np.ones(window) / window
    ax = np.apply_along_axis(np.convolve, 0, ax, kernel, mode="same")
    ay = np.apply_along_axis(np.convolve, 0, ay, kernel, mode="same")
    speed = np.hypot(vx, vy)
    return np.where(speed > 0.5, np.abs(vx * ay - vy * ax) / np.maximum(speed, 1e-6), 0.0)


def validate_vehicle(
    conditions: Sequence[str] = DEFAULT_CONDITIONS, engine: EngineSpec = EngineSpec(tier="mujoco")
) -> dict[str, Any]:
    """Run the three manoeuvres for each named road condition (``friction.PRESETS``) on ``engine``,
    a spec of the physics tier (its rate and any actuator lag as given); the result names it
    (``engine_spec``) and its ``physics_hz``."""
    if engine.tier != "mujoco":
        raise UserError(
            f"vehicle validation drives the physics tier: expected an engine spec of tier 'mujoco', "
            f"got '{engine.tier}' (the checks measure tyre-limited braking and cornering)"
        )
    physics_hz = engine.physics_hz
    conds: list[RoadCondition] = [PRESETS[c] for c in conditions]
    mu = np.array([c.mu for c in conds])
    params = VehicleParams()
    n = len(conds)
    out: dict[str, Any] = {
        "engine_spec": engine.to_dict(),
        "physics_hz": physics_hz,
        "policy_hz": POLICY_HZ,
        "conditions": {},
    }

    brake = _engine(n, engine, params)
    _start(brake, mu, BRAKE_SPEED_MPS)
    b = _run(brake, (0.0, -1.0), 1.5 * BRAKE_SPEED_MPS / (GRAVITY_MPS2 * mu.min()) + 2.0)

    fast = _engine(n, engine, replace(params, max_speed_mps=80.0))
    _start(fast, mu, 0.0)
    a = _run(fast, (0.0, 1.0), 30.0)

    circle = _engine(n, engine, replace(params, max_speed_mps=80.0))
    _start(circle, mu, 2.0)
    c = _run(circle, (0.25, 0.25), 25.0)  # 0.25 · 4 m/s² = 1 m/s² speed ramp

    lat = lateral_acceleration(c["vx"], c["vy"], 1.0 / POLICY_HZ)
    peak_lat = lat.max(axis=0)
    ratio = peak_lat / (mu * GRAVITY_MPS2)
    for i, (name, cond) in enumerate(zip(conditions, conds, strict=True)):
        moving = b["speed"][:, i] > 0.05
        stop_idx = int(np.argmin(moving)) if not moving.all() else len(moving) - 1
        distance = float(np.hypot(b["x"][stop_idx, i], b["y"][stop_idx, i]))
        mu_eff = min(mu[i], params.max_brake_mps2 / GRAVITY_MPS2)
        predicted = BRAKE_SPEED_MPS**2 / (2.0 * mu_eff * GRAVITY_MPS2)
        reach = np.nonzero(a["speed"][:, i] >= KMH100_MPS)[0]
        t100 = float(a["t"][reach[0], i]) if reach.size else None
        top = float(a["speed"][:, i].max())
        checks = {
            "braking_within_20pct": bool(abs(distance / predicted - 1.0) <= 0.2),
            "stopped": bool(not moving[stop_idx]),
        }
        if cond.mu >= 0.5:
            checks["top_speed_at_least_25mps"] = bool(top >= 25.0)
        out["conditions"][name] = {
            "surface": cond.surface,
            "water_film_mm": cond.water_film_mm,
            "mu": float(mu[i]),
            "braking_from_mps": BRAKE_SPEED_MPS,
            "braking_distance_m": distance,
            "braking_predicted_m": predicted,
            "braking_ratio": distance / predicted,
            "time_0_100_kmh_s": t100,
            "top_speed_mps": top,
            "max_lateral_accel_mps2": float(peak_lat[i]),
            "lateral_over_mu_g": float(ratio[i]),
            "checks": checks,
        }
    scale_ok = bool(np.all(np.abs(ratio / ratio.mean() - 1.0) <= 0.25)) if n > 1 else True
    out["lateral_limit_scales_with_mu"] = scale_ok
    out["passed"] = scale_ok and all(all(v["checks"].values()) for v in out["conditions"].values())
    out["series"] = {
        "braking": {"t": b["t"][:, 0].tolist(), "speed": b["speed"].T.tolist()},
        "acceleration": {"t": a["t"][:, 0].tolist(), "speed": a["speed"].T.tolist()},
        "circle": {"speed": c["speed"].T.tolist(), "lateral_accel": lat.T.tolist()},
    }
    return out


def plot_validation(result: dict[str, Any], path: Path) -> Path:
    """Four panels: braking distance vs prediction, speed traces, top speed, lateral limit vs μ."""
    # pyplot only here, after choosing the headless backend
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scenefactory.evaluation.plots import save_png

    names = list(result["conditions"])
    cond = result["conditions"]
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    x = np.arange(len(names))
    ax[0, 0].bar(x - 0.2, [cond[n]["braking_distance_m"] for n in names], 0.4, label="measured")
    ax[0, 0].bar(x + 0.2, [cond[n]["braking_predicted_m"] for n in names], 0.4, label="v²/(2μg)")
    ax[0, 0].set_xticks(x, [f"{n}\nμ={cond[n]['mu']:.2f}" for n in names])
    ax[0, 0].set_ylabel("stopping distance from 20 m/s [m]")
    ax[0, 0].set_title("straight-line braking")
    ax[0, 0].legend()
    s = result["series"]
    for i, n in enumerate(names):
        ax[0, 1].plot(s["braking"]["t"], s["braking"]["speed"][i], label=f"brake, {n}")
        ax[1, 0].plot(s["acceleration"]["t"], s["acceleration"]["speed"][i], label=n)
        ax[1, 1].plot(
            s["circle"]["speed"][i], s["circle"]["lateral_accel"][i], label=f"{n} (μ={cond[n]['mu']:.2f})"
        )
        ax[1, 1].axhline(cond[n]["mu"] * GRAVITY_MPS2, ls=":", color=ax[1, 1].lines[-1].get_color())
    ax[0, 1].set_xlabel("time [s]")
    ax[0, 1].set_ylabel("speed [m/s]")
    ax[0, 1].set_title("braking speed traces")
    ax[0, 1].set_xlim(0, max(c["braking_distance_m"] for c in cond.values()) / 10 + 1)
    ax[0, 1].legend()
    ax[1, 0].axhline(KMH100_MPS, ls=":", color="k", label="100 km/h")
    ax[1, 0].axhline(25.0, ls="--", color="grey", label="25 m/s")
    ax[1, 0].set_xlabel("time [s]")
    ax[1, 0].set_ylabel("speed [m/s]")
    ax[1, 0].set_title("full throttle from rest (governor lifted)")
    ax[1, 0].legend()
    ax[1, 1].set_xlabel("speed [m/s]")
    ax[1, 1].set_ylabel("lateral acceleration [m/s²]")
    ax[1, 1].set_title("steady steer, speed ramp (dotted: μ·g)")
    ax[1, 1].legend()
    for a_ in ax.flat:
        a_.grid(alpha=0.3)
    verdict = "PASS" if result["passed"] else "FAIL"
    fig.suptitle(f"vehicle validation at {result['physics_hz']:g} Hz physics: {verdict}")
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)
    return path
