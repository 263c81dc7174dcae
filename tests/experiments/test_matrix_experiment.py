"""The ``matrix`` experiment: the rank correlation on made-up points, one tiny end-to-end run
through every step (train kinematic, collect mujoco transitions, fit the four learned families,
train in each, evaluate every kind on both tiers, report), and bad flags as one clear line. Sizes
are absurdly small: these check the plumbing, not results."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from scenefactory.errors import UserError
from scenefactory.experiments import ExperimentArgs, ResultsFile, Sizes, read_results, stages
from scenefactory.experiments import matrix as xp
from scenefactory.experiments.accuracy import find_correlation, spearman
from scenefactory.experiments.gap import find_gap
from scenefactory.experiments.results import find_cell
from scenefactory.io import json_safe
from scenefactory.rl.driving import load_policy

TINY = Sizes(seeds=1, train_worlds=2, train_agents=2, iterations=1, train_scenes=2, episodes=2, eval_worlds=2)
TINY_SETTINGS = xp.MatrixSettings(budget=60, collect_worlds=2, fit_epochs=1)


def test_spearman_is_exact_on_few_points() -> None:
    # perfectly decreasing: ρ = −1, and only 2 of the 4! orderings are as extreme
    got = spearman([0.01, 0.02, 0.03, 0.04], [0.9, 0.8, 0.7, 0.6])
    assert got.rho == pytest.approx(-1.0) and got.p == pytest.approx(2 / 24) and got.n == 4
    # ties take average ranks: x ranks (1.5, 1.5, 3), y ranks (1, 2, 3) → ρ = 0.866
    assert spearman([1.0, 1.0, 2.0], [1.0, 2.0, 3.0]).rho == pytest.approx(math.sqrt(3) / 2)
    # too few points, or a constant variable: no ρ
    assert math.isnan(spearman([1.0, 2.0], [2.0, 1.0]).rho)
    assert math.isnan(spearman([1.0, 2.0, 3.0], [0.5, 0.5, 0.5]).p)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ResultsFile[xp.MatrixResults]]:
    out = tmp_path_factory.mktemp("matrix")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny batches: more threads only spin
    try:
        return out, xp.run(ExperimentArgs(out=out, sizes=TINY, command="tiny"), settings=TINY_SETTINGS)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_every_cell_and_every_model_row_is_reported(
    tiny_run: tuple[Path, ResultsFile[xp.MatrixResults]],
) -> None:
    out, returned = tiny_run
    for name in ("report.md", "results.json", "matrix.png", "accuracy_vs_transfer.png"):
        assert (out / name).is_file(), name
    doc = json.loads((out / "results.json").read_text())  # strict JSON: NaN is null
    assert doc["experiment"] == returned.experiment == "matrix"
    assert json_safe(returned.to_json()) == doc
    typed = read_results(out / "results.json")
    assert json_safe(typed.to_json()) == doc  # the file reads back into what was written
    res, report = typed.results, (out / "report.md").read_text()
    kinds = ["kinematic", "mlp", "gru", "transformer", "residual", "mujoco"]
    assert list(xp.KINDS) == kinds
    # every trained-on × evaluated-on cell, in results and as one row of the report's matrix
    assert [(c.kind, c.eval_tier) for c in res.cells] == [
        (k, e) for k in kinds for e in ("mujoco", "kinematic")
    ]
    for cell in res.cells:
        assert cell.metrics["episodes"] > 0 and 0.0 <= cell.metrics["goal_reach_rate"] <= 1.0
        assert cell.train_wall_s is not None and len(cell.policies) == 1
        assert report.count(f"| {cell.kind} | {cell.eval_tier} |") == 1, cell
    # each family was fitted here on the recorded mujoco data, and its policy trained in that model
    assert res.mujoco_data is not None and res.mujoco_data.meta["engine"] == "mujoco"
    assert res.mujoco_data.meta["engine_spec"]["action_lag_steps"] == 0
    for kind in xp.LEARNED:
        model = out / "models" / kind / "model.pt"
        fit = res.models[kind]
        assert fit is not None and fit.path == str(model) and fit.source == "fitted here"
        engine = load_policy(find_cell(res.cells, kind, "mujoco").checkpoints[0]).engine
        assert engine is not None and engine.tier == "learned" and engine.dynamics_model == model
    # the accuracy table: the bicycle reference, then one row per learned model with its fitted error
    acc = {p.label: p for p in res.accuracy}
    assert list(acc) == ["kinematic bicycle", *xp.LEARNED]
    for kind in xp.LEARNED:
        fitted = json.loads((out / "models" / kind / "metrics.json").read_text())["model"]
        assert acc[kind].one_step_m == pytest.approx(fitted["pos_err_m"])
        assert acc[kind].goal == pytest.approx(
            find_cell(res.cells, kind, "mujoco").metrics["goal_reach_rate"]
        )
        assert report.count(f"| {kind} | {fitted['pos_err_m']:.4f} |") == 1, kind
    assert not acc["kinematic bicycle"].learned
    assert [(c.models, c.error) for c in res.correlations] == [
        ("learned", "one_step"),
        ("learned", "rollout10"),
        ("all", "one_step"),
        ("all", "rollout10"),
    ]
    assert find_correlation(res.correlations, "learned", "one_step").n == 4
    assert "Spearman" in report or "no rank correlation" in report
    # gap closed is the rows' arithmetic on mujoco goal reach
    rate = {k: find_cell(res.cells, k, "mujoco").metrics["goal_reach_rate"] for k in kinds}
    span = rate["mujoco"] - rate["kinematic"]
    for kind in kinds:
        gap = find_gap(res.gap_closed_on_mujoco, kind).gap_closed
        if span:
            assert gap == pytest.approx((rate[kind] - rate["kinematic"]) / span)
        else:
            assert math.isnan(gap)


@pytest.mark.slow
def test_a_rerun_reuses_the_fitted_models_the_policies_were_trained_in(
    tiny_run: tuple[Path, ResultsFile[xp.MatrixResults]], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, returned = tiny_run

    def refuse(*a: Any, **kw: Any) -> None:
        raise AssertionError("refitted")

    monkeypatch.setattr(stages, "fit_dynamics", refuse)
    data = out / "mujoco_transitions"
    fits = stages.fit_models(data, ["mlp", "gru"], TINY_SETTINGS.fit_epochs, out / "models", seed=0)
    for kind in ("mlp", "gru"):
        assert fits[kind] == returned.results.models[kind]
    with pytest.raises(AssertionError, match="refitted"):  # other settings: fitted again
        stages.fit_models(data, ["mlp"], TINY_SETTINGS.fit_epochs + 1, out / "models", 0)


@pytest.mark.slow
def test_given_models_are_checked_and_read(
    tiny_run: tuple[Path, ResultsFile[xp.MatrixResults]], tmp_path: Path
) -> None:
    out, _ = tiny_run
    mlp, gru = out / "models" / "mlp" / "model.pt", out / "models" / "gru" / "model.pt"
    got = xp.given_models(ExperimentArgs(out=tmp_path, dynamics_models=(("mlp", mlp), ("gru", gru))))
    assert list(got) == ["mlp", "gru"] and got["gru"].source == "--dynamics-model"
    fitted = json.loads((out / "models" / "gru" / "metrics.json").read_text())["model"]
    assert got["gru"].heldout["pos_err_m"] == pytest.approx(fitted["pos_err_m"])
    with pytest.raises(UserError, match="holds a 'mlp' model, not 'gru'"):
        xp.given_models(ExperimentArgs(out=tmp_path, dynamics_models=(("gru", mlp),)))
    with pytest.raises(UserError, match="given twice"):
        xp.given_models(ExperimentArgs(out=tmp_path, dynamics_models=(("mlp", mlp), ("mlp", mlp))))
    # a given learned policy without --dynamics-model: its model is read from the policy's spec
    policy = out / "train" / "gru_s0" / "checkpoints" / "latest.pt"
    spec_model = xp._model_of_checkpoints([policy])
    assert spec_model is not None and spec_model.path == str(gru)
    assert spec_model.source == "the given policy's spec"


def test_bad_checkpoint_kind_and_model_flags_are_clear_errors(
    tmp_path: Path, cli_error: Callable[..., str]
) -> None:
    ckpt = tmp_path / "p.pt"
    ckpt.write_bytes(b"")

    def error(*argv: str) -> str:
        return cli_error("experiment", *argv, "--out", str(tmp_path / "o"))

    err = error("matrix", "--checkpoint", f"grounded={ckpt}")
    assert "--checkpoint kind 'grounded' unknown" in err and "'transformer'" in err and "'mujoco'" in err
    assert "checkpoint not found" in error("matrix", "--checkpoint", f"gru={tmp_path / 'missing.pt'}")
    err = error("matrix", "--dynamics-model", f"lstm={ckpt}")
    assert "--dynamics-model kind 'lstm' unknown" in err and "'residual'" in err
    assert "not a readable torch file" in error("matrix", "--dynamics-model", f"gru={ckpt}")
    assert "experiment transfer does not take --dynamics-model" in error(
        "transfer", "--dynamics-model", f"gru={ckpt}"
    )
    with pytest.raises(UserError, match="fit_epochs must be a positive integer"):
        xp.MatrixSettings(fit_epochs=0)
