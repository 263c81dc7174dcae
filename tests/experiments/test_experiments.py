"""Experiments: the registry, bad input as one clear line, and tiny end-to-end runs that write a
report folder with finite numbers (sizes are absurdly small: these check the plumbing, not results)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from scenefactory.cli import main
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.experiments import EXPERIMENTS, ExperimentArgs, Sizes, get_experiment, read_results
from scenefactory.experiments.base import policies
from scenefactory.experiments.log_grounding import log_divergence
from scenefactory.experiments.results import find_cell, find_contrast
from scenefactory.experiments.tables import fmt_diff
from scenefactory.io import json_safe
from scenefactory.rl.driving_spec import TrainSpec
from scenefactory.rl.ppo import PPOConfig
from scenefactory.tasks.driving.config import DrivingTaskConfig, ObservationConfig

TINY = Sizes(seeds=1, train_worlds=2, train_agents=2, iterations=1, train_scenes=2, episodes=2, eval_worlds=2)


def _tiny_spec(aware: bool, seed: int) -> TrainSpec:
    """2 worlds × 2 agents, 4-second episodes, 4 steps per PPO iteration."""
    task = DrivingTaskConfig(
        num_worlds=2,
        agents_per_world=2,
        episode_length_s=4.0,
        observations=ObservationConfig(friction_aware=aware),
    )
    ppo = PPOConfig(num_steps_per_env=4, num_mini_batches=1, num_learning_epochs=1)
    return TrainSpec(
        task=task, ppo=ppo, engine=EngineSpec("kinematic"), iterations=1, seed=seed, num_train_scenes=2
    )


@pytest.fixture(scope="module")
def tiny_policies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A friction-aware and a friction-unaware policy, trained through the experiments' own path."""
    out = tmp_path_factory.mktemp("xp")
    args = ExperimentArgs(out=out)
    aware = policies("aware", [], lambda s: _tiny_spec(True, s), args, TINY)
    unaware = policies("unaware", [], lambda s: _tiny_spec(False, s), args, TINY)
    mujoco = policies(  # the mujoco tier's kind takes mujoco-trained policies only
        "mujoco",
        [],
        lambda s: replace(_tiny_spec(True, s), engine=EngineSpec("mujoco", physics_hz=100.0)),
        args,
        TINY,
    )
    assert aware == [out / "train" / "aware_s0" / "checkpoints" / "latest.pt"]
    assert (out / "train" / "aware_s0" / "learning_curve.png").is_file()
    return {"aware": aware[0], "unaware": unaware[0], "mujoco": mujoco[0]}


def _finite_numbers(doc: Any) -> list[float]:
    if isinstance(doc, dict):
        return [x for v in doc.values() for x in _finite_numbers(v)]
    if isinstance(doc, list):
        return [x for v in doc for x in _finite_numbers(v)]
    return [float(doc)] if isinstance(doc, int | float) and not isinstance(doc, bool) else []


def test_registry_names_and_lookup() -> None:
    assert list(EXPERIMENTS) == [
        "transfer",
        "friction-change",
        "wet-road",
        "log-grounding",
        "grounding",
        "matrix",
        "go1-navigation",
    ]
    for name, e in EXPERIMENTS.items():
        assert e.name == name and callable(e.run) and e.summary
    assert get_experiment("wet-road").kinds == ("aware", "unaware")
    with pytest.raises(
        UserError, match="unknown experiment 'nope': expected one of transfer, friction-change"
    ):
        get_experiment("nope")


def test_sizes_resolve_quick_full_and_flag_overrides(tmp_path: Path) -> None:
    full = Sizes(seeds=3, train_worlds=128, train_agents=8, iterations=200, train_scenes=120, episodes=100)
    quick = Sizes(seeds=1, train_worlds=16, train_agents=4, iterations=20, train_scenes=24, episodes=16)
    assert ExperimentArgs(out=tmp_path).resolve(full, quick) == full
    assert ExperimentArgs(out=tmp_path, quick=True).resolve(full, quick) == quick
    got = ExperimentArgs(out=tmp_path, quick=True, seeds=2, episodes=5, iterations=7).resolve(full, quick)
    assert (got.seeds, got.episodes, got.iterations, got.train_worlds) == (2, 5, 7, 16)
    with pytest.raises(UserError, match="seeds must be a positive integer"):
        Sizes(seeds=0, train_worlds=1, train_agents=1, iterations=1, train_scenes=1, episodes=1)


