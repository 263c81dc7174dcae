"""``engines.mjwarp.WarpSim`` and the ``mujoco-warp`` car engine's own parts, on Warp's CPU device.

What the engine contract (``test_engine_contract.py``) and the equivalence with MuJoCo C
(``test_warp_equivalence.py``) do not pin: the recorded step graph gives exactly the numbers of
launching each kernel by hand; per-world model fields and numpy views share the simulation's memory;
a forward or reset of some worlds leaves the others' sensors alone; blown-up worlds and overflowed
contact buffers are named; a state of the C engine is refused; the torch control helpers are the
numpy ones; the device and backend choices are checked; and a randomized Go1 (per-world masses,
``set_const``) runs on Warp and resumes bit for bit.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
import torch

from scenefactory.engines.mjbatch import BatchedSim
from scenefactory.engines.mjwarp import PhysicsBackend, WarpSim, check_device, cuda_available, make_sim
from scenefactory.engines.warp_engine import WarpEngine, ackermann_angles, drive_ctrl, yaw_from_quat
from scenefactory.errors import UserError
from scenefactory.go1.config import Go1TaskConfig, nominal
from scenefactory.go1.env import Go1Env
from scenefactory.vehicles import car as car_np
from scenefactory.vehicles.car import CarIndex, CarParams, world_mjcf


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    """The road with one car per world."""
    return mujoco.MjModel.from_xml_string(world_mjcf(1))


def rolling(sim: WarpSim | BatchedSim, model: mujoco.MjModel, speeds: list[float]) -> None:
    """Each world's car rolling forward at its speed (wheels spinning to match)."""
    ix = CarIndex.from_model(model)
    qvel = sim.bind("qvel")
    qvel[:, ix.free_qvel[0, 0]] = speeds
    qvel[:, ix.wheel_qvel[0]] = np.array(speeds)[:, None] / CarParams().wheel_radius_m


def test_the_step_graph_gives_the_numbers_of_launching_each_kernel() -> None:
    """The same engine recorded into a graph and launched kernel by kernel: bit-identical states
    after four policy steps of random actions (and the graph did step: the cars moved)."""
    engines = [WarpEngine(2, 2, dt=1 / 30, graph=graph) for graph in (True, False)]
    pose = torch.tensor([[[0.0, 0.0, 0.0], [0.0, 10.0, 0.5]], [[5.0, 0.0, -1.0], [5.0, 10.0, 2.0]]])
    for e in engines:
        e.reset(torch.arange(2), pose, torch.full((2, 2), 6.0), torch.ones(2, 2, dtype=torch.bool))
    g = torch.Generator().manual_seed(3)
    on = torch.ones(2, 2, dtype=torch.bool)
    for _ in range(4):
        act = torch.rand(2, 2, 2, generator=g) * 2 - 1
        a, b = (e.step(act, on) for e in engines)
        assert torch.equal(a.pos_xy, b.pos_xy) and torch.equal(a.speed, b.speed)
    assert float((a.pos_xy - pose[..., :2]).norm(dim=-1).min()) > 0.5
    sa, sb = (e.sim.state_dict() for e in engines)
    assert all(torch.equal(sa["data"][f], sb["data"][f]) for f in sa["data"])


def test_views_and_per_world_fields_share_the_simulations_memory(model: mujoco.MjModel) -> None:
    """numpy arrays (``bind``, ``expand``) and torch views are the Warp arrays themselves on the CPU:
    a write through one is read through the other, and a per-world friction acts in its world only."""
    sim = WarpSim(model, 2)
    qpos = sim.bind("qpos")
    sim.tensor("qpos")[1, 0] = 42.0
    assert qpos[1, 0] == 42.0 and qpos.dtype == np.float32
    friction = sim.expand("geom_friction")
    assert friction.shape == (2, model.ngeom, 3)
    ground = CarIndex.from_model(model).ground_geom
    friction[0, ground, 0] = 0.1  # world 0 on ice, world 1 on the model's dry road
    assert float(sim.expand_tensor("geom_friction")[0, ground, 0]) == pytest.approx(0.1)
    sim.reset(np.arange(2))
    rolling(sim, model, [15.0, 15.0])
    ix = CarIndex.from_model(model)
    sim.expand("dof_frictionloss")[:, ix.wheel_qvel[0]] = CarParams().max_brake_torque_nm  # locked
    sim.step(60)
    sim.check_health("test")
    speed = sim.bind("qvel")[:, ix.free_qvel[0, 0]]
    assert speed[0] > speed[1] + 4.0  # half a second of locked wheels: the icy world slid on


