"""Transition datasets: shards, metadata, histories that chain, both engines, a trained policy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from scenefactory.cli import main
from scenefactory.engines import EngineSpec, make_engine
from scenefactory.grounding.dataset import STATE_FIELDS, load_transitions


@pytest.mark.parametrize("engine", ["kinematic", "mujoco"])
def test_collect_writes_chaining_transitions(tmp_path: Path, engine: str) -> None:
    out = tmp_path / engine
    args = ["collect", "drive", "--engine", engine, "--worlds", "4", "--agents", "2", "--steps", "30"]
    assert main([*args, "--out", str(out)]) == 0
    data, meta = load_transitions(out)
    n = meta["transitions"]
    assert n == len(data["state"]) > 0 and data["state"].shape == (n, len(STATE_FIELDS))
    assert meta["engine"] == engine and meta["policies_used"] == ["noisy", "random"]
    assert np.abs(data["action"]).max() <= 1.0 and np.isfinite(data["next_state"]).all()
    assert (data["friction"] > 0).all() and len(np.unique(data["friction"])) > 1  # randomized roads
    # histories chain: within an episode, next_state(t) == state(t + 1)
    order = np.lexsort((data["step"], data["episode"]))
    ep, st = data["episode"][order], data["step"][order]
    same = (ep[1:] == ep[:-1]) & (st[1:] == st[:-1] + 1)
    assert same.sum() > n // 2
    np.testing.assert_allclose(
        data["next_state"][order][:-1][same], data["state"][order][1:][same], atol=1e-5
    )
    # the state moves as the engine says: position change ≈ speed · dt for moving agents
    step = np.hypot(*(data["next_state"][:, :2] - data["state"][:, :2]).T)
    assert step.max() < 0.1 * 30.0


def test_collect_with_a_trained_policy_and_bad_input(tmp_path: Path) -> None:
    run = tmp_path / "run"
    tiny = ["--worlds", "2", "--agents", "2", "--iterations", "1", "--train-scenes", "3"]
    assert main(["train", "drive", *tiny, "--out", str(run)]) == 0
    out = tmp_path / "data"
    ckpt = str(run / "checkpoints" / "latest.pt")
    args = ["collect", "drive", "--engine", "kinematic", "--worlds", "3", "--agents", "2", "--steps", "5"]
    assert main([*args, "--checkpoint", ckpt, "--out", str(out)]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["policies_used"] == ["trained", "noisy", "random"]
    with pytest.raises(Exception, match="not a transition dataset"):
        load_transitions(tmp_path)


def test_fit_dynamics_cli_reports_model_and_bicycle_baseline(tmp_path: Path) -> None:
    data = tmp_path / "data"
    args = ["collect", "drive", "--engine", "kinematic", "--worlds", "6", "--agents", "2", "--steps", "40"]
    assert main([*args, "--out", str(data)]) == 0
    out = tmp_path / "fit"
    assert (
        main(["fit-dynamics", "--data", str(data), "--model", "mlp", "--epochs", "2", "--out", str(out)]) == 0
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["kinematic_bicycle"]["pos_err_m"] < 1e-4  # the bicycle is exact on kinematic data
    assert np.isfinite(metrics["model"]["pos_err_m"]) and (out / "model.pt").is_file()
    assert main(["fit-dynamics", "--data", str(data), "--model", "lstm", "--out", str(out)]) == 2


@pytest.mark.slow
def test_learned_engine_runs_train_eval_bench(tmp_path: Path) -> None:
    """A fitted residual model (near-exact on kinematic data) drives the task as --engine learned."""
    data = tmp_path / "data"
    args = ["collect", "drive", "--engine", "kinematic", "--worlds", "6", "--agents", "2", "--steps", "40"]
    assert main([*args, "--out", str(data)]) == 0
    fit = tmp_path / "fit"
    assert (
        main(["fit-dynamics", "--data", str(data), "--model", "residual", "--epochs", "1", "--out", str(fit)])
        == 0
    )
    model = str(fit / "model.pt")
    # the learned tier follows the kinematic tier it was fitted on
    learned = make_engine(EngineSpec(tier="learned", dynamics_model=Path(model)), 2, 2, dt=0.1)
    kin = make_engine(EngineSpec(), 2, 2, dt=0.1)
    pose = torch.tensor([[[0.0, 0.0, 0.0], [5.0, 3.5, 1.0]]]).expand(2, 2, 3).clone()
    for eng in (learned, kin):
        eng.reset(torch.arange(2), pose, torch.full((2, 2), 5.0), torch.ones(2, 2, dtype=torch.bool))
    act = torch.tensor([0.2, 0.3]).expand(2, 2, 2).clone()
    on = torch.ones(2, 2, dtype=torch.bool)
    for _ in range(10):
        a, b = learned.step(act, on), kin.step(act, on)
    assert torch.allclose(a.pos_xy, b.pos_xy, atol=0.05)
    run = tmp_path / "run"
    tiny = ["--worlds", "2", "--agents", "2", "--iterations", "1", "--train-scenes", "3"]
    assert (
        main(["train", "drive", "--engine", "learned", "--dynamics-model", model, *tiny, "--out", str(run)])
        == 0
    )
    ckpt = str(run / "checkpoints" / "latest.pt")
    ev = [
        "eval",
        "drive",
        "--checkpoint",
        ckpt,
        "--engine",
        "learned",
        "--dynamics-model",
        model,
        "--episodes",
        "2",
    ]
    assert main([*ev, "--out", str(tmp_path / "ev")]) == 0
    bench = [
        "bench",
        "drive",
        "--engine",
        "learned",
        "--dynamics-model",
        model,
        "--worlds",
        "2",
        "--agents",
        "2",
    ]
    assert main([*bench, "--steps", "2", "--out", str(tmp_path / "b.json")]) == 0
    assert main(["bench", "drive", "--engine", "learned", "--out", str(tmp_path / "c.json")]) == 2