def test_bad_input_is_one_line_naming_the_thing(
    tmp_path: Path, tiny_policies: dict[str, Path], cli_error: Callable[..., str]
) -> None:
    def error(*argv: str) -> str:
        return cli_error("experiment", *argv, "--out", str(tmp_path / "o"))

    assert "unknown experiment 'nope'" in error("nope")
    missing = tmp_path / "missing.pt"
    assert f"mujoco={missing}: checkpoint not found" in error(
        "friction-change", "--checkpoint", f"mujoco={missing}"
    )
    assert "kind 'ice'" in error("friction-change", "--checkpoint", f"ice={tiny_policies['aware']}")
    wrong = f"unaware={tiny_policies['aware']}"
    assert f"--checkpoint {wrong}: that policy observes road friction" in error(
        "wet-road", "--checkpoint", wrong
    )
    assert "needs --scenes DIR" in error("log-grounding")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert f"'{empty}' holds no *.json scene files" in error("log-grounding", "--scenes", str(empty))


def test_friction_change_end_to_end(tmp_path: Path, tiny_policies: dict[str, Path]) -> None:
    out = tmp_path / "fc"
    ck = str(tiny_policies["aware"])
    argv = [
        "experiment",
        "friction-change",
        "--checkpoint",
        f"kinematic={ck}",
        "--checkpoint",
        f"mujoco={tiny_policies['mujoco']}",
    ]
    assert main([*argv, "--episodes", "2", "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    report = (out / "report.md").read_text()
    assert (out / "friction_change.png").stat().st_size > 10_000
    assert f"--checkpoint kinematic={ck}" in report and doc["command"].startswith("scenefactory experiment")
    cells = doc["results"]["cells"]
    assert [(c["kind"], c["eval_tier"], c["condition"]) for c in cells] == [
        (t, "mujoco", c) for t in ("kinematic", "mujoco") for c in ("dry (no change)", "dry → ice at 3 s")
    ]
    for cell in cells:
        m = cell["metrics"]
        assert m["episodes"] >= 2 and m["policies"] == 1 and len(cell["policies"]) == 1
        for key in (
            "goal_reach_rate",
            "collision_rate",
            "offroad_rate",
            "mean_peak_drac_mps2",
            "high_drac_rate",
        ):
            assert math.isfinite(m[key]) and all(math.isfinite(x) for x in m[f"{key}_ci95"])
    assert [e["subject"] for e in doc["results"]["effects"]] == ["kinematic", "mujoco"]
    assert all(math.isfinite(x) for x in _finite_numbers(doc["results"]["effects"]))
    # the file reads back into the typed results it was written from
    typed = read_results(out / "results.json")
    assert typed.experiment == "friction-change" and json_safe(typed.to_json()) == doc
    assert doc["seeds"] == {"kinematic": "given checkpoints", "mujoco": "given checkpoints"}
    assert "sizes: train_worlds" in report and "seeds 3" not in report  # no seed was trained here
    assert "## Seed level" not in report and "seed_level" not in doc  # one policy per kind


def test_reports_with_several_policies_of_a_kind_have_seed_level_intervals(
    tmp_path: Path, tiny_policies: dict[str, Path]
) -> None:
    """Two kinematic policies: the report gains the seed-level section, paired over the policies
    (each drives both roads); the mujoco tier, with one policy, has no interval."""
    out = tmp_path / "fc2"
    a, u = str(tiny_policies["aware"]), str(tiny_policies["unaware"])
    m = str(tiny_policies["mujoco"])
    argv = [
        "experiment",
        "friction-change",
        "--checkpoint",
        f"kinematic={a}",
        "--checkpoint",
        f"kinematic={u}",
    ]
    assert main([*argv, "--checkpoint", f"mujoco={m}", "--episodes", "2", "--out", str(out)]) == 0
    seed = read_results(out / "results.json").seed_level
    assert seed is not None
    kin = seed.cell("kinematic|dry (no change)").figures["goal_reach_rate"]
    assert len(kin.per_seed) == 2 and kin.summary is not None
    assert kin.summary.ci95[0] <= kin.summary.mean <= kin.summary.ci95[1]
    assert seed.cell("mujoco|dry (no change)").figures["goal_reach_rate"].summary is None
    [diff] = seed.comparisons  # the mujoco pair has one policy a side and is left out
    assert diff.a == "kinematic|dry → ice at 3 s" and diff.paired
    per = [
        seed.cell(f"kinematic|{c}").figures["goal_reach_rate"].per_seed
        for c in ("dry → ice at 3 s", "dry (no change)")
    ]
    want = sum(x - y for x, y in zip(*per, strict=True)) / 2  # type: ignore[operator]
    assert diff.differences["goal_reach_rate"].diff == pytest.approx(want)
    report = (out / "report.md").read_text()
    assert (
        "## Seed level" in report
        and "| kinematic\\|dry → ice at 3 s − kinematic\\|dry (no change) | paired t |" in report
    )


def test_wet_road_end_to_end(tmp_path: Path, tiny_policies: dict[str, Path]) -> None:
    out = tmp_path / "wet"
    given = [f"{k}={p}" for k, p in tiny_policies.items()]
    argv = ["experiment", "wet-road", "--checkpoint", given[0], "--checkpoint", given[1], "--episodes", "1"]
    assert main([*argv, "--out", str(out)]) == 0
    doc = read_results(out / "results.json")
    assert (out / "wet_road.png").is_file()
    # The report shows the measured differences (not only the template's reference figures).
    report = (out / "report.md").read_text()
    for road in ("wet", "heavy_rain"):
        measured = find_contrast(doc.results.aware_minus_unaware, road).differences["mean_peak_drac_mps2"]
        assert fmt_diff(measured, 2) in report
    cells = doc.results.cells
    assert [(c.kind, c.condition) for c in cells] == [
        (k, r) for r in ("wet", "heavy_rain") for k in ("aware", "unaware")
    ]
    assert all(math.isfinite(c.metrics["mean_peak_drac_mps2"]) for c in cells)
    assert [d.subject for d in doc.results.aware_minus_unaware] == ["wet", "heavy_rain"]


def test_log_grounding_end_to_end_and_the_engine_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scenefactory.experiments import log_grounding
    from scenefactory.grounding.ground import GroundConfig

    tiny_fits = {  # the real corrections, with fits small enough for a test
        m.value: log_grounding.grounding_correction(
            GroundConfig(
                method=m,
                train_steps=10,
                sysid_iterations=2,
                sysid_windows=64,
                gat_sim_transitions=100,
                history_len=4,
            )
        )
        for m in log_grounding.CORRECTED
    }
    monkeypatch.setattr(log_grounding, "QUICK_CORRECTIONS", tiny_fits)
    from scenefactory.scenes.library import load_scene_dir
    from scenefactory.scenes.scene_json import save_scene
    from scenefactory.scenes.womd.convert import scenario_to_scene
    from test_womd_reader import make_scenario

    folder = tmp_path / "scenes"
    for i in range(3):
        save_scene(scenario_to_scene(make_scenario(f"s{i}", 2))[0], folder / f"s{i}.json")
    out = tmp_path / "lg"
    argv = ["experiment", "log-grounding", "--quick", "--scenes", str(folder), "--out", str(out)]
    assert main(argv) == 0
    doc = read_results(out / "results.json")
    engines = doc.results.engines
    corrected = [f"kinematic + {m}" for m in ("dr", "sysid", "markov", "gat", "history")]
    assert list(engines) == ["kinematic (uncorrected)", "mujoco (physics tier)", *corrected]
    for name in corrected:  # every grounding method fitted on the training logs and replayed
        assert engines[name].agents == engines["kinematic (uncorrected)"].agents, name
        assert math.isfinite(engines[name].ade_m), name
    assert (out / "groundings" / "history" / "config.json").is_file()
    kin = engines["kinematic (uncorrected)"]
    assert kin.agents >= 2 and 0.0 <= kin.ade_m < 0.5  # straight constant-speed logs
    assert [h.horizon_s for h in kin.fde] == [1.0, 3.0, 5.0, 8.0]
    assert math.isfinite(kin.at(1.0).mean_m) and (out / "log_divergence.png").is_file()
    assert (out / "train_transitions" / "meta.json").is_file()
    assert len(doc.config["heldout_scenes"]) + len(doc.config["train_scenes"]) == 3
    # the human baseline: the held-out logged drivers closed loop on the reference engines
    humans = doc.results.human_baseline
    assert list(humans) == ["kinematic (uncorrected)", "mujoco (physics tier)"]
    assert all(h["episodes"] == kin.logged_agents for h in humans.values())
    assert doc.results.agents["controlled"] == kin.logged_agents
    assert doc.results.cells == () and doc.seed_level is None
    assert "Logged drivers on the reference engines" in (out / "report.md").read_text()

    # the hook: a correction is a function of the training transitions that returns an engine maker
    seen: list[Path] = []

    def shifted(data: Path, params: Any, dt: float) -> Any:
        seen.append(data)

        def make(worlds: int, agents: int, dt: float, params: Any) -> Any:
            return log_grounding._kinematic(worlds, agents, dt, params)

        return make

    args = ExperimentArgs(out=tmp_path / "lg2", scenes_dir=folder)
    rows = log_grounding.run(args, corrections={"identity": shifted}).results.engines
    assert seen == [tmp_path / "lg2" / "train_transitions"]
    assert rows["kinematic + identity"].ade_m == pytest.approx(rows["kinematic (uncorrected)"].ade_m)
    # and the divergence function takes any engine maker directly
    every = log_divergence(log_grounding._kinematic, load_scene_dir(folder))
    assert every.scenes == 3 and every.agents == 6


def test_transfer_is_in_the_registry_and_keeps_its_flags(
    tmp_path: Path, tiny_policies: dict[str, Path]
) -> None:
    out = tmp_path / "transfer"
    ck = tiny_policies["aware"]
    mj = tiny_policies["mujoco"]
    argv = ["experiment", "transfer", "--checkpoint", f"kinematic={ck}", "--checkpoint", f"mujoco={mj}"]
    assert main([*argv, "--episodes", "1", "--iterations", "3", "--seed", "0", "--out", str(out)]) == 0
    for name in ("report.md", "results.json", "transfer.md", "transfer.json", "transfer.png"):
        assert (out / name).is_file(), name
    doc = read_results(out / "results.json")
    cells = doc.results.cells
    assert [(c.kind, c.eval_tier) for c in cells] == [
        (t, e) for t in ("kinematic", "mujoco") for e in ("kinematic", "mujoco")
    ]
    cell = find_cell(cells, "mujoco", "kinematic")
    assert cell.metrics["episodes"] >= 1 and cell.checkpoints == [str(mj)]
    # transfer.json keeps the table's form: the cells under <trained>-><evaluated>
    matrix = json.loads((out / "transfer.json").read_text())
    assert matrix["cells"]["mujoco->kinematic"]["goal_reach_rate"] == cell.metrics["goal_reach_rate"]
    assert matrix["trained_on"] == matrix["evaluated_on"] == ["kinematic", "mujoco"]


def test_policies_of_one_kind_are_pooled(tiny_policies: dict[str, Path]) -> None:
    """Two policies on the same scenes: the pooled record holds both sets of agent-episodes."""
    from scenefactory.experiments.base import evaluate_pooled, rate_difference
    from scenefactory.experiments.transfer import _pool
    from scenefactory.scenes.library import procedural_scenes

    ck = tiny_policies["aware"]
    scenes = lambda k: procedural_scenes("eval", 2, k)  # noqa: E731
    pooled = evaluate_pooled([ck, ck], scenes, EngineSpec("kinematic"), 0, 2)
    one = pooled.policies[0].metrics
    assert pooled.metrics["policies"] == 2 and pooled.metrics["episodes"] == 2 * one["episodes"]
    assert pooled.metrics["goal_reach_rate"] == pytest.approx(one["goal_reach_rate"])  # same policy twice
    assert rate_difference(pooled.metrics, one, "goal_reach_rate").diff == pytest.approx(0.0)
    assert pooled.policies[0].trained_seed == 0 and pooled.policies[0].trained_on == "kinematic"
    cells = [
        {"episodes": 10, "goal_reach_rate": 0.5, "collision_rate": 0.1, "offroad_rate": 0.0},
        {"episodes": 30, "goal_reach_rate": 0.9, "collision_rate": 0.0, "offroad_rate": 0.1},
    ]
    p = _pool(cells)
    assert p["episodes"] == 40 and p["goal_reach_rate"] == pytest.approx(32 / 40)
    assert p["collision_rate"] == pytest.approx(1 / 40) and p["offroad_rate"] == pytest.approx(3 / 40)
