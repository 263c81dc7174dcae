"""EngineSpec: checked at construction, round-trips as data, read from older flat records; make_engine."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from history_fixtures import grounding_folder, learned_model_file
from scenefactory.dynamics.models import ModelKind
from scenefactory.engines import ENGINES, EngineSpec, make_engine
from scenefactory.engines.history import HistoryEngine
from scenefactory.engines.kinematic import KinematicEngine
from scenefactory.engines.mujoco_engine import MujocoEngine
from scenefactory.engines.spec import DEFAULT_PHYSICS_HZ, TIERS
from scenefactory.engines.wrappers import LaggedEngine
from scenefactory.errors import CheckpointError, UserError


def test_every_tier_has_a_factory() -> None:
    assert tuple(ENGINES) == TIERS


def test_bad_values_are_refused_with_the_field() -> None:
    with pytest.raises(UserError, match=r"unknown engine 'warp9': expected one of \['grounded'"):
        EngineSpec(tier="warp9")
    for hz in (0.0, -5.0, float("inf"), float("nan"), "120", True):
        with pytest.raises(
            UserError,
            match=r"physics_hz \(--physics-hz\): expected a physics rate in Hz in \[100, 1000\]",
        ):
            EngineSpec(tier="mujoco", physics_hz=hz)  # type: ignore[arg-type]
    for lag in (-1, 1.5, True, "2"):
        with pytest.raises(
            UserError,
            match=r"lag_steps \(--action-lag-steps\): expected an integer in \[0, 100\]",
        ):
            EngineSpec(action_lag_steps=lag)  # type: ignore[arg-type]


def test_each_file_belongs_to_its_tier(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--engine learned needs --dynamics-model PATH \(a model\.pt"):
        EngineSpec(tier="learned")
    with pytest.raises(UserError, match=r"--engine grounded needs --grounding PATH \(a folder"):
        EngineSpec(tier="grounded")
    with pytest.raises(
        UserError, match="--dynamics-model applies to --engine learned, not to --engine mujoco"
    ):
        EngineSpec(tier="mujoco", dynamics_model=tmp_path / "m.pt")
    with pytest.raises(UserError, match="--grounding applies to --engine grounded, not to --engine learned"):
        EngineSpec(tier="learned", dynamics_model=tmp_path / "m.pt", grounding=tmp_path)
    with pytest.raises(
        UserError, match="--dynamics-model applies to --engine learned, not to --engine mujoco-warp"
    ):
        EngineSpec(tier="mujoco-warp", dynamics_model=tmp_path / "m.pt")
    with pytest.raises(UserError, match="--grounding must be a path, got 3"):
        EngineSpec(tier="grounded", grounding=3)  # type: ignore[arg-type]
    spec = EngineSpec(tier="learned", dynamics_model=str(tmp_path / "m.pt"))  # type: ignore[arg-type]
    assert spec.dynamics_model == tmp_path / "m.pt" and isinstance(spec.dynamics_model, Path)


def test_round_trip_as_data(tmp_path: Path) -> None:
    specs = [
        EngineSpec(),
        EngineSpec(tier="mujoco", physics_hz=240, action_lag_steps=2),
        EngineSpec(tier="learned", dynamics_model=tmp_path / "m.pt"),
        EngineSpec(tier="grounded", grounding=tmp_path / "g", action_lag_steps=1),
        EngineSpec(tier="mujoco-warp", physics_hz=240, action_lag_steps=1),
    ]
    for spec in specs:
        d = spec.to_dict()
        assert set(d) == {"tier", "physics_hz", "dynamics_model", "grounding", "action_lag_steps"}
        assert all(v is None or isinstance(v, str | int | float) for v in d.values())  # JSON-ready
        assert EngineSpec.from_dict(d) == spec
    assert (
        EngineSpec(tier="mujoco", physics_hz=240).physics_hz
        == 240.0
        == EngineSpec.from_dict({"tier": "mujoco", "physics_hz": 240}).physics_hz
    )
    assert EngineSpec.from_dict({}) == EngineSpec() and EngineSpec().physics_hz == DEFAULT_PHYSICS_HZ
    with pytest.raises(UserError, match=r"unknown fields \['engine'\]"):
        EngineSpec.from_dict({"engine": "mujoco"})
    with pytest.raises(UserError, match="must be an object"):
        EngineSpec.from_dict(["mujoco"])  # type: ignore[arg-type]


def test_older_flat_records() -> None:
    old = {"engine": "mujoco", "physics_hz": 100.0, "dynamics_model": None, "action_lag_steps": 1, "seed": 3}
    assert EngineSpec.from_flat(old) == EngineSpec(tier="mujoco", physics_hz=100.0, action_lag_steps=1)
    # physics_hz was None for the kinematic tier; a model file beside another tier was never read
    assert EngineSpec.from_flat({"engine": "kinematic", "physics_hz": None, "dynamics_model": "m.pt"}) == (
        EngineSpec()
    )
    learned = EngineSpec.from_flat({"engine": "learned", "dynamics_model": "m.pt"})
    assert learned.dynamics_model == Path("m.pt")
    with pytest.raises(UserError, match="--grounding applies to --engine grounded"):
        EngineSpec.from_flat({"engine": "kinematic", "grounding": "g"})
    with pytest.raises(UserError, match=r"\(--action-lag-steps\): expected an integer in \[0, 100\], got -1"):
        EngineSpec.from_flat({"engine": "kinematic", "action_lag_steps": -1})


def test_make_engine_builds_each_tier_and_the_lag(tmp_path: Path) -> None:
    kin = make_engine(EngineSpec(), 2, 3, dt=0.1)
    assert isinstance(kin, KinematicEngine) and (kin.num_worlds, kin.agents_per_world, kin.dt) == (2, 3, 0.1)
    mj = make_engine(EngineSpec(tier="mujoco", physics_hz=100.0), 1, 1, dt=0.1)
    assert isinstance(mj, MujocoEngine) and mj.physics_hz == 100.0 and mj.substeps == 10
    lagged = make_engine(EngineSpec(action_lag_steps=2), 2, 3)
    assert (
        isinstance(lagged, LaggedEngine)
        and lagged.lag_steps == 2
        and isinstance(lagged.inner, KinematicEngine)
    )
    assert lagged.name == "kinematic+lag2"
    with pytest.raises(TypeError, match="make_engine takes an EngineSpec, got 'kinematic'"):
        make_engine("kinematic", 1, 1)  # type: ignore[arg-type]
    # the files are checked when the engine is built, each error naming the file
    with pytest.raises(CheckpointError, match=r"missing\.pt: no such dynamics model file"):
        make_engine(EngineSpec(tier="learned", dynamics_model=tmp_path / "missing.pt"), 1, 1)
    with pytest.raises(CheckpointError, match=r"nope: no such grounding folder"):
        make_engine(EngineSpec(tier="grounded", grounding=tmp_path / "nope"), 1, 1)


def test_history_tiers_are_built_through_the_registry(tmp_path: Path) -> None:
    model = learned_model_file(tmp_path, ModelKind.MLP)
    learned = make_engine(EngineSpec(tier="learned", dynamics_model=model), 2, 1, dt=0.1)
    assert isinstance(learned, HistoryEngine) and learned.name == "learned" and not learned.bicycle
    folder = grounding_folder(tmp_path, "dr")
    grounded = make_engine(EngineSpec(tier="grounded", grounding=folder, action_lag_steps=1), 2, 1, dt=0.1)
    assert isinstance(grounded, LaggedEngine) and grounded.name == "grounded+lag1"
    assert isinstance(grounded.inner, HistoryEngine) and grounded.inner.bicycle
    with pytest.raises(
        UserError, match=r"dynamics model .*mlp\.pt steps 0\.1 s, the task's policy step is 0\.05 s"
    ):
        make_engine(EngineSpec(tier="learned", dynamics_model=model), 1, 1, dt=0.05)
    st = learned.step(torch.zeros(2, 1, 2), torch.ones(2, 1, dtype=torch.bool))
    assert st.pos_xy.shape == (2, 1, 2)
