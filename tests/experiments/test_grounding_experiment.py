"""The ``grounding`` experiment: the gap-closed arithmetic and its bootstrap on made-up counts, one
tiny end-to-end run through every step (collect, fit every method, train, evaluate, report), and
bad flags as one clear line. Sizes are absurdly small: these check the plumbing, not results."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from scenefactory.errors import UserError
from scenefactory.experiments import ExperimentArgs, ResultsFile, Sizes, read_results, stages
from scenefactory.experiments import grounding as xp
from scenefactory.experiments.base import finish_stage
from scenefactory.experiments.gap import DRAWS, SceneCounts, find_gap, gap_closed, gap_difference
from scenefactory.experiments.results import find_cell, find_contrast
from scenefactory.io import json_safe

TINY = Sizes(seeds=1, train_worlds=2, train_agents=2, iterations=1, train_scenes=2, episodes=2, eval_worlds=2)
TINY_SETTINGS = xp.GroundingSettings(
    budget=200, collect_worlds=2, fit_steps=10, sysid_iterations=2, gat_sim_transitions=100, history_len=4
)


def _counts(hits: list[int], total: int = 10) -> SceneCounts:
    return SceneCounts(np.array(hits, dtype=float), np.full(len(hits), float(total)))


def test_gap_closed_is_the_fraction_of_the_way_from_base_to_top() -> None:
    base = _counts([5, 4, 6, 5, 5, 3, 7, 5])  # 40 / 80
    top = _counts([9, 9, 8, 10, 9, 9, 8, 10])  # 72 / 80
    mid = _counts([7, 6, 7, 8, 7, 6, 8, 7])  # 56 / 80: half-way
    got = gap_closed({"none": base, "m": mid, "oracle": top}, "none", "oracle", seed=1)
    assert got["m"].rate == pytest.approx(0.7) and got["m"].metric == "goal_reach_rate"
    assert got["m"].gap_closed == pytest.approx(0.5)
    assert got["none"].gap_closed == 0.0 and got["oracle"].gap_closed == 1.0
    lo, hi = got["m"].ci95
    assert 0.2 < lo < 0.5 < hi < 0.8 and got["m"].draws_used == DRAWS
    d = gap_difference({"none": base, "m": mid, "oracle": top}, "m", "none", "none", "oracle", seed=1)
    assert d.diff == pytest.approx(0.5) and d.ci95[0] < 0.5 < d.ci95[1] and d.draws_used == DRAWS
    # no gap: undefined, and every draw without a gap is counted
    tie = gap_closed({"none": base, "m": mid, "oracle": base}, "none", "oracle")
    assert math.isnan(tie["m"].gap_closed) and tie["m"].draws_without_gap == DRAWS
    with pytest.raises(ValueError, match="same scenes"):
        gap_closed({"none": base, "oracle": _counts([1, 2])}, "none", "oracle")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ResultsFile[xp.GroundingResults]]:
    out = tmp_path_factory.mktemp("grounding")
    args = ExperimentArgs(out=out, sizes=TINY, action_lag_steps=1, budget=100, command="tiny")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny batches: more threads only spin
    try:
        return out, xp.run(args, settings=TINY_SETTINGS)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_every_method_row_budget_and_gap_are_reported(
    tiny_run: tuple[Path, ResultsFile[xp.GroundingResults]],
) -> None:
    out, returned = tiny_run
    for name in ("report.md", "results.json", "outcomes.png", "gap_closed.png"):
        assert (out / name).is_file(), name
    doc = json.loads((out / "results.json").read_text())  # strict JSON: NaN is null
    assert doc["experiment"] == returned.experiment == "grounding"
    assert json_safe(returned.to_json()) == doc  # what was returned is what was written
    typed = read_results(out / "results.json")  # and it reads back into the same results
    assert json_safe(typed.to_json()) == doc
    res, report = typed.results, (out / "report.md").read_text()
    kinds = ["none", "dr", "sysid", "markov", "gat", "history", "oracle"]
    assert [c.kind for c in res.cells] == list(xp.KINDS) == kinds
    assert all((c.eval_tier, c.condition) == ("mujoco", "lag 1") for c in res.cells)
    for cell in res.cells:  # a row per kind in both tables, the history row in bold
        label = f"**{cell.kind}**" if cell.kind == "history" else cell.kind
        assert report.count(f"| {label} | {res.kind(cell.kind).trained_on} |") == 2, cell.kind
    # every policy also drove the held-out scenes on mujoco without the lag and on kinematic
    assert [(c.eval_tier, c.kind) for c in res.other_tiers] == [
        (t, k) for t in ("mujoco", "kinematic") for k in kinds
    ]
    assert "## Every policy on each tier" in report
    for other in res.other_tiers:
        on_target = find_cell(res.cells, other.kind)
        assert other.metrics["episodes"] == on_target.metrics["episodes"]
        assert 0.0 <= other.metrics["goal_reach_rate"] <= 1.0 and other.condition == ""
    assert "goal reach on kinematic" in report
    # the flags reached the target and the fits: lag 1, 100 target transitions per fit
    assert doc["config"]["settings"]["action_lag_steps"] == 1 and doc["config"]["settings"]["budget"] == 100
    assert res.target_data is not None and res.target_data.meta["engine"] == "mujoco"
    assert res.target_data.meta["engine_spec"]["action_lag_steps"] == 1
    assert "at most **100 target transitions**" in report and "lag of 1 policy steps" in report
    used = {k.kind: k.target_transitions for k in res.kinds}
    assert used["none"] == 0 and used["dr"] == 0 and (used["oracle"] or 0) > 0
    assert all(used[m] == 100 for m in ("sysid", "markov", "gat", "history"))
    for m in ("dr", "sysid", "markov", "gat", "history"):
        cfg = json.loads((out / "groundings" / m / "config.json").read_text())
        assert cfg["method"] == m and cfg["budget_transitions"] == used[m]
        assert res.groundings[m].path == str(out / "groundings" / m)
    # the gap fraction is the rows' arithmetic (or undefined when the oracle ties direct transfer)
    rate = {c.kind: c.metrics["goal_reach_rate"] for c in res.cells}
    span = rate["oracle"] - rate["none"]
    assert {g.metric for g in res.gap_closed} == set(xp.KEYS)
    for kind in xp.KINDS:
        gap = find_gap(res.gap_closed, kind)
        assert gap.rate == pytest.approx(rate[kind])
        if span:
            assert gap.gap_closed == pytest.approx((rate[kind] - rate["none"]) / span)
        else:
            assert math.isnan(gap.gap_closed)
    assert {v.subject for v in res.history_vs} == set(xp.KINDS) - {"history"}
    versus = find_contrast(res.history_vs, "none").differences["goal_reach_rate"]
    assert versus.diff == pytest.approx(rate["history"] - rate["none"])


@pytest.mark.slow
def test_a_rerun_reuses_the_collection_and_the_fits_the_policies_were_trained_in(
    tiny_run: tuple[Path, ResultsFile[xp.GroundingResults]], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, returned = tiny_run
    args = ExperimentArgs(out=out, sizes=TINY, action_lag_steps=1, budget=100, command="tiny")
    st = TINY_SETTINGS.with_flags(args)
    data = out / "target_transitions"
    ckpt = Path(find_cell(returned.results.cells, "none").checkpoints[0])

    def refuse(*a: Any, **kw: Any) -> None:
        raise AssertionError("redone")

    monkeypatch.setattr(stages, "collect", refuse)
    monkeypatch.setattr(stages, "ground", refuse)
    # the same inputs: nothing is recorded or fitted again, and the fits are the first run's
    meta = xp.collect_target(data, st, TINY.train_agents, args.seed, ckpt)
    assert returned.results.target_data is not None
    assert meta.transitions == returned.results.target_data.transitions
    fits = xp.fit_groundings(data, st, ["sysid", "history"], out / "groundings", args.seed)
    first = json.loads((out / "groundings" / "sysid" / "config.json").read_text())
    assert fits["sysid"].heldout == first["heldout"]
    assert fits["history"] == returned.results.groundings["history"]
    # other inputs (another seed; other fit settings) run the stage again
    with pytest.raises(AssertionError, match="redone"):
        xp.collect_target(data, st, TINY.train_agents, args.seed + 1, ckpt)
    with pytest.raises(AssertionError, match="redone"):
        xp.fit_groundings(data, replace(st, fit_steps=11), ["markov"], out / "groundings", args.seed)
    # a fit that started again and stopped midway is not taken for finished
    assert not (out / "groundings" / "markov" / "stage.json").exists()


def test_a_finished_stage_this_version_cannot_read_is_a_clear_error(tmp_path: Path) -> None:
    """A stage record with the right inputs but a result that does not read: refused, naming the
    file and the field (redoing it silently would change what later stages were built on)."""
    st = stages.GroundingSettings(budget=100, collect_worlds=2)
    folder = tmp_path / "data"
    key = stages.collection_key(st, 2, 0, None)
    finish_stage(folder, key, {"transitions": 5, "steps": "many", "wall_s": 1.0, "collect_attempts": 1})
    with pytest.raises(UserError, match=r"stage\.json: field 'result\.steps': expected an integer"):
        stages.collect_target(folder, st, 2, 0, None)


def test_bad_checkpoint_kind_and_foreign_flags_are_clear_errors(
    tmp_path: Path, cli_error: Callable[..., str]
) -> None:
    ckpt = tmp_path / "p.pt"
    ckpt.write_bytes(b"")

    def error(*argv: str) -> str:
        return cli_error("experiment", *argv, "--out", str(tmp_path / "o"))

    err = error("grounding", "--checkpoint", f"ice={ckpt}")
    assert "kind 'ice' unknown" in err and "'history'" in err and "'oracle'" in err
    assert "experiment transfer does not take --budget" in error("transfer", "--budget", "5")
    assert "--action-lag-steps" in error("wet-road", "--action-lag-steps", "2")
    with pytest.raises(Exception, match="budget must be an integer >= 1"):
        xp.GroundingSettings(budget=0)


def test_target_collection_is_redone_longer_when_it_falls_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def fake_collect(out: Path, **kw: Any) -> dict[str, Any]:
        calls.append(kw["steps"])
        assert kw["engine"] == st.target and st.target.action_lag_steps == 3  # the lagged target
        out.mkdir(parents=True)
        return {"transitions": yields[len(calls) - 1], "steps": kw["steps"]}

    monkeypatch.setattr(stages, "collect", fake_collect)
    st = xp.GroundingSettings(budget=1000, collect_worlds=4)
    need = math.ceil(stages.TRAIN_SPLIT_MARGIN * 1000 / (1 - stages.HOLDOUT_FRAC))
    yields = [need // 2, need + 1]  # agents finished early: the first pass is half of what is needed
    meta = xp.collect_target(tmp_path / "d", st, agents=2, seed=0, checkpoint=None)
    assert meta.attempts == 2 and calls[1] > 2 * calls[0] and meta.steps == calls[1]
    calls.clear()
    yields = [10] * stages.COLLECT_ATTEMPTS
    with pytest.raises(UserError, match="lower --budget"):
        xp.collect_target(tmp_path / "e", st, agents=2, seed=0, checkpoint=None)
    assert len(calls) == stages.COLLECT_ATTEMPTS
