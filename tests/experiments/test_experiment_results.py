"""The typed experiment results and their JSON form: every result class survives a trip through
``results.json`` unchanged, and a bad file is one clear error naming the file and the field.
No experiment runs here: the results are made up."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scenefactory.errors import UserError
from scenefactory.experiments import EXPERIMENTS, ResultsFile, Sizes, read_results
from scenefactory.experiments.accuracy import AccuracyPoint, Correlation, Spearman
from scenefactory.experiments.divergence import Divergence, DivergenceCurve, HorizonDivergence
from scenefactory.experiments.friction_change import FrictionChangeResults
from scenefactory.experiments.gap import GapClosed
from scenefactory.experiments.grounding import GroundingKind, GroundingResults
from scenefactory.experiments.log_grounding import LogGroundingResults
from scenefactory.experiments.matrix import MatrixResults
from scenefactory.experiments.results import (
    RESULTS_VERSION,
    Cell,
    Contrast,
    Difference,
    PolicyFigures,
    Reader,
    cell_labels,
)
from scenefactory.experiments.seed_level import seed_level
from scenefactory.experiments.stages import Collection, GroundingFit, ModelFit
from scenefactory.experiments.transfer import TransferResults
from scenefactory.experiments.wet_road import WetRoadResults
from scenefactory.io import json_safe, write_json


def _metrics(goal: float, episodes: int = 20) -> dict[str, Any]:
    return {
        "episodes": episodes,
        "goal_reach_rate": goal,
        "goal_reach_rate_ci95": [goal - 0.1, min(1.0, goal + 0.1)],
        "collision_rate": 0.05,
        "mean_peak_drac_mps2": 3.5,
        "mean_peak_drac_mps2_ci95": [3.0, 4.0],
        "agents": {"controlled": episodes},
    }


def _cell(kind: str, tier: str, condition: str = "", seeds: tuple[int | None, ...] = (0, 1)) -> Cell:
    policies = tuple(
        PolicyFigures(f"/p/{kind}_s{s}.pt", tier, s, 15, 1.25, _metrics(0.5 + 0.1 * i))
        for i, s in enumerate(seeds)
    )
    return Cell(kind, tier, condition, {**_metrics(0.55, 40), "policies": len(seeds)}, policies, 12.5)


def _diff(d: float) -> Difference:
    return Difference(d, (d - 0.1, d + 0.1))


def _gap(kind: str, metric: str = "goal_reach_rate") -> GapClosed:
    return GapClosed(kind, metric, 0.6, 0.5, (0.2, 0.8), 1990, 10)


def _collection() -> Collection:
    meta = {"engine": "mujoco", "engine_spec": {"tier": "mujoco", "action_lag_steps": 3}, "shards": 1}
    return Collection(2400, 75, 12.0, 2, {**meta, "transitions": 2400, "steps": 75})


HELDOUT = {
    "grounded": {"pos_err_m": 0.01, "rollout10_pos_err_m": 0.2},
    "kinematic_bicycle": {"pos_err_m": 0.03},
}


def _divergence(ade: float) -> Divergence:
    curve = DivergenceCurve((0.0, 0.1), (0.0, ade), (0.0, ade - 0.01), (0.0, ade + 0.01), (4, 4))
    return Divergence(
        2, 4, 4, 1, ade, (ade - 0.01, ade + 0.01), (HorizonDivergence(1.0, ade, (0.0, 1.0), 4),), curve
    )


def _model(kind: str) -> ModelFit:
    return ModelFit(
        f"/m/{kind}/model.pt", "fitted here", {"pos_err_m": 0.01}, {"pos_err_m": 0.03}, {}, {}, 3.0
    )


RESULTS: dict[str, Any] = {
    "transfer": TransferResults(
        tuple(_cell(t, e) for t in ("kinematic", "mujoco") for e in ("kinematic", "mujoco"))
    ),
    "friction-change": FrictionChangeResults(
        tuple(_cell(t, "mujoco", c) for t in ("kinematic", "mujoco") for c in ("dry", "dry → ice")),
        (
            Contrast("kinematic", {"goal_reach_rate": _diff(-0.2)}),
            Contrast("mujoco", {"goal_reach_rate": _diff(0.0)}),
        ),
    ),
    "wet-road": WetRoadResults(
        tuple(_cell(k, "mujoco", r) for r in ("wet", "heavy_rain") for k in ("aware", "unaware")),
        (Contrast("wet", {"mean_peak_drac_mps2": _diff(-1.5)}),),
    ),
    "grounding": GroundingResults(
        tuple(_cell(k, "mujoco", "lag 3") for k in ("none", "history", "oracle")),
        (
            GroundingKind("none", "kinematic", 0),
            GroundingKind("history", "kinematic + history", None),
            GroundingKind("oracle", "mujoco + lag 3", 96000),
        ),
        tuple(_cell(k, t) for t in ("mujoco", "kinematic") for k in ("none", "history", "oracle")),
        tuple(
            _gap(k, m) for m in ("goal_reach_rate", "collision_rate") for k in ("none", "history", "oracle")
        ),
        (Contrast("none", {"goal_reach_rate": _diff(0.1), "gap_closed": Difference(0.4, (0.1, 0.7), 1990)}),),
        {"history": GroundingFit("/g/history", 100, HELDOUT, 4.0, {"method": "history", "train_steps": 10})},
        _collection(),
    ),
    "matrix": MatrixResults(
        tuple(_cell(k, e) for k in ("kinematic", "mlp", "mujoco") for e in ("mujoco", "kinematic")),
        {"mlp": _model("mlp"), "gru": None},
        (
            AccuracyPoint("kinematic bicycle", 0.03, 0.4, None, 0.5, (0.4, 0.6), learned=False),
            AccuracyPoint("mlp", 0.01, 0.2, 0.3, 0.7, (0.6, 0.8)),
        ),
        (Correlation("learned", "one_step", Spearman(4, -0.8, 0.083)),),
        tuple(_gap(k) for k in ("kinematic", "mlp", "mujoco")),
        (Contrast("mlp", {"goal_reach_rate": _diff(0.2)}),),
        None,
    ),
    "log-grounding": LogGroundingResults(
        {"kinematic (uncorrected)": _divergence(0.3), "kinematic + history": _divergence(0.1)},
        {"kinematic (uncorrected)": _metrics(0.98)},
        {"controlled": 4, "replayed": 0},
    ),
}


def _through_json(data: Any) -> Any:
    """``data`` as it reads back from a strict JSON file."""
    return json.loads(json.dumps(json_safe(data), allow_nan=False))


@pytest.mark.parametrize("name", list(RESULTS))
def test_every_result_class_round_trips_through_json(name: str) -> None:
    results = RESULTS[name]
    data = _through_json(results.to_json())
    back = type(results).from_json(Reader(data, "results"))
    assert back == results
    assert EXPERIMENTS[name].read_results(Reader(data, "results")) == results  # the registry's reader


def _file(name: str, seed_compare: bool = True) -> ResultsFile[Any]:
    results = RESULTS[name]
    cells = results.cells
    compare = [(cells[0], cells[1])] if seed_compare and len(cells) > 1 else []
    return ResultsFile(
        experiment=name,
        command=f"scenefactory experiment {name} --out x",
        quick=False,
        sizes=Sizes(seeds=2, train_worlds=4, train_agents=2, iterations=3, train_scenes=5, episodes=6),
        seeds={"kinematic": [0, 1], "mujoco": "given checkpoints"},
        evaluation_seed=0,
        config={"tiers": ["kinematic", "mujoco"], "nested": {"a": 1}},
        results=results,
        plots=("plot.png",),
        wall_s=12.5,
        machine={"torch_threads": 2},
        seed_level=seed_level(cells, compare) if cells else None,
    )


@pytest.mark.parametrize("name", list(RESULTS))
def test_a_results_file_reads_back_into_what_was_written(name: str, tmp_path: Path) -> None:
    doc = _file(name)
    write_json(tmp_path / "results.json", doc.to_json())
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["version"] == RESULTS_VERSION and written["experiment"] == name
    back = read_results(tmp_path / "results.json")
    assert back == doc


def test_nan_is_written_as_null_and_reads_back_as_nan(tmp_path: Path) -> None:
    """An undefined difference or gap (no gap to close) is NaN in memory, null in the file."""
    results = FrictionChangeResults(
        (_cell("kinematic", "mujoco", "a"), _cell("kinematic", "mujoco", "b")),
        (Contrast("kinematic", {"goal_reach_rate": Difference(math.nan, (math.nan, math.nan))}),),
    )
    data = _through_json(results.to_json())
    assert data["effects"][0]["differences"]["goal_reach_rate"] == {"diff": None, "ci95": [None, None]}
    back = FrictionChangeResults.from_json(Reader(data, "results"))
    assert math.isnan(back.effects[0].differences["goal_reach_rate"].diff)
    assert _through_json(back.to_json()) == data


def test_cells_are_named_by_what_varies_and_never_parsed_back() -> None:
    assert cell_labels(RESULTS["transfer"].cells) == [
        "kinematic->kinematic",
        "kinematic->mujoco",
        "mujoco->kinematic",
        "mujoco->mujoco",
    ]
    assert cell_labels(RESULTS["wet-road"].cells)[:2] == ["aware|wet", "unaware|wet"]
    assert cell_labels(RESULTS["grounding"].cells) == ["none", "history", "oracle"]
    with pytest.raises(ValueError, match="same kind, tier and condition"):
        cell_labels([_cell("a", "mujoco"), _cell("a", "mujoco")])


def _write(tmp_path: Path, edit: Callable[[dict[str, Any]], Any]) -> Path:
    data = _through_json(_file("friction-change").to_json())
    edit(data)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d.pop("version"), "field 'version' is missing: a results file from before version 2"),
        (lambda d: d.update(version=1), "reads results version 2, the file has version 1"),
        (
            lambda d: d.update(experiment="nope"),
            "field 'experiment': unknown experiment 'nope', expected one of",
        ),
        (lambda d: d.pop("command"), "field 'command' is missing"),
        (lambda d: d.update(quick="yes"), "field 'quick': expected true or false, got \"yes\""),
        (
            lambda d: d["sizes"].update(seeds=0),
            "field 'sizes': experiment size seeds must be a positive integer",
        ),
        (
            lambda d: d["seeds"].update(kinematic=[0, "one"]),
            "field 'seeds.kinematic[1]': expected an integer",
        ),
        (lambda d: d["plots"].append(3), "field 'plots[1]': expected a string, got 3"),
        (lambda d: d["results"].pop("effects"), "field 'results.effects' is missing"),
        (
            lambda d: d["results"]["effects"][1]["differences"]["goal_reach_rate"].update(ci95=[0.1]),
            "field 'results.effects[1].differences.goal_reach_rate.ci95': expected a [low, high] pair, "
            "got [0.1]",
        ),
        (
            lambda d: d["results"]["cells"][2]["policies"][0].update(trained_seed="0"),
            "field 'results.cells[2].policies[0].trained_seed': expected an integer seed or null, got \"0\"",
        ),
        (
            lambda d: d["results"]["cells"][0]["metrics"].update(collision_rate=2.0),
            "field 'results.cells[0].metrics.collision_rate': expected a rate in [0, 1], got 2.0",
        ),
        (
            lambda d: d["seed_level"]["cells"][0]["figures"]["goal_reach_rate"].update(per_seed="x"),
            "field 'seed_level.cells[0].figures.goal_reach_rate.per_seed': expected a list",
        ),
    ],
)
def test_a_bad_results_file_names_the_file_and_the_field(
    tmp_path: Path, edit: Callable[[dict[str, Any]], Any], expected: str
) -> None:
    path = _write(tmp_path, edit)
    with pytest.raises(UserError) as err:
        read_results(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message, message


def test_a_results_file_that_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    with pytest.raises(UserError, match=r"results\.json: not found"):
        read_results(path)
    path.write_text("{broken")
    with pytest.raises(UserError, match=r"results\.json: not valid JSON"):
        read_results(path)
    path.write_text("[]")
    with pytest.raises(
        UserError, match=r"results\.json: expected a JSON object \(an experiment report\), got \[\]"
    ):
        read_results(path)
    # version 1: cells keyed by composed names, no version field
    path.write_text(json.dumps({"experiment": "transfer", "results": {"cells": {"kinematic->mujoco": {}}}}))
    with pytest.raises(UserError, match="field 'version' is missing"):
        read_results(path)


def test_stage_records_written_before_the_results_were_typed_still_read() -> None:
    """A resumed run reads what earlier runs recorded in ``stage.json`` (the result forms are the
    ones the untyped code wrote: a dataset's meta, a fit's config, a model's summary)."""
    collection = {  # grounding.dataset.collect's meta then, with the stage's wall time and attempts
        "format": "scenefactory-transitions-1",
        "engine": "mujoco",
        "physics_hz": 120.0,
        "action_lag_steps": 3,
        "transitions": 2400,
        "steps": 75,
        "wall_s": 12.0,
        "collect_attempts": 1,
    }
    c = Collection.from_json(Reader(collection, "result"))
    assert (c.transitions, c.steps, c.wall_s, c.attempts) == (2400, 75, 12.0, 1)
    assert c.meta["action_lag_steps"] == 3 and c.to_json() == collection
    fit = {"method": "history", "budget_transitions": 100, "heldout": HELDOUT, "path": "/g/h", "wall_s": 4.0}
    g = GroundingFit.from_json(Reader(fit, "result"))
    assert (g.path, g.budget_transitions, g.config) == ("/g/h", 100, {"method": "history"})
    assert g.heldout["grounded"]["rollout10_pos_err_m"] == 0.2 and g.to_json() == fit
    model = {
        "path": "/m/mlp/model.pt",
        "source": "fitted here",
        "heldout": {"pos_err_m": 0.01},
        "bicycle": {"pos_err_m": 0.03},
        "dataset": {"path": "/d"},
        "train": {"epochs": 5},
        "wall_s": 3.0,
    }
    assert ModelFit.from_json(Reader(model, "result")).to_json() == model
