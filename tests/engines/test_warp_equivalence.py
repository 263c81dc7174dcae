"""The mujoco-warp tier against the mujoco tier: same scenes, same actions, the same answers.

MuJoCo Warp (here on Warp's CPU device; ``benchmarks/gpu_check.sh`` runs this file on a GPU with
``SCENEFACTORY_TEST_DEVICE=cuda``) computes in float32 and MuJoCo C in float64, with the same model,
integrator and solver, so the two agree within a tolerance, not bit for bit. What is pinned, with
the tolerance each check states (measured here: 10-1000x inside them):

- **trajectories** of cars that never touch, over 3 s of steering, throttle and braking on three
  road frictions: positions within 1 cm, headings within 2 mrad, speeds within 1 cm/s at every
  step (measured ≤ 0.3 mm). Cars that collide diverge sooner (a crash amplifies any difference),
  so the crash check is only that both engines report it, on the same policy step;
- **braking distance** from 20 m/s and the **peak lateral acceleration** of a speed ramp on a
  steady steer (``validate vehicle``'s manoeuvres, shortened) on dry, wet and heavy-rain roads:
  within ±5 % of each other (measured within 0.01 %);
- **Go1**: standing on the PD home pose holds the same height (within 5 mm), and the shipped
  policy walking at 1 m/s reaches the same forward speed (within 0.05 m/s) and height (within
  5 mm) without a fall, over 3 s (measured within 1e-5).

One module-scoped pair of engines per model: Warp compiles its kernels once per process (about a
minute on two cores with an empty ``~/.cache/warp``, a few seconds from the cache) and each engine
records its step graph once.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
import torch

from scenefactory.engines import EngineSpec, make_engine
from scenefactory.engines.base import Engine
from scenefactory.engines.mjwarp import PhysicsBackend
from scenefactory.evaluation.vehicle import lateral_acceleration
from scenefactory.go1.config import Go1TaskConfig, nominal
from scenefactory.go1.env import Go1Env
from scenefactory.go1.jobs import SHIPPED_POLICY
from scenefactory.go1.train import load_go1_policy
from scenefactory.scenes.friction import PRESETS

DEVICE = os.environ.get("SCENEFACTORY_TEST_DEVICE", "cpu")
"""Where the Warp engines run (the C engine is on the CPU; states are compared there)."""
POLICY_HZ = 30.0
W, K = 3, 2
CONDITIONS = ("dry", "wet", "heavy_rain")
MU = torch.tensor([PRESETS[c].mu for c in CONDITIONS])
TIERS = ("mujoco", "mujoco-warp")


@pytest.fixture(scope="module")
def cars() -> dict[str, Engine]:
    """One engine per tier: 3 worlds (dry, wet, heavy rain) of 2 cars, 30 Hz policy, 120 Hz physics."""
    torch.set_num_threads(1)
    return {
        tier: make_engine(
            EngineSpec(tier), W, K, dt=1.0 / POLICY_HZ, device=DEVICE if tier != "mujoco" else "cpu"
        )
        for tier in TIERS
    }


def start(engine: Engine, pose: torch.Tensor, speed_mps: float, valid: torch.Tensor | None = None) -> None:
    engine.set_friction(torch.arange(W), MU)
    ok = torch.ones(W, K, dtype=torch.bool) if valid is None else valid
    engine.reset(torch.arange(W), pose, torch.full((W, K), speed_mps), ok)


def run(engine: Engine, actions: list[torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """Step through ``actions`` (each (W, K, 2)); the states on the CPU, with the collisions."""
    on = torch.ones(W, K, dtype=torch.bool)
    out = []
    for a in actions:
        st = engine.step(a.to(engine.device), on.to(engine.device))
        hits = engine.collisions()
        out.append(
            {
                "pos_xy": st.pos_xy.cpu(),
                "yaw": st.yaw.cpu(),
                "speed": st.speed.cpu(),
                "vel_xy": st.vel_xy.cpu(),
                "hit": torch.zeros(W, K, dtype=torch.bool) if hits is None else hits.cpu(),
            }
        )
    return out


def both(
    cars: dict[str, Engine], pose: torch.Tensor, speed: float, actions: list[torch.Tensor], **kw
) -> list:
    results = []
    for tier in TIERS:
        start(cars[tier], pose, speed, **kw)
        results.append(run(cars[tier], actions))
    return results


def test_trajectories_agree_while_the_cars_keep_apart(cars: dict[str, Engine]) -> None:
    """3 s of a sinusoidal steer (±0.3 of full lock, period 1.5 s; the second car of each world
    steers the other way, 30 m aside) under throttle, then braking, then throttle again, from
    10 m/s on three road frictions at three headings: positions within 1 cm, headings within
    2 mrad, speeds within 1 cm/s at every policy step."""
    pose = torch.zeros(W, K, 3)
    pose[..., 1] = 30.0 * torch.arange(K)
    pose[..., 2] = torch.tensor([0.0, 0.7, -2.0])[:, None]
    actions = []
    for i in range(round(3 * POLICY_HZ)):
        t = (i + 1) / POLICY_HZ
        a = torch.empty(W, K, 2)
        a[..., 0] = 0.3 * math.sin(2 * math.pi * t / 1.5) * torch.tensor([1.0, -1.0])
        a[..., 1] = 0.6 if t < 1.0 else (-0.5 if t < 2.0 else 0.3)
        actions.append(a)
    c, w = both(cars, pose, 10.0, actions)
    for step, (a, b) in enumerate(zip(c, w, strict=True)):
        assert float((a["pos_xy"] - b["pos_xy"]).norm(dim=-1).max()) < 0.01, f"position at step {step}"
        assert float((a["yaw"] - b["yaw"]).abs().max()) < 2e-3, f"heading at step {step}"
        assert float((a["speed"] - b["speed"]).abs().max()) < 0.01, f"speed at step {step}"
        assert not a["hit"].any() and not b["hit"].any()
    moved = (c[-1]["pos_xy"] - pose[..., :2]).norm(dim=-1)
    assert float(moved.min()) > 20.0  # every car drove the whole program
    turned = torch.stack([s["yaw"] for s in c]) - pose[..., 2]
    assert float(turned.abs().amax(dim=0).min()) > 0.1  # and steered


def test_braking_distance_within_five_percent(cars: dict[str, Engine]) -> None:
    """Full brake from 20 m/s until stopped on dry, wet and heavy-rain roads: the distances of the
    two engines within ±5 % of each other (and each near v²/(2μg): the car stops on the tyres)."""
    valid = torch.tensor([[True, False]] * W)
    brake = [torch.tensor([0.0, -1.0]).expand(W, K, 2).clone()] * round(6 * POLICY_HZ)
    distances = []
    for result in both(cars, torch.zeros(W, K, 3), 20.0, brake, valid=valid):
        speed = torch.stack([s["speed"][:, 0] for s in result])  # (T, W)
        stop = (speed <= 0.05).float().argmax(dim=0)
        assert bool((speed[stop, torch.arange(W)] <= 0.05).all()), "a car did not stop"
        pos = torch.stack([s["pos_xy"][:, 0] for s in result])
        distances.append(pos[stop, torch.arange(W)].norm(dim=-1))
    c, w = distances
    assert torch.allclose(w, c, rtol=0.05, atol=0.0), f"C {c.tolist()} m, Warp {w.tolist()} m"
    mu_eff = MU.clamp(max=8.0 / 9.81)
    torch.testing.assert_close(c, 20.0**2 / (2 * mu_eff * 9.81), rtol=0.2, atol=0.0)


def test_lateral_acceleration_limit_within_five_percent(cars: dict[str, Engine]) -> None:
    """A steady steer (0.4 of full lock) while the speed ramps up (0.4 of full throttle) for 7 s:
    the peak lateral acceleration (``validate vehicle``'s measure) of the two engines within ±5 %
    of each other on every road, and it scales with μ (the tyres saturate in every world)."""
    valid = torch.tensor([[True, False]] * W)
    ramp = [torch.tensor([0.4, 0.4]).expand(W, K, 2).clone()] * round(7 * POLICY_HZ)
    peaks = []
    for result in both(cars, torch.zeros(W, K, 3), 2.0, ramp, valid=valid):
        vel = torch.stack([s["vel_xy"][:, 0] for s in result]).double().numpy()  # (T, W, 2)
        lat = lateral_acceleration(vel[..., 0], vel[..., 1], 1.0 / POLICY_HZ)
        peaks.append(torch.from_numpy(lat.max(axis=0)))
    c, w = peaks
    assert torch.allclose(w, c, rtol=0.05, atol=0.0), f"C {c.tolist()}, Warp {w.tolist()} m/s²"
    ratio = c / (MU.double() * 9.81)
    assert float(ratio.min()) > 0.7 and float(ratio.max()) < 1.1, ratio.tolist()


def test_a_head_on_crash_is_reported_on_the_same_step(cars: dict[str, Engine]) -> None:
    """Two cars 12 m apart closing at 16 m/s in world 0 (the others apart): both engines report the
    collision event, first on the same policy step, and none elsewhere."""
    pose = torch.zeros(W, K, 3)
    pose[:, 1, 1] = 30.0
    pose[0, 1] = torch.tensor([12.0, 0.0, math.pi])
    coast = [torch.zeros(W, K, 2)] * round(1 * POLICY_HZ)
    first = []
    for result in both(cars, pose, 8.0, coast):
        hits = torch.stack([s["hit"] for s in result])  # (T, W, K)
        assert bool(hits[:, 0].any(dim=0).all()) and not hits[:, 1:].any()
        first.append(int(hits[:, 0, 0].float().argmax()))
    assert first[0] == first[1], f"first contact at steps {first}"


# ------------------------------------------------------------------------------------------- Go1


@pytest.fixture(scope="module")
def go1() -> Iterator[dict[str, Go1Env]]:
    """One 4-robot nominal Go1 environment (no randomization, pushes or noise) per engine, with
    the shipped policy's commands (velocity, and body height/pitch/roll at nominal)."""
    shipped = load_go1_policy(SHIPPED_POLICY).task_cfg
    cfg = nominal(replace(Go1TaskConfig(num_envs=4), whole_body=shipped.whole_body))
    backends = {"mujoco": PhysicsBackend("mujoco"), "mujoco-warp": PhysicsBackend("mujoco-warp", DEVICE)}
    yield {tier: Go1Env(replace(cfg, physics=b), seed=3) for tier, b in backends.items()}


def go1_run(env: Go1Env, command: tuple[float, float, float], seconds: float, policy: bool) -> dict:
    """Reset every robot, hold ``command``; the shipped policy's mean actions (or zero actions, the
    PD home pose) for ``seconds``. Returns the (T, N) forward speeds and heights and the falls."""
    env.reset(np.arange(env.num_envs))
    env.hold_commands(np.tile(command, (env.num_envs, 1)))
    actor = load_go1_policy(SHIPPED_POLICY) if policy else None
    obs = env.observations()[0]
    vx, height, falls = [], [], 0
    for _ in range(round(seconds * env.cfg.policy_hz)):
        act = actor.act(obs) if actor is not None else torch.zeros(env.num_envs, env.num_actions)
        res = env.step(act)
        obs = res.actor_obs
        vx.append(res.state.lin_vel_b[:, 0].numpy())
        height.append(res.state.height_m.numpy())
        falls += int(res.terminated.sum())
    return {"vx": np.array(vx), "height": np.array(height), "falls": falls}


def test_go1_stands_at_the_same_height(go1: dict[str, Go1Env]) -> None:
    """Zero actions (the PD law holding the home pose) for 2 s: both engines hold the trunk at the
    same height, within 5 mm, and neither robot sinks or falls."""
    c, w = (go1_run(go1[tier], (0.0, 0.0, 0.0), 2.0, policy=False) for tier in TIERS)
    assert c["falls"] == w["falls"] == 0
    assert float(np.abs(c["height"] - w["height"]).max()) < 0.005
    assert float(c["height"][-25:].min()) > 0.2  # standing (the PD pose settles near 0.24 m), not lying
    assert float(np.abs(c["height"][-1] - c["height"][50]).max()) < 0.01  # and holds it (within 1 cm)


def test_go1_walks_at_the_same_speed(go1: dict[str, Go1Env]) -> None:
    """The shipped policy commanded 1 m/s forward for 3 s: mean forward speed over the last 2 s
    within 0.05 m/s of each other (and near the command), heights within 5 mm, no fall."""
    c, w = (go1_run(go1[tier], (1.0, 0.0, 0.0), 3.0, policy=True) for tier in TIERS)
    assert c["falls"] == w["falls"] == 0
    vc, vw = c["vx"][50:].mean(axis=0), w["vx"][50:].mean(axis=0)
    assert float(np.abs(vc - vw).max()) < 0.05, (vc, vw)
    assert float(np.abs(vc - 1.0).max()) < 0.2  # it walks
    assert float(np.abs(c["height"][50:].mean(0) - w["height"][50:].mean(0)).max()) < 0.005
