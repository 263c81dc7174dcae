"""HistoryEngine, the learned and grounded tiers: the same steps as the tiers' earlier engines, and
the physics and bookkeeping each tier promises (see ``history_fixtures`` for the scripted drive)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from history_fixtures import (
    AGENTS,
    CAR,
    CASES,
    DT_S,
    EXPECTED,
    FIELDS,
    STEPS,
    WORLDS,
    build_case,
    drive,
    grounding_folder,
)
from scenefactory.dynamics.history import HistoryModel, LearnedHistoryModel
from scenefactory.dynamics.models import DynamicsModelConfig, ModelKind, make_model
from scenefactory.engines import Engine, EngineSpec, make_engine
from scenefactory.engines.history import HistoryEngine, grounded_engine
from scenefactory.engines.kinematic import KinematicEngine
from scenefactory.errors import UserError


def _make(tier: str, path: Path) -> Engine:
    if tier == "learned":
        spec = EngineSpec(tier=tier, dynamics_model=path)
    else:
        spec = EngineSpec(tier=tier, grounding=path)
    return make_engine(spec, WORLDS, AGENTS, dt=DT_S, params=CAR)


@pytest.mark.parametrize("case", CASES)
def test_steps_exactly_as_the_earlier_tiers(case: str, tmp_path: Path) -> None:
    """Every state field, the knobs and the reward estimates of the scripted drive equal what
    engines/learned.py and engines/grounded.py gave (recorded in tests/data)."""
    expected = json.loads(EXPECTED.read_text())[case]
    engine = build_case(case, tmp_path, _make)
    assert isinstance(engine, HistoryEngine) and engine.name == case.split("-")[0]
    got = drive(engine)
    for t in range(STEPS):
        for f in FIELDS:
            torch.testing.assert_close(
                torch.tensor(got["states"][t][f]),
                torch.tensor(expected["states"][t][f]),
                rtol=1e-6,
                atol=1e-6,
                msg=f"step {t}, field {f}",
            )
        if expected["knobs"][t] is None:  # the learned tier: no knobs
            assert torch.tensor(got["knobs"][t]).numel() == 0
        else:
            assert got["knobs"][t] == expected["knobs"][t]
        if expected["rewards"][t] is None:
            assert got["rewards"][t] is None
        else:
            torch.testing.assert_close(
                torch.tensor(got["rewards"][t]), torch.tensor(expected["rewards"][t]), rtol=1e-6, atol=1e-6
            )


@pytest.mark.parametrize("case", CASES)
def test_bookkeeping_each_tier_promises(case: str, tmp_path: Path) -> None:
    engine = build_case(case, tmp_path, _make)
    assert isinstance(engine, HistoryEngine)
    got = drive(engine)
    first, at_2, at_3, at_4 = (got["states"][t] for t in (0, 2, 3, 4))
    # world 0 agent 1 is switched off at steps 2 and 3: it keeps its state
    for f in ("pos_xy", "yaw", "speed"):
        assert at_3[f][0][1] == at_2[f][0][1] == got["states"][1][f][0][1]
    assert at_4["pos_xy"][0][1] != at_3["pos_xy"][0][1]
    assert at_2["accel"][0][1] == 0.0
    # world 1 agent 1 does not exist until world 1's reset at step 5: it never moves
    assert all(s["pos_xy"][1][1] == [1.0, 1.0] for s in got["states"][:5])
    assert got["states"][5]["pos_xy"][1][1] != [2.0, 2.0]
    # the spawn speed above the car's limit: clamped on the bicycle-based grounded tier only
    assert (first["speed"][1][0] <= CAR.max_speed_mps + 0.5) == case.startswith("grounded")
    # velocity: along the heading (learned) or at the bicycle's slip angle (grounded)
    st = engine.state()
    assert torch.allclose(st.vel_xy.norm(dim=-1), st.speed.abs(), atol=1e-5)
    if case.startswith("learned"):
        assert bool((st.vel_b[..., 1] == 0).all())
    else:
        beta = torch.atan(CAR.rear_axle_to_com_m / CAR.wheelbase_m * torch.tan(st.steer))
        torch.testing.assert_close(torch.atan2(st.vel_b[..., 1], st.vel_b[..., 0]), beta)
    if case == "grounded-dr":  # knobs drawn per world, world 1 drew anew at its reset
        knobs = torch.tensor(got["knobs"])
        assert not torch.equal(knobs[0, 0], knobs[0, 1])
        assert torch.equal(knobs[4, 0], knobs[5, 0]) and not torch.equal(knobs[4, 1], knobs[5, 1])
    if case == "grounded-history":
        assert engine.predicted_reward is not None and engine.predicted_reward.shape == (WORLDS, AGENTS)
    else:
        assert engine.predicted_reward is None


@pytest.mark.parametrize("case", ["learned-gru", "grounded-dr"])
def test_state_dict_resumes_bit_for_bit(case: str, tmp_path: Path) -> None:
    """A copy restored from state_dict steps as the original, knob draws at later resets included."""
    a = build_case(case, tmp_path / "a", _make)
    b = build_case(case, tmp_path / "b", _make)
    assert isinstance(a, HistoryEngine) and isinstance(b, HistoryEngine)
    drive(a)
    b.load_state_dict(a.state_dict())
    act = torch.tensor([[[0.4, 0.5], [-0.3, -0.2]], [[1.0, 0.1], [0.0, 1.0]]])
    on = torch.ones(WORLDS, AGENTS, dtype=torch.bool)
    for eng in (a, b):
        eng.reset(torch.tensor([0]), torch.zeros(1, AGENTS, 3), torch.full((1, AGENTS), 3.0), on[:1])
    for _ in range(3):
        sa, sb = a.step(act, on), b.step(act, on)
        for f in FIELDS:
            assert torch.equal(getattr(sa, f), getattr(sb, f)), f
    assert torch.equal(a.phys, b.phys)
    with pytest.raises(ValueError, match="HistoryEngine state lacks the tensor 'phys'"):
        b.load_state_dict({k: v for k, v in a.state_dict().items() if k != "phys"})


def test_grounded_none_is_the_kinematic_tier(tmp_path: Path) -> None:
    """With the kinematic knobs the grounded tier is the kinematic bicycle, field by field."""
    grounded = _make("grounded", grounding_folder(tmp_path, "none"))
    kin = KinematicEngine(WORLDS, AGENTS, DT_S, CAR)
    pose = torch.tensor([[[0.0, 0.0, 0.3], [10.0, -4.0, -1.2]], [[-3.0, 2.0, 2.9], [1.0, 1.0, 0.0]]])
    on = torch.ones(WORLDS, AGENTS, dtype=torch.bool)
    for eng in (grounded, kin):
        eng.reset(torch.arange(WORLDS), pose, torch.tensor([[4.0, 9.0], [12.0, 0.5]]), on)
    for t in range(10):
        act = torch.tensor([[[0.8, 0.9], [-0.5, -0.7]], [[0.3, 0.4], [1.0, 1.0]]]) * math.cos(0.6 * t)
        sg, sk = grounded.step(act, on), kin.step(act, on)
        for f in FIELDS:
            torch.testing.assert_close(getattr(sg, f), getattr(sk, f), rtol=1e-5, atol=1e-5, msg=f)


def test_learned_zero_residual_follows_the_bicycle(tmp_path: Path) -> None:
    """An untrained residual model (zero correction) moves as the kinematic bicycle, its velocity
    along the heading (the learned tier gives no side slip)."""
    model = make_model(DynamicsModelConfig(kind=ModelKind.RESIDUAL, hidden_size=8, dt_s=DT_S, vehicle=CAR))
    model.fitted.fill_(True)
    learned = HistoryEngine(
        LearnedHistoryModel(model),
        1,
        2,
        DT_S,
        CAR,
        "cpu",
        name="learned",
        source="test",
        bicycle=False,
        seed=0,
    )
    kin = KinematicEngine(1, 2, DT_S, CAR)
    on = torch.ones(1, 2, dtype=torch.bool)
    for eng in (learned, kin):
        eng.reset(
            torch.tensor([0]), torch.tensor([[[0.0, 0.0, 0.0], [5.0, 3.5, 1.0]]]), torch.full((1, 2), 5.0), on
        )
    for _ in range(10):
        sl, sk = (
            learned.step(torch.tensor([[[0.2, 0.3], [-0.6, 0.5]]]), on),
            kin.step(torch.tensor([[[0.2, 0.3], [-0.6, 0.5]]]), on),
        )
    for f in ("pos_xy", "yaw", "speed", "steer", "yaw_rate", "accel"):
        torch.testing.assert_close(getattr(sl, f), getattr(sk, f), rtol=1e-5, atol=1e-5, msg=f)
    heading = torch.stack((torch.cos(sl.yaw), torch.sin(sl.yaw)), dim=-1)
    torch.testing.assert_close(sl.vel_xy, heading * sl.speed.unsqueeze(-1))


class _Diverging:
    """A history model whose prediction is NaN: the engine must refuse to step on it."""

    history_len, dt_s = 2, DT_S

    def physics(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.zeros(n, 0)

    def predict(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor, phys: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        return torch.full((states.shape[0], 6), math.nan), None


def test_refusals(tmp_path: Path) -> None:
    model = _Diverging()
    assert isinstance(model, HistoryModel)
    eng = HistoryEngine(
        model, 1, 1, DT_S, CAR, "cpu", name="learned", source="model x", bicycle=False, seed=0
    )
    eng.reset(torch.tensor([0]), torch.zeros(1, 1, 3), torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool))
    with pytest.raises(FloatingPointError, match=r"the learned tier's model \(model x\) produced non-finite"):
        eng.step(torch.zeros(1, 1, 2), torch.ones(1, 1, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"reset expects pose \(1, 1, 3\)"):
        eng.reset(torch.tensor([0]), torch.zeros(1, 3), torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool))
    with pytest.raises(UserError, match=r"model x steps 0\.1 s, the task's policy step is 0\.2 s"):
        HistoryEngine(model, 1, 1, 0.2, CAR, "cpu", name="learned", source="model x", bicycle=False, seed=0)
    with pytest.raises(ValueError, match="need at least one world and one agent"):
        HistoryEngine(model, 0, 1, DT_S, CAR, "cpu", name="learned", source="model x", bicycle=False, seed=0)
    folder = grounding_folder(tmp_path, "dr")
    slow = replace(CAR, max_speed_mps=10.0)
    with pytest.raises(UserError, match=r"grounding .*dr was fitted for vehicle \{.*\}, the task drives \{"):
        grounded_engine(1, 1, DT_S, slow, "cpu", folder)
    with pytest.raises(UserError, match=r"grounding .*dr steps 0\.1 s, the task's policy step is 0\.05 s"):
        grounded_engine(1, 1, 0.05, CAR, "cpu", folder)
    # the knob generator: the artifact's fit seed unless told otherwise
    a, b, c = (grounded_engine(4, 1, DT_S, CAR, "cpu", folder, seed=s) for s in (None, 7, 8))
    assert torch.equal(a.phys, b.phys) and not torch.equal(a.phys, c.phys)
