"""Seed-level statistics of a report folder: Student-t and Welch intervals over training seeds."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from scenefactory.cli import main
from scenefactory.experiments.seed_level import paired_difference, t_interval, welch_difference

T975_DF2 = 4.302652729911275  # Student-t 97.5 % quantile, 2 degrees of freedom (tables)
T975_DF4 = 2.7764451051977987


def test_t_interval_uses_the_student_t_quantile_of_n_minus_1_df() -> None:
    out = t_interval([1.0, 2.0, 3.0])
    half = T975_DF2 * 1.0 / math.sqrt(3)  # sd of 1, 2, 3 is 1
    assert out["mean"] == pytest.approx(2.0)
    assert out["ci95"] == pytest.approx([2.0 - half, 2.0 + half])
    with pytest.raises(ValueError, match="at least 2 seeds, got 1"):
        t_interval([1.0])


def test_welch_with_equal_spread_has_the_pooled_df() -> None:
    a, b = [1.0, 2.0, 3.0], [3.0, 4.0, 5.0]  # equal variances and sizes: df = 2 (n − 1) = 4
    out = welch_difference(a, b)
    half = T975_DF4 * math.sqrt(1 / 3 + 1 / 3)
    assert out["diff"] == pytest.approx(-2.0) and out["df"] == pytest.approx(4.0)
    assert out["ci95"] == pytest.approx([-2.0 - half, -2.0 + half])


def test_paired_differences_are_tighter_when_seeds_move_together() -> None:
    a, b = [10.0, 20.0, 30.0], [9.0, 19.1, 28.9]  # large spread between seeds, steady difference
    paired, unpaired = paired_difference(a, b), welch_difference(a, b)
    assert paired["diff"] == pytest.approx(unpaired["diff"]) == pytest.approx(1.0)
    assert paired["ci95"][0] > 0 > unpaired["ci95"][0]


def test_rate_intervals_are_clipped_to_0_1(tmp_path: Path) -> None:
    from scenefactory.experiments.seed_level import seed_level

    per = [{"goal_reach_rate": g, "collision_rate": c} for g, c in ((1.0, 0.0), (0.9, 0.1))]
    out = seed_level({"results": {"cells": {"k": {"per_policy": per}}}})["cells"]["k"]
    assert out["goal_reach_rate"]["ci95"][1] == 1.0 and out["collision_rate"]["ci95"][0] == 0.0
    assert out["goal_reach_rate"]["ci95"][0] < 0.9  # the other end is the t interval's
    # a report (strict=False) leaves out what it cannot compare instead of failing at the end of a run
    lenient = seed_level(
        {"results": {"cells": {"k": {"per_policy": per}, "x": {}}}}, [("k", "gone")], strict=False
    )
    assert lenient["comparisons"] == [] and list(lenient["cells"]) == ["k"]


def _report(folder: Path) -> Path:
    def policy(seed: int, goal: float, drac: float) -> dict[str, float | int]:
        return {"trained_seed": seed, "goal_reach_rate": goal, "mean_peak_drac_mps2": drac}

    cells = {
        "aware|wet": {"per_policy": [policy(0, 0.8, 10.0), policy(1, 0.9, 11.0), policy(2, 0.85, 12.0)]},
        # seeds listed in another order: pairing goes by trained_seed, not by position
        "unaware|wet": {"per_policy": [policy(2, 0.8, 15.0), policy(0, 0.7, 13.0), policy(1, 0.9, 14.0)]},
        "single|wet": {"per_policy": [policy(5, 0.5, 1.0)]},
        "other|wet": {"per_policy": [policy(3, 0.5, 1.0), policy(4, 0.6, 2.0)]},
    }
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"experiment": "wet-road", "results": {"cells": cells}}))
    return folder


def test_cli_writes_seed_level_tables_and_pairs_by_seed(tmp_path: Path) -> None:
    folder = _report(tmp_path / "xp")
    argv = ["seed-level", str(folder), "--compare", "aware|wet", "unaware|wet"]
    assert main(argv) == 0
    doc = json.loads((folder / "seed_level.json").read_text())
    assert doc["experiment"] == "wet-road"
    aware = doc["cells"]["aware|wet"]
    assert aware["seeds"] == [0, 1, 2] and aware["goal_reach_rate"]["per_seed"] == [0.8, 0.9, 0.85]
    assert "ci95" not in doc["cells"]["single|wet"]["goal_reach_rate"]  # one seed: no interval
    goal = doc["cells"]["unaware|wet"]["goal_reach_rate"]  # 0.8 / 0.7 / 0.9: 0.8 ± 0.248, clipped at 1
    assert goal["ci95"] == pytest.approx([0.8 - T975_DF2 * 0.1 / math.sqrt(3), 1.0])
    drac = doc["cells"]["aware|wet"]["mean_peak_drac_mps2"]
    assert drac["ci95"][0] == pytest.approx(11.0 - T975_DF2 / math.sqrt(3))  # not a rate: not clipped
    welch = doc["comparisons"][0]["mean_peak_drac_mps2"]
    assert welch["test"] == "welch" and welch["diff"] == pytest.approx(-3.0)
    md = (folder / "seed_level.md").read_text()
    assert "| aware\\|wet − unaware\\|wet | Welch |" in md  # pipes in cell names are escaped
    assert "n/a (1 seed)" in md

    assert main([*argv, "--paired"]) == 0
    paired = json.loads((folder / "seed_level.json").read_text())["comparisons"][0]
    # matched by seed: 10-13, 11-14, 12-15 — a constant −3, so the paired interval has no width
    assert paired["mean_peak_drac_mps2"]["ci95"] == pytest.approx([-3.0, -3.0])
    assert paired["goal_reach_rate"]["diff"] == pytest.approx((0.1 + 0.0 + 0.05) / 3)


def test_bad_input_names_the_file_or_cell(tmp_path: Path, cli_error: Callable[..., str]) -> None:
    def error(*argv: str) -> str:
        return cli_error("seed-level", *argv)

    assert "results.json: not found (expected an experiment's report folder)" in error(str(tmp_path))
    folder = _report(tmp_path / "xp")
    assert "no cell 'nope|wet'; expected one of aware|wet, unaware|wet, single|wet, other|wet" in error(
        str(folder), "--compare", "aware|wet", "nope|wet"
    )
    err = error(str(folder), "--compare", "aware|wet", "single|wet")
    assert "cell 'single|wet' has 1 policy; a seed-level difference needs 2 or more per side" in err
    err = error(str(folder), "--paired", "--compare", "aware|wet", "other|wet")
    assert "different training seeds ([0, 1, 2] vs [3, 4])" in err
    (folder / "results.json").write_text("{broken")
    assert "results.json: not valid JSON" in error(str(folder))