def test_forward_and_reset_of_some_worlds_leave_the_others_sensors(model: mujoco.MjModel) -> None:
    """World 1's car is dropped onto its body (touch sensor on); ``forward([1])`` sees it there and
    nowhere else; ``reset([2])`` puts world 2 back at ``qpos0`` and leaves worlds 0 and 1."""
    sim = WarpSim(model, 3)
    rolling(sim, model, [5.0, 5.0, 5.0])
    sim.step(3)
    before = sim.bind("sensordata").copy()
    qpos = sim.bind("qpos")
    qpos[1, 2] = 0.2  # the car's centre 0.2 m above the road: its body box is in the ground
    sim.forward([1])
    after = sim.bind("sensordata")
    assert after[1, 0] > 0.0 and np.array_equal(after[[0, 2]], before[[0, 2]])
    moved = qpos[[0, 1]].copy()
    sim.reset([2])
    assert np.array_equal(qpos[2], model.qpos0.astype(np.float32)) and not sim.bind("qvel")[2].any()
    assert np.array_equal(qpos[[0, 1]], moved)


def test_blown_up_and_overflowed_worlds_are_named(model: mujoco.MjModel) -> None:
    """A NaN velocity in world 1 is reported naming world 1; contact buffers too small for the
    worlds' wheel contacts are reported as an overflow naming the sizes."""
    sim = WarpSim(model, 3)
    sim.step(1)
    sim.check_health("fine")
    sim.bind("qvel")[1, 0] = np.nan
    sim.step(1)
    with pytest.raises(FloatingPointError, match=r"NaN/inf\) in worlds \[1\]"):
        sim.check_health("hint")
    tight = WarpSim(model, 3, nconmax=1)
    tight.step(1)
    with pytest.raises(FloatingPointError, match=r"overflowed MuJoCo Warp's buffers .*nconmax 1"):
        tight.check_health("hint")


def test_a_state_of_the_c_engine_is_refused(model: mujoco.MjModel) -> None:
    """Same layout, float64: refused by name, nothing written; the Warp state itself round-trips."""
    sim = WarpSim(model, 2, expand=("geom_friction",))
    c = BatchedSim(model, 2, nthread=1)
    c.expand("geom_friction")
    untouched = sim.state_dict()
    with pytest.raises(ValueError, match=r"float64.*C engine"):
        sim.load_state_dict(c.state_dict())
    assert all(torch.equal(untouched["data"][f], v) for f, v in sim.state_dict()["data"].items())
    rolling(sim, model, [3.0, 4.0])
    sim.step(2)
    saved = sim.state_dict()
    other = WarpSim(model, 2, expand=("geom_friction",))
    other.load_state_dict(saved)
    sim.step(4)
    other.step(4)
    assert torch.equal(sim.tensor("qpos"), other.tensor("qpos"))


def test_torch_control_helpers_are_the_numpy_ones() -> None:
    """Ackermann angles, drive ctrl and heading in torch (float64) equal ``vehicles.car``'s numpy
    functions and the C engine's heading: the two physics tiers share one control law."""
    car = CarParams()
    g = torch.Generator().manual_seed(0)
    steer = (torch.rand(50, generator=g, dtype=torch.float64) - 0.5) * 1.4
    for mine, ref in zip(
        ackermann_angles(steer, car), car_np.ackermann_angles(steer.numpy(), car), strict=True
    ):
        np.testing.assert_allclose(mine.numpy(), ref, rtol=0, atol=1e-12)
    torque = (torch.rand(50, generator=g, dtype=torch.float64) - 0.3) * 3000
    omega = torch.rand(50, generator=g, dtype=torch.float64) * 250
    ref = car_np.drive_ctrl(torque.numpy(), omega.numpy(), car)
    np.testing.assert_allclose(drive_ctrl(torque, omega, car).numpy(), ref, rtol=0, atol=1e-9)
    from scenefactory.engines.mujoco_engine import yaw_from_quat as yaw_np

    q = torch.nn.functional.normalize(torch.randn(50, 4, generator=g, dtype=torch.float64), dim=-1)
    np.testing.assert_allclose(yaw_from_quat(q).numpy(), yaw_np(q.numpy()), rtol=0, atol=1e-12)


def test_device_and_backend_choices_are_checked() -> None:
    """A GPU is refused by name where torch or Warp see none; MuJoCo C is refused a GPU; an unknown
    engine or device is refused."""
    assert check_device("cpu") == torch.device("cpu")
    with pytest.raises(UserError, match="cpu or cuda"):
        check_device("tpu")
    if not cuda_available():
        with pytest.raises(UserError, match="sees no CUDA device"):
            check_device("cuda")
    with pytest.raises(ValueError, match="runs on the CPU"):
        PhysicsBackend("mujoco", "cuda")
    with pytest.raises(ValueError, match="physics engine must be one of"):
        PhysicsBackend("bullet")
    with pytest.raises(ValueError, match="cpu or cuda"):
        PhysicsBackend("mujoco-warp", "gpu0")


