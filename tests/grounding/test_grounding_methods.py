"""Grounding the kinematic tier toward a target: each method on a tiny case with a known gap.

The targets are the kinematic tier itself with a different car or an actuator lag, recorded on an
open road (:func:`~scenefactory.grounding.engine_data.record_engine`) under the nominal car's name,
so the plain bicycle has a known, measurable error:

- ``slow``: acceleration 2.4 instead of 4 m/s² (gain 0.6), braking 5.6 instead of 8 (gain 0.7),
  steering rate 1.0 instead of 1.5 rad/s — a Markov gap a correction of (s, a) can close;
- ``slow_lag1``: the same car with its actions one step late — what system identification must
  recover exactly (the answers are known);
- ``lag2``: the nominal car with actions two steps late — not Markov in the abstract state, so a
  Markov correction cannot fix it and a history-conditioned one can (ASTRA's point).

Each method must beat the uncorrected bicycle on held-out open-loop error (except domain
randomization, which is not a predictor: its knobs are checked instead), and the artifacts must
run as an engine behind the protocol, round-trip, and fail clearly when damaged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from scenefactory.cli import build_parser, main
from scenefactory.dynamics.artifact import load_grounding
from scenefactory.dynamics.bicycle import bicycle_step
from scenefactory.dynamics.correctors import ActionTransformation, Method, PhysicalBicycle, method_from_name
from scenefactory.dynamics.physics import (
    DELAY,
    BicycleCorrection,
    DomainRanges,
    corrected_bicycle_step,
    delayed_action,
)
from scenefactory.engines import Engine, EngineSpec, make_engine
from scenefactory.engines.history import HistoryEngine, grounded_engine
from scenefactory.engines.kinematic import KinematicEngine
from scenefactory.engines.wrappers import LaggedEngine
from scenefactory.errors import CheckpointError, UserError
from scenefactory.grounding.dataset import collect, load_transitions
from scenefactory.grounding.engine_data import record_engine
from scenefactory.grounding.fit import build_histories, evaluate, holdout_mask
from scenefactory.grounding.ground import GroundConfig, GroundResult, ground, grounded_step_fn
from scenefactory.vehicles.params import VehicleParams, actions_to_controls

DT_S = 0.1
CAR = VehicleParams()
SLOW = replace(CAR, max_accel_mps2=2.4, max_brake_mps2=5.6, max_steer_rate_radps=1.0)
BUDGET = 2000
SMALL = {"hidden_size": 32, "train_steps": 400, "batch_size": 256, "lr": 3e-3}


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny tensors: one thread is as fast and does not fight other jobs for the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("targets")
    engines = {
        "slow": KinematicEngine(8, 4, DT_S, SLOW),
        "slow_lag1": LaggedEngine(KinematicEngine(8, 4, DT_S, SLOW), 1),
        "lag2": LaggedEngine(KinematicEngine(8, 4, DT_S, CAR), 2),
    }
    for name, engine in engines.items():
        record_engine(engine, root / name, episodes=4, episode_steps=40, seed=1, vehicle=CAR)
    return {name: root / name for name in engines}


@pytest.fixture(scope="module")
def fitted(targets: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, GroundResult]:
    root = tmp_path_factory.mktemp("fits")
    runs = {
        "none": ("slow", GroundConfig(method=Method.NONE)),
        "dr": ("slow", GroundConfig(method=Method.DR)),
        "sysid": (
            "slow_lag1",
            GroundConfig(
                method=Method.SYSID,
                budget=BUDGET,
                sysid_iterations=80,
                sysid_max_delay_steps=2,
                sysid_windows=512,
            ),
        ),
        "markov": ("slow", GroundConfig(method=Method.MARKOV, budget=BUDGET, **SMALL)),
        "gat": (
            "slow",
            GroundConfig(method=Method.GAT, budget=BUDGET, gat_sim_transitions=5000, gat_alpha=1.0, **SMALL),
        ),
        "history": ("lag2", GroundConfig(method=Method.HISTORY, budget=BUDGET, history_len=4, **SMALL)),
        "markov_lag2": ("lag2", GroundConfig(method=Method.MARKOV, budget=BUDGET, **SMALL)),
    }
    return {name: ground(targets[data], cfg, root / name) for name, (data, cfg) in runs.items()}


def _errors(res: GroundResult) -> tuple[dict, dict]:
    return res.config["heldout"]["grounded"], res.config["heldout"]["kinematic_bicycle"]


# ------------------------------------------------------------------------------------ physics


def test_kinematic_knobs_are_exactly_the_kinematic_tier() -> None:
    g = torch.Generator().manual_seed(0)
    n = 64
    state = torch.zeros(n, 6)
    state[:, :2] = torch.randn(n, 2, generator=g) * 30
    state[:, 2] = torch.rand(n, generator=g) * 6 - 3
    state[:, 3] = torch.rand(n, generator=g) * 25
    state[:, 5] = torch.rand(n, generator=g) - 0.5
    action = torch.rand(n, 2, generator=g) * 2.4 - 1.2
    mu = torch.rand(n, generator=g)
    model = PhysicalBicycle(CAR, DT_S)
    nxt = model.predict_next(state[:, None], action[:, None], mu, model.physics(n))
    target, accel = actions_to_controls(action, CAR)
    pos, yaw, speed, steer, _, yaw_rate, _ = bicycle_step(
        state[:, :2], state[:, 2], state[:, 3], state[:, 5], target, accel, CAR, DT_S
    )
    expected = torch.cat((pos, yaw[:, None], speed[:, None], yaw_rate[:, None], steer[:, None]), dim=-1)
    torch.testing.assert_close(nxt, expected, atol=1e-5, rtol=0)


def test_knobs_grip_understeer_and_delay() -> None:
    """Full braking at 20 m/s on μ = 0.1 decelerates at μg, not 8 m/s²; understeer lowers the yaw
    rate at speed; the delayed action is the one sent d steps ago."""
    state = torch.tensor([[0.0, 0.0, 0.0, 20.0, 0.0, 0.3]])
    mu = torch.tensor([0.1])
    phys = BicycleCorrection(grip_factor=1.0).to_tensor(CAR)[None]
    nxt = corrected_bicycle_step(state, torch.tensor([[0.5, -1.0]]), mu, phys, CAR, DT_S)
    assert float(nxt[0, 3]) == pytest.approx(20.0 - 0.981 * DT_S, abs=1e-4)
    assert abs(float(nxt[0, 4])) * float(0.5 * (20.0 + nxt[0, 3])) <= 0.981 + 1e-4  # lateral limit
    plain = corrected_bicycle_step(
        state, torch.tensor([[0.5, 0.0]]), mu * 10, BicycleCorrection().to_tensor(CAR)[None], CAR, DT_S
    )
    us = corrected_bicycle_step(
        state,
        torch.tensor([[0.5, 0.0]]),
        mu * 10,
        BicycleCorrection(understeer_s2pm=0.004).to_tensor(CAR)[None],
        CAR,
        DT_S,
    )
    assert 0.0 < float(us[0, 4]) < 0.7 * float(plain[0, 4])
    acts = torch.arange(8.0).view(2, 2, 2)  # two agents, history of 2
    torch.testing.assert_close(
        delayed_action(acts, torch.tensor([0.0, 1.0])), torch.tensor([[2.0, 3.0], [4.0, 5.0]])
    )
    with pytest.raises(ValueError, match="history"):
        delayed_action(acts, torch.tensor([2.0, 0.0]))
    with pytest.raises(UserError, match="delay_steps"):
        BicycleCorrection(delay_steps=-1)


def test_lagged_engine_applies_actions_late_and_resets_its_queue() -> None:
    lagged = LaggedEngine(KinematicEngine(2, 3, DT_S), 2)
    plain = KinematicEngine(2, 3, DT_S)
    assert isinstance(lagged, Engine) and lagged.name == "kinematic+lag2"
    ids = torch.arange(2)
    pose = torch.zeros(2, 3, 3)
    pose[..., 0] = torch.arange(3.0) * 10
    for e in (lagged, plain):
        e.reset(ids, pose, torch.full((2, 3), 5.0), torch.ones(2, 3, dtype=torch.bool))
    g = torch.Generator().manual_seed(0)
    sent = [torch.rand(2, 3, 2, generator=g) * 2 - 1 for _ in range(6)]
    on = torch.ones(2, 3, dtype=torch.bool)
    for t, a in enumerate(sent):
        s_lag = lagged.step(a, on)
        s_plain = plain.step(sent[t - 2] if t >= 2 else torch.zeros(2, 3, 2), on)
        torch.testing.assert_close(s_lag.pos_xy, s_plain.pos_xy)
    lagged.reset(ids[:1], pose[:1], torch.zeros(1, 3), torch.ones(1, 3, dtype=torch.bool))
    assert bool((lagged._queue[0] == 0).all()) and bool((lagged._queue[1] != 0).any())
    wrapped = make_engine(EngineSpec(action_lag_steps=1), 2, 3)
    assert isinstance(wrapped, LaggedEngine) and wrapped.lag_steps == 1
    with pytest.raises(UserError, match="action-lag-steps"):
        make_engine(EngineSpec(action_lag_steps=-1), 2, 3)


# ---------------------------------------------------------------------------------- methods


def test_none_is_the_bicycle_and_uses_no_target_data(fitted: dict[str, GroundResult]) -> None:
    g, b = _errors(fitted["none"])
    assert fitted["none"].config["budget_transitions"] == 0
    for key in ("pos_err_m", "rollout10_pos_err_m", "rollout20_pos_err_m"):
        assert g[key] == pytest.approx(b[key], abs=1e-6)
    assert b["rollout10_pos_err_m"] > 0.2  # the slow car is a real gap


def test_sysid_recovers_the_target_car_and_its_lag(fitted: dict[str, GroundResult]) -> None:
    res = fitted["sysid"]
    knobs = res.config["fit"]["fitted"]
    print("\nsysid fitted", knobs, "\n  held-out", _errors(res))
    assert knobs["delay_steps"] == 1
    assert knobs["accel_gain"] == pytest.approx(0.6, abs=0.03)
    assert knobs["brake_gain"] == pytest.approx(0.7, abs=0.03)
    assert knobs["steer_rate_radps"] == pytest.approx(1.0, abs=0.05)
    g, b = _errors(res)
    assert res.config["budget_transitions"] == BUDGET
    assert g["rollout10_pos_err_m"] < 0.2 * b["rollout10_pos_err_m"]
    assert g["rollout20_pos_err_m"] < 0.2 * b["rollout20_pos_err_m"]


@pytest.mark.parametrize("name", ["markov", "gat"])
def test_markov_corrections_beat_the_bicycle_on_a_markov_gap(
    name: str, fitted: dict[str, GroundResult]
) -> None:
    g, b = _errors(fitted[name])
    print(f"\n{name}: grounded {g}\n  bicycle {b}")
    assert fitted[name].config["budget_transitions"] == BUDGET
    assert g["speed_err_mps"] < 0.6 * b["speed_err_mps"]
    assert g["rollout10_pos_err_m"] < 0.7 * b["rollout10_pos_err_m"]
    assert g["rollout20_pos_err_m"] < 0.7 * b["rollout20_pos_err_m"]


def test_gat_smoothing_moves_from_the_bicycle_to_the_grounded_action(fitted: dict[str, GroundResult]) -> None:
    """α = 0 is the plain bicycle exactly; the default α = 0.5 lies between it and α = 1."""
    res = fitted["gat"]
    model = res.model
    assert isinstance(model, ActionTransformation) and model.alpha == 1.0
    data, _ = load_transitions(Path(res.config["data"]["path"]))
    h = build_histories(data, 1)
    held = holdout_mask(h.episode, 0.2, 0)
    errors = {}
    for alpha in (0.0, 0.5, 1.0):
        model.alpha = alpha
        errors[alpha] = evaluate(grounded_step_fn(model), h, held)["rollout10_pos_err_m"]
    model.alpha = 1.0
    bicycle = res.config["heldout"]["kinematic_bicycle"]["rollout10_pos_err_m"]
    assert errors[0.0] == pytest.approx(bicycle, abs=1e-5)
    assert errors[1.0] < errors[0.5] < 0.95 * errors[0.0]


def test_history_fixes_a_lag_that_a_markov_correction_cannot(fitted: dict[str, GroundResult]) -> None:
    g, b = _errors(fitted["history"])
    m, _ = _errors(fitted["markov_lag2"])
    print(f"\nlag2: history {g}\n  markov {m}\n  bicycle {b}")
    assert g["rollout10_pos_err_m"] < 0.75 * b["rollout10_pos_err_m"]
    assert g["rollout10_pos_err_m"] < 0.85 * m["rollout10_pos_err_m"]
    assert g["speed_err_mps"] < 0.6 * b["speed_err_mps"] and g["speed_err_mps"] < 0.6 * m["speed_err_mps"]


def test_domain_randomization_draws_documented_knobs_per_world(fitted: dict[str, GroundResult]) -> None:
    res = fitted["dr"]
    assert res.config["budget_transitions"] == 0
    ranges = DomainRanges()
    phys = ranges.sample(4000, torch.Generator().manual_seed(0))
    for i, (lo, hi) in enumerate((ranges.accel_gain, ranges.brake_gain, ranges.steer_rate_radps)):
        assert lo <= float(phys[:, i].min()) and float(phys[:, i].max()) <= hi
        assert float(phys[:, i].max()) - float(phys[:, i].min()) > 0.8 * (hi - lo)
    assert set(phys[:, DELAY].tolist()) == {0.0, 1.0, 2.0}
    eng = grounded_engine(6, 3, DT_S, CAR, torch.device("cpu"), res.out_dir)
    before = eng.phys.clone()
    assert len({tuple(p.tolist()) for p in before}) == 6  # one draw per world
    ids = torch.tensor([1, 4])
    eng.reset(ids, torch.zeros(2, 3, 3), torch.full((2, 3), 5.0), torch.ones(2, 3, dtype=torch.bool))
    changed = (eng.phys != before).any(-1)
    assert changed.tolist() == [False, True, False, False, True, False]
    with pytest.raises(UserError, match="delay_steps"):
        DomainRanges(delay_steps=(0.5, 2))  # type: ignore[arg-type]


# ------------------------------------------------------------------------- engine and artifact


@pytest.mark.parametrize("name", ["none", "dr", "sysid", "markov", "gat", "history"])
def test_grounded_engine_follows_the_protocol(name: str, fitted: dict[str, GroundResult]) -> None:
    w, k = 3, 2
    eng = make_engine(EngineSpec(tier="grounded", grounding=fitted[name].out_dir), w, k, dt=DT_S)
    assert isinstance(eng, Engine) and isinstance(eng, HistoryEngine) and eng.name == "grounded"
    assert eng.model.method.value == name  # type: ignore[attr-defined]
    pose = torch.zeros(w, k, 3)
    pose[..., 0] = torch.arange(float(k)) * 10
    valid = torch.ones(w, k, dtype=torch.bool)
    valid[2, 1] = False
    eng.reset(torch.arange(w), pose, torch.full((w, k), 8.0), valid)
    eng.set_friction(torch.arange(w), torch.tensor([0.8, 0.5, 0.1]))
    active = valid.clone()
    active[0, 0] = False
    for _ in range(5):
        st = eng.step(torch.tensor([0.3, 0.5]).expand(w, k, 2).clone(), active)
    assert (
        st.pos_xy.shape == (w, k, 2) and st.vel_b.shape == (w, k, 2) and st.valid.tolist() == valid.tolist()
    )
    assert torch.isfinite(st.pos_xy).all() and torch.isfinite(st.speed).all()
    torch.testing.assert_close(st.pos_xy[0, 0], pose[0, 0, :2])  # inactive: not moved
    assert float(st.pos_xy[1, 0, 0]) > 3.0 and float(st.yaw[1, 0]) > 0.0  # live: drove and turned left
    eng.reset(torch.tensor([1]), pose[1:2], torch.zeros(1, k), valid[1:2])
    st = eng.state()
    torch.testing.assert_close(st.pos_xy[1], pose[1, :, :2])
    assert float(st.speed[1].abs().max()) == 0.0 and float(st.pos_xy[2, 0, 0]) > 3.0  # others untouched
    with pytest.raises(ValueError, match="actions have shape"):
        eng.step(torch.zeros(w, k, 3), active)
    if name == "history":
        assert eng.predicted_reward is not None and eng.predicted_reward.shape == (w, k)


def test_engine_matches_the_offline_rollout(fitted: dict[str, GroundResult]) -> None:
    """The engine's history bookkeeping reproduces the model's own predictions step by step."""
    res = fitted["history"]
    model = res.model
    eng = grounded_engine(1, 1, DT_S, CAR, torch.device("cpu"), res.out_dir)
    eng.reset(
        torch.tensor([0]),
        torch.tensor([[[1.0, 2.0, 0.3]]]),
        torch.tensor([[6.0]]),
        torch.ones(1, 1, dtype=torch.bool),
    )
    eng.set_friction(torch.tensor([0]), torch.tensor([0.7]))
    h = model.history_len
    states = torch.tensor([[1.0, 2.0, 0.3, 6.0, 0.0, 0.0]]).expand(h, 6).clone()[None]
    actions = torch.zeros(1, h, 2)
    g = torch.Generator().manual_seed(3)
    for _ in range(7):
        a = torch.rand(1, 2, generator=g) * 2 - 1
        actions = torch.cat((actions[:, 1:], a[:, None]), dim=1)
        with torch.no_grad():
            nxt = model.predict_next(states, actions, torch.tensor([0.7]), model.physics(1))
        st = eng.step(a.view(1, 1, 2), torch.ones(1, 1, dtype=torch.bool))
        torch.testing.assert_close(st.pos_xy[0, 0], nxt[0, :2])
        torch.testing.assert_close(st.speed[0, 0], nxt[0, 3])
        states = torch.cat((states[:, 1:], nxt[:, None]), dim=1)


@pytest.mark.parametrize("name", ["sysid", "gat", "history"])
def test_artifact_round_trip(name: str, fitted: dict[str, GroundResult]) -> None:
    res = fitted[name]
    loaded, config = load_grounding(res.out_dir)
    assert config["method"] == name and config["budget_transitions"] == res.config["budget_transitions"]
    saved = json.loads((res.out_dir / "config.json").read_text())
    assert saved["budget_transitions"] == BUDGET and saved["dt_s"] == DT_S and "heldout" in saved
    h = loaded.history_len
    g = torch.Generator().manual_seed(4)
    states = torch.zeros(5, h, 6)
    states[..., 3] = 5.0 + 5.0 * torch.rand(5, 1, generator=g)
    actions = torch.rand(5, h, 2, generator=g) * 2 - 1
    mu, phys = torch.rand(5, generator=g), loaded.physics(5)
    with torch.no_grad():
        torch.testing.assert_close(
            loaded.predict_next(states, actions, mu, phys), res.model.predict_next(states, actions, mu, phys)
        )


def test_clear_errors_for_missing_or_damaged_artifacts(
    fitted: dict[str, GroundResult], tmp_path: Path
) -> None:
    src = fitted["markov"].out_dir
    with pytest.raises(CheckpointError, match="no such grounding folder"):
        load_grounding(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"empty/config\.json: missing"):
        load_grounding(tmp_path / "empty")

    def copy(name: str) -> Path:
        d = tmp_path / name
        d.mkdir()
        for f in ("config.json", "weights.pt"):
            (d / f).write_bytes((src / f).read_bytes())
        return d

    bad = copy("corrupt_json")
    (bad / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"config\.json: not valid JSON"):
        load_grounding(bad)
    bad = copy("foreign")
    (bad / "config.json").write_text(json.dumps({"format": "other/1"}))
    with pytest.raises(CheckpointError, match=r"format 'other/1', expected 'scenefactory\.grounding/1'"):
        load_grounding(bad)
    bad = copy("no_field")
    cfg = json.loads((src / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if k != "vehicle"}))
    with pytest.raises(CheckpointError, match=r"\['vehicle'\] missing"):
        load_grounding(bad)
    bad = copy("bad_method")
    (bad / "config.json").write_text(json.dumps({**cfg, "method": "magic"}))
    with pytest.raises(CheckpointError, match="field 'method' is 'magic'"):
        load_grounding(bad)
    bad = copy("no_weights")
    (bad / "weights.pt").unlink()
    with pytest.raises(CheckpointError, match=r"weights\.pt: missing"):
        load_grounding(bad)
    bad = copy("other_weights")
    (bad / "weights.pt").write_bytes((fitted["gat"].out_dir / "weights.pt").read_bytes())
    with pytest.raises(CheckpointError, match="does not match field 'weights_sha256'"):
        load_grounding(bad)
    with pytest.raises(UserError, match=r"steps 0\.1 s, the task's policy step is 0\.05 s"):
        grounded_engine(1, 1, 0.05, CAR, torch.device("cpu"), src)
    with pytest.raises(UserError, match="needs --grounding PATH"):
        make_engine(EngineSpec(tier="grounded"), 1, 1)
    with pytest.raises(UserError, match="--grounding applies to --engine grounded"):
        make_engine(EngineSpec(grounding=src), 1, 1)
    with pytest.raises(UserError, match="unknown grounding method 'magic'"):
        method_from_name("magic")
    with pytest.raises(UserError, match="--budget 999999 exceeds"):
        ground(
            fitted["markov"].config["data"]["path"] and Path(fitted["markov"].config["data"]["path"]),
            GroundConfig(method=Method.MARKOV, budget=999_999),
            tmp_path / "x",
        )


def test_cli_collect_lagged_ground_and_train_on_the_grounded_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """collect (kinematic, 1-step lag; through the library to keep it to 4 scenes) → ground
    history (rewards recorded) → one PPO iteration and evaluations on the grounded engine and on a
    lagged kinematic one, through the command line."""
    data, out = tmp_path / "data", tmp_path / "history"
    flags = ["collect", "drive", "--engine", "kinematic", "--action-lag-steps", "1", "--out", str(data)]
    assert build_parser().parse_args(flags).action_lag_steps == 1
    collect(data, engine=EngineSpec(action_lag_steps=1), worlds=4, agents=2, steps=40, num_scenes=4)
    meta = json.loads((data / "meta.json").read_text())
    assert meta["engine"] == "kinematic" and meta["engine_spec"] == EngineSpec(action_lag_steps=1).to_dict()
    args = ["ground", "--method", "history", "--data", str(data), "--budget", "150", "--steps", "30"]
    assert main([*args, "--history", "3", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out.splitlines()[0])
    assert printed["budget_transitions"] == 150 and math.isfinite(printed["grounded"]["pos_err_m"])
    config = json.loads((out / "config.json").read_text())
    assert config["fit"]["reward_head_trained"] and "reward_mae" in config["heldout"]
    assert config["data"]["engine_spec"] == meta["engine_spec"]
    run = tmp_path / "run"
    tiny = ["--worlds", "2", "--agents", "2", "--iterations", "1", "--train-scenes", "3"]
    grounded = ["--engine", "grounded", "--grounding", str(out)]
    assert main(["train", "drive", *tiny, *grounded, "--out", str(run)]) == 0
    spec = json.loads((run / "config.json").read_text())
    assert EngineSpec.from_dict(spec["engine"]) == EngineSpec(tier="grounded", grounding=out)
    ckpt = str(run / "checkpoints" / "latest.pt")
    ev = ["eval", "drive", "--checkpoint", ckpt, "--episodes", "2", "--out", str(tmp_path / "ev")]
    assert main([*ev, "--engine", "kinematic", "--action-lag-steps", "2"]) == 0
    assert json.loads((tmp_path / "ev" / "metrics.json").read_text())["action_lag_steps"] == 2
    assert main([*ev[:-1], str(tmp_path / "ev2"), *grounded]) == 0
    assert main(["ground", "--method", "magic", "--data", str(data), "--out", str(tmp_path / "m")]) == 2
    assert (
        main(["ground", "--method", "sysid", "--data", str(tmp_path / "nope"), "--out", str(tmp_path / "m")])
        == 2
    )
