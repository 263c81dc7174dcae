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

from scenefactory.experiments import ExperimentArgs, Sizes
from scenefactory.experiments import grounding as xp
from scenefactory.experiments.gap import DRAWS, SceneCounts, gap_closed, gap_difference

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
    assert got["m"]["rate"] == pytest.approx(0.7)
    assert got["m"]["gap_closed"] == pytest.approx(0.5)
    assert got["none"]["gap_closed"] == 0.0 and got["oracle"]["gap_closed"] == 1.0
    lo, hi = got["m"]["gap_closed_ci95"]
    assert 0.2 < lo < 0.5 < hi < 0.8 and got["m"]["draws_used"] == DRAWS
    d = gap_difference({"none": base, "m": mid, "oracle": top}, "m", "none", "none", "oracle", seed=1)
    assert d["diff"] == pytest.approx(0.5) and d["ci95"][0] < 0.5 < d["ci95"][1]
    # no gap: undefined, and every draw without a gap is counted
    tie = gap_closed({"none": base, "m": mid, "oracle": base}, "none", "oracle")
    assert math.isnan(tie["m"]["gap_closed"]) and tie["m"]["draws_without_gap"] == DRAWS
    with pytest.raises(ValueError, match="same scenes"):
        gap_closed({"none": base, "oracle": _counts([1, 2])}, "none", "oracle")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("grounding")
    args = ExperimentArgs(out=out, sizes=TINY, action_lag_steps=1, budget=100, command="tiny")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny batches: more threads only spin
    try:
        return out, xp.run(args, settings=TINY_SETTINGS)
    finally:
        torch.set_num_threads(threads)


def test_every_method_row_budget_and_gap_are_reported(tiny_run: tuple[Path, dict[str, Any]]) -> None:
    out, returned = tiny_run
    for name in ("report.md", "results.json", "outcomes.png", "gap_closed.png"):
        assert (out / name).is_file(), name
    doc = json.loads((out / "results.json").read_text())  # strict JSON: NaN is null
    assert doc["experiment"] == returned["experiment"] == "grounding"
    res, report = doc["results"], (out / "report.md").read_text()
    kinds = ["none", "dr", "sysid", "markov", "gat", "history", "oracle"]
    assert list(res["cells"]) == list(xp.KINDS) == kinds
    for kind, cell in res["cells"].items():  # a row per kind in both tables, the history row in bold
        label = f"**{kind}**" if kind == "history" else kind
        assert report.count(f"| {label} | {cell['trained_on']} |") == 2, kind
    # every policy also drove the held-out scenes on mujoco without the lag and on kinematic
    assert list(res["other_tiers"]) == ["mujoco", "kinematic"] and "## Every policy on each tier" in report
    for tier, by_kind in res["other_tiers"].items():
        assert list(by_kind) == kinds, tier
        for kind, m in by_kind.items():
            assert m["episodes"] == res["cells"][kind]["episodes"] and 0.0 <= m["goal_reach_rate"] <= 1.0
    assert "goal reach on kinematic" in report
    # the flags reached the target and the fits: lag 1, 100 target transitions per fit
    assert doc["config"]["settings"]["action_lag_steps"] == 1 and doc["config"]["settings"]["budget"] == 100
    assert res["target_data"]["action_lag_steps"] == 1 and res["target_data"]["engine"] == "mujoco"
    assert "at most **100 target transitions**" in report and "lag of 1 policy steps" in report
    used = {k: c["target_transitions"] for k, c in res["cells"].items()}
    assert used["none"] == 0 and used["dr"] == 0 and used["oracle"] > 0
    assert all(used[m] == 100 for m in ("sysid", "markov", "gat", "history"))
    for m in ("dr", "sysid", "markov", "gat", "history"):
        cfg = json.loads((out / "groundings" / m / "config.json").read_text())
        assert cfg["method"] == m and cfg["budget_transitions"] == used[m]
    # the gap fraction is the rows' arithmetic (or undefined when the oracle ties direct transfer)
    gaps = res["gap_closed"]["goal_reach_rate"]
    rate = {k: c["goal_reach_rate"] for k, c in res["cells"].items()}
    span = rate["oracle"] - rate["none"]
    for kind in xp.KINDS:
        assert gaps[kind]["rate"] == pytest.approx(rate[kind])
        want = (rate[kind] - rate["none"]) / span if span else None
        assert gaps[kind]["gap_closed"] == (pytest.approx(want) if span else None)
    assert set(res["history_vs"]) == set(xp.KINDS) - {"history"}


def test_a_rerun_reuses_the_collection_and_the_fits_the_policies_were_trained_in(
    tiny_run: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from scenefactory.grounding import dataset, ground

    out, returned = tiny_run
    args = ExperimentArgs(out=out, sizes=TINY, action_lag_steps=1, budget=100, command="tiny")
    st = TINY_SETTINGS.with_flags(args)
    data = out / "target_transitions"
    ckpt = Path(returned["results"]["cells"]["none"]["checkpoints"][0])

    def refuse(*a: Any, **kw: Any) -> None:
        raise AssertionError("redone")

    monkeypatch.setattr(dataset, "collect", refuse)
    monkeypatch.setattr(ground, "ground", refuse)
    # the same inputs: nothing is recorded or fitted again, and the fits are the first run's
    meta = xp.collect_target(data, st, TINY.train_agents, args.seed, ckpt)
    assert meta["transitions"] == returned["results"]["target_data"]["transitions"]
    fits = xp.fit_groundings(data, st, ["sysid", "history"], out / "groundings", args.seed)
    first = json.loads((out / "groundings" / "sysid" / "config.json").read_text())
    assert fits["sysid"]["heldout"] == first["heldout"]
    # other inputs (another seed; other fit settings) run the stage again
    with pytest.raises(AssertionError, match="redone"):
        xp.collect_target(data, st, TINY.train_agents, args.seed + 1, ckpt)
    with pytest.raises(AssertionError, match="redone"):
        xp.fit_groundings(data, replace(st, fit_steps=11), ["markov"], out / "groundings", args.seed)
    # a fit that started again and stopped midway is not taken for finished
    assert not (out / "groundings" / "markov" / "stage.json").exists()


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
    from scenefactory.errors import UserError
    from scenefactory.grounding import dataset

    calls: list[int] = []

    def fake_collect(out: Path, **kw: Any) -> dict[str, Any]:
        calls.append(kw["steps"])
        out.mkdir(parents=True)
        return {"transitions": yields[len(calls) - 1]}

    monkeypatch.setattr(dataset, "collect", fake_collect)
    st = xp.GroundingSettings(budget=1000, collect_worlds=4)
    need = math.ceil(xp.TRAIN_SPLIT_MARGIN * 1000 / (1 - xp.HOLDOUT_FRAC))
    yields = [need // 2, need + 1]  # agents finished early: the first pass is half of what is needed
    meta = xp.collect_target(tmp_path / "d", st, agents=2, seed=0, checkpoint=None)
    assert meta["collect_attempts"] == 2 and calls[1] > 2 * calls[0]
    calls.clear()
    yields = [10] * xp.COLLECT_ATTEMPTS
    with pytest.raises(UserError, match="lower --budget"):
        xp.collect_target(tmp_path / "e", st, agents=2, seed=0, checkpoint=None)
    assert len(calls) == xp.COLLECT_ATTEMPTS