def test_a_randomized_go1_runs_on_warp_and_resumes_bit_for_bit() -> None:
    """Two randomized Go1 worlds (per-world masses, CoM and friction: ``set_const`` on Warp) step,
    save, and a fresh environment restored from the state steps exactly as the original."""
    cfg = replace(Go1TaskConfig(num_envs=2), physics=PhysicsBackend("mujoco-warp"))
    env = Go1Env(cfg, seed=1)
    assert isinstance(env.sim, WarpSim)
    mass = env.sim.expand("body_mass")
    assert not np.array_equal(mass[0], mass[1])  # drawn per world
    g = torch.Generator().manual_seed(2)
    acts = [torch.randn(2, env.num_actions, generator=g) * 0.3 for _ in range(6)]
    for a in acts[:3]:
        env.step(a)
    saved = env.state_dict()
    expected = [env.step(a).actor_obs for a in acts[3:]]
    other = Go1Env(cfg, seed=7)
    other.load_state_dict(saved)
    got = [other.step(a).actor_obs for a in acts[3:]]
    for e, r in zip(expected, got, strict=True):
        assert torch.equal(e, r)
    assert isinstance(make_sim(env.model, 1, PhysicsBackend()), BatchedSim)


def test_the_engine_and_device_flags_reach_the_jobs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cli_error: Callable[..., str]
) -> None:
    """``--engine mujoco-warp --device cpu`` reaches the driving and Go1 jobs as given; a GPU that is
    not there, MuJoCo C on a GPU and a GPU for ``collect`` are one line naming the flag, before any
    work."""
    from scenefactory.cli import main
    from scenefactory.go1 import jobs as go1_jobs
    from scenefactory.jobs import data, drive

    seen: dict[str, Any] = {}

    def job(name: str) -> Callable[[Any], dict[str, Any]]:
        def run(args: Any) -> dict[str, Any]:
            seen[name] = args
            raise SystemExit(0)

        return run

    monkeypatch.setattr(drive, "bench", job("drive"))
    monkeypatch.setattr(go1_jobs, "bench", job("go1"))
    monkeypatch.setattr(data, "collect", job("collect"))
    out = str(tmp_path / "b.json")
    with pytest.raises(SystemExit):
        main(["bench", "drive", "--engine", "mujoco-warp", "--device", "cpu", "--out", out])
    assert seen["drive"].engine.tier == "mujoco-warp" and seen["drive"].device == "cpu"
    with pytest.raises(SystemExit):
        main(["bench", "go1", "--engine", "mujoco-warp", "--out", str(tmp_path / "g")])
    assert seen["go1"].physics == PhysicsBackend("mujoco-warp", "cpu")
    # MuJoCo C on a GPU is refused (or, on a machine without one, the GPU)
    assert "--device cuda" in cli_error("bench", "go1", "--device", "cuda", "--out", str(tmp_path / "g"))
    if not cuda_available():
        for argv in (
            ["bench", "drive", "--engine", "mujoco-warp", "--device", "cuda", "--out", out],
            ["train", "go1", "--engine", "mujoco-warp", "--device", "cuda", "--out", str(tmp_path / "t")],
        ):
            assert "--device cuda: torch sees no CUDA device" in cli_error(*argv)
    assert "--device cpu" in cli_error("collect", "drive", "--device", "cuda:0", "--out", str(tmp_path / "c"))
    assert not (tmp_path / "g").exists() and "collect" not in seen


def test_host_copies_step_as_the_shared_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU path's numpy host copies (forced here on the CPU), kept in step with the device around
    every step, forward and reset, give a Go1 environment exactly the numbers of the zero-copy arrays."""
    import scenefactory.go1.env as go1_env

    cfg = replace(nominal(Go1TaskConfig(num_envs=2)), physics=PhysicsBackend("mujoco-warp"))
    shared = Go1Env(cfg, seed=4)
    monkeypatch.setattr(
        go1_env, "make_sim", lambda model, n, physics, nthread: WarpSim(model, n, host_copies=True)
    )
    copied = Go1Env(cfg, seed=4)
    assert copied.sim.host_copies and not shared.sim.host_copies
    g = torch.Generator().manual_seed(5)
    for i in range(8):
        act = torch.randn(2, shared.num_actions, generator=g) * 0.5
        a, b = shared.step(act), copied.step(act)
        assert torch.equal(a.actor_obs, b.actor_obs) and torch.equal(a.critic_obs, b.critic_obs), i
        if i == 3:
            for env in (shared, copied):
                env.reset(np.array([1]))
    assert torch.equal(shared.sim.state_dict()["data"]["qpos"], copied.sim.state_dict()["data"]["qpos"])


def test_without_the_warp_extra_the_tier_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """MuJoCo Warp is an optional extra: asking for its tier without it names the extra; the other
    tiers, and their device check, do not need it."""
    from scenefactory.engines import EngineSpec, make_engine, mjwarp

    monkeypatch.setitem(sys.modules, "warp", None)  # import warp → ImportError
    monkeypatch.setattr(mjwarp, "warp_installed", lambda: False)
    with pytest.raises(UserError, match=r"pip install 'scenefactory\[warp\]'"):
        make_engine(EngineSpec(tier="mujoco-warp"), 1, 1, dt=0.1)
    assert make_engine(EngineSpec(tier="kinematic"), 1, 1, dt=0.1).name == "kinematic"
    assert check_device("cpu") == torch.device("cpu")
