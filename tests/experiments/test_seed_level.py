"""Seed-level statistics of typed cells: Student-t and Welch intervals over training seeds, the same
numbers as before the cells were typed, and the ``seed-level`` command on a report folder."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scenefactory.cli import main
from scenefactory.errors import UserError
from scenefactory.experiments.results import RESULTS_VERSION, Cell, PolicyFigures, Reader, cell_labels
from scenefactory.experiments.seed_level import (
    SeedLevel,
    cells_markdown,
    differences_markdown,
    paired_difference,
    seed_level,
    t_interval,
    welch_difference,
)
from scenefactory.io import json_safe

T975_DF2 = 4.302652729911275  # Student-t 97.5 % quantile, 2 degrees of freedom (tables)
T975_DF4 = 2.7764451051977987
BASELINE = Path(__file__).parents[1] / "data" / "seed_level_baseline"
"""``seed_level`` of the cells below as the code computed it before the cells were typed (cells
keyed ``kind->tier`` in ``results.json``): ``summary.json`` (Welch and paired), the tables ``*.md``."""


def test_t_interval_uses_the_student_t_quantile_of_n_minus_1_df() -> None:
    out = t_interval([1.0, 2.0, 3.0])
    half = T975_DF2 * 1.0 / math.sqrt(3)  # sd of 1, 2, 3 is 1
    assert out.mean == pytest.approx(2.0) and out.sd == pytest.approx(1.0) and out.n == 3
    assert out.ci95 == pytest.approx((2.0 - half, 2.0 + half))
    with pytest.raises(ValueError, match="at least 2 seeds, got 1"):
        t_interval([1.0])


def test_welch_with_equal_spread_has_the_pooled_df() -> None:
    a, b = [1.0, 2.0, 3.0], [3.0, 4.0, 5.0]  # equal variances and sizes: df = 2 (n − 1) = 4
    out = welch_difference(a, b)
    half = T975_DF4 * math.sqrt(1 / 3 + 1 / 3)
    assert out.diff == pytest.approx(-2.0) and out.df == pytest.approx(4.0) and out.test == "welch"
    assert out.ci95 == pytest.approx((-2.0 - half, -2.0 + half))


def test_paired_differences_are_tighter_when_seeds_move_together() -> None:
    a, b = [10.0, 20.0, 30.0], [9.0, 19.1, 28.9]  # large spread between seeds, steady difference
    paired, unpaired = paired_difference(a, b), welch_difference(a, b)
    assert paired.diff == pytest.approx(unpaired.diff) == pytest.approx(1.0)
    assert paired.ci95[0] > 0 > unpaired.ci95[0]


def _policy(seed: int | None, **figures: Any) -> PolicyFigures:
    return PolicyFigures(f"p{seed}.pt", "kinematic", seed, 1, 0.0, figures)


def _cell(kind: str, tier: str, condition: str, *policies: PolicyFigures) -> Cell:
    return Cell(kind, tier, condition, {"episodes": 10 * len(policies)}, policies)


def test_rate_intervals_are_clipped_to_0_1() -> None:
    per = (
        _policy(0, goal_reach_rate=1.0, collision_rate=0.0),
        _policy(1, goal_reach_rate=0.9, collision_rate=0.1),
    )
    k = _cell("k", "mujoco", "", *per)
    out = seed_level([k]).cell("k")
    goal, coll = out.figures["goal_reach_rate"].summary, out.figures["collision_rate"].summary
    assert goal is not None and coll is not None
    assert goal.ci95[1] == 1.0 and coll.ci95[0] == 0.0
    assert goal.ci95[0] < 0.9  # the other end is the t interval's
    # a report (strict=False) leaves out what it cannot compare instead of failing at the end of a run
    empty = _cell("x", "mujoco", "")
    single = _cell("s", "mujoco", "", _policy(3, goal_reach_rate=0.5))
    lenient = seed_level([k, empty, single], [(k, single), (k, empty)], strict=False)
    assert lenient.comparisons == () and [c.label for c in lenient.cells] == ["k", "s"]
    with pytest.raises(UserError, match="cell 's' has 1 policy"):
        seed_level([k, single], [(k, single)])
    with pytest.raises(UserError, match="cell 'x' has no per-policy figures"):
        seed_level([k, empty])


def _pol(seed: int, g: float, c: float | None, o: float, d: float, h: float) -> PolicyFigures:
    figures = {
        "goal_reach_rate": g,
        "collision_rate": c,
        "offroad_rate": o,
        "mean_peak_drac_mps2": d,
        "high_drac_rate": h,
    }
    return PolicyFigures(f"s{seed}.pt", None, seed, None, None, figures)


SYNTHETIC = (  # the set the baseline was computed on; seeds out of order in two cells
    _cell(
        "kinematic",
        "mujoco",
        "",
        _pol(0, 0.50, 0.20, 0.10, 12.5, 0.30),
        _pol(1, 0.62, 0.15, 0.05, 10.0, 0.25),
        _pol(2, 0.41, 0.25, 0.12, 14.0, 0.35),
    ),
    _cell(
        "mujoco",
        "mujoco",
        "",
        _pol(2, 0.90, 0.05, 0.01, 6.0, 0.10),
        _pol(0, 0.85, 0.04, 0.02, 7.5, 0.12),
        _pol(1, 0.95, 0.02, 0.00, 5.0, 0.05),
    ),
    _cell("mujoco", "kinematic", "", _pol(0, 0.97, 0.01, 0.0, 3.0, 0.02), _pol(1, 0.99, 0.0, 0.0, 2.5, 0.01)),
    _cell(
        "gap",
        "mujoco",
        "",
        _pol(0, 0.7, None, 0.1, 8.0, 0.2),
        _pol(1, 0.6, 0.1, 0.1, 9.0, 0.2),
        _pol(2, 0.65, 0.2, 0.1, math.nan, 0.2),
    ),
)


def _as_before(summary: SeedLevel) -> dict[str, Any]:
    """The summary in the untyped form the code returned before (cells by name, figures inline)."""
    cells = {
        c.label: {"seeds": list(c.seeds), **{m: f.to_json() for m, f in c.figures.items()}}
        for c in summary.cells
    }
    comparisons = [
        {"a": c.a, "b": c.b, "paired": c.paired, **{m: d.to_json() for m, d in c.differences.items()}}
        for c in summary.comparisons
    ]
    return {"cells": cells, "comparisons": comparisons}


def _close(got: Any, want: Any, where: str = "") -> None:
    """Every number equal to 1e-12 (relative), every other value equal, the same keys in order."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), where
        for k in want:
            _close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list | tuple) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _close(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15), where
    else:
        assert got == want, where


def test_typed_cells_give_the_same_numbers_as_before() -> None:
    """Welch and paired summaries of a fixed set of cells against what the untyped code computed."""
    k_mj, mj_mj, mj_kin, gap_mj = SYNTHETIC
    assert cell_labels(SYNTHETIC) == [
        "kinematic->mujoco",
        "mujoco->mujoco",
        "mujoco->kinematic",
        "gap->mujoco",
    ]
    want = json.loads((BASELINE / "summary.json").read_text())
    welch = seed_level(SYNTHETIC, [(mj_mj, k_mj), (mj_kin, k_mj), (gap_mj, k_mj)])
    paired = seed_level(SYNTHETIC, [(mj_mj, k_mj), (gap_mj, k_mj)], paired=True)
    _close(_as_before(welch), want["welch"], "welch")
    _close(_as_before(paired), want["paired"], "paired")
    # spot checks by hand: kinematic->mujoco goal reach 0.50 / 0.62 / 0.41
    goal = welch.cell("kinematic->mujoco").figures["goal_reach_rate"].summary
    assert goal is not None and goal.mean == pytest.approx(0.51)
    sd = math.sqrt(((0.50 - 0.51) ** 2 + (0.62 - 0.51) ** 2 + (0.41 - 0.51) ** 2) / 2)
    assert goal.ci95 == pytest.approx(
        (0.51 - T975_DF2 * sd / math.sqrt(3), 0.51 + T975_DF2 * sd / math.sqrt(3))
    )
    # paired by seed although mujoco->mujoco lists seeds 2, 0, 1: DRAC 7.5−12.5, 5.0−10.0, 6.0−14.0
    assert paired.comparisons[0].differences["mean_peak_drac_mps2"].diff == pytest.approx(-6.0)
    # a figure missing for a seed: no interval and no difference for it
    gap = welch.cell("gap->mujoco")
    assert gap.figures["collision_rate"].missing_seeds == (0,)
    assert "collision_rate" not in welch.comparisons[2].differences
    # the tables read the same as before
    assert differences_markdown(welch) + "\n" + cells_markdown(welch) == (BASELINE / "welch.md").read_text()
    assert (
        differences_markdown(paired) + "\n" + cells_markdown(paired) == (BASELINE / "paired.md").read_text()
    )


def test_the_summary_round_trips_through_json() -> None:
    k_mj, mj_mj, *_ = SYNTHETIC
    summary = seed_level(SYNTHETIC, [(mj_mj, k_mj)], paired=True)
    data = json.loads(json.dumps(json_safe(summary.to_json())))
    back = SeedLevel.from_json(Reader(data, "seed_level"))
    assert back == summary


def _report(folder: Path, cells: list[Cell]) -> Path:
    doc = {
        "version": RESULTS_VERSION,
        "experiment": "wet-road",
        "results": {"cells": [c.to_json() for c in cells]},
    }
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


def _wet_cells() -> list[Cell]:
    def policy(seed: int, goal: float, drac: float) -> PolicyFigures:
        return _policy(seed, goal_reach_rate=goal, mean_peak_drac_mps2=drac)

    return [
        _cell("aware", "mujoco", "wet", policy(0, 0.8, 10.0), policy(1, 0.9, 11.0), policy(2, 0.85, 12.0)),
        # seeds listed in another order: pairing goes by trained_seed, not by position
        _cell("unaware", "mujoco", "wet", policy(2, 0.8, 15.0), policy(0, 0.7, 13.0), policy(1, 0.9, 14.0)),
        _cell("single", "mujoco", "wet", policy(5, 0.5, 1.0)),
        _cell("other", "mujoco", "wet", policy(3, 0.5, 1.0), policy(4, 0.6, 2.0)),
        _cell("aware", "mujoco", "heavy_rain", policy(0, 0.7, 20.0), policy(1, 0.6, 21.0)),
    ]


def test_cli_writes_seed_level_tables_and_pairs_by_seed(tmp_path: Path) -> None:
    folder = _report(tmp_path / "xp", _wet_cells())
    argv = ["seed-level", str(folder), "--compare", "aware|wet", "unaware|wet"]
    assert main(argv) == 0
    doc = json.loads((folder / "seed_level.json").read_text())
    assert doc["experiment"] == "wet-road"
    cells = {c["label"]: c for c in doc["cells"]}
    aware = cells["aware|wet"]
    assert (aware["kind"], aware["condition"]) == ("aware", "wet")
    assert aware["seeds"] == [0, 1, 2] and aware["figures"]["goal_reach_rate"]["per_seed"] == [0.8, 0.9, 0.85]
    assert "ci95" not in cells["single|wet"]["figures"]["goal_reach_rate"]  # one seed: no interval
    goal = cells["unaware|wet"]["figures"]["goal_reach_rate"]  # 0.8 / 0.7 / 0.9: 0.8 ± 0.248, clipped at 1
    assert goal["ci95"] == pytest.approx([0.8 - T975_DF2 * 0.1 / math.sqrt(3), 1.0])
    drac = aware["figures"]["mean_peak_drac_mps2"]
    assert drac["ci95"][0] == pytest.approx(11.0 - T975_DF2 / math.sqrt(3))  # not a rate: not clipped
    welch = doc["comparisons"][0]["differences"]["mean_peak_drac_mps2"]
    assert welch["test"] == "welch" and welch["diff"] == pytest.approx(-3.0)
    md = (folder / "seed_level.md").read_text()
    assert "| aware\\|wet − unaware\\|wet | Welch |" in md  # pipes in cell names are escaped
    assert "n/a (1 seed)" in md

    assert main([*argv, "--paired"]) == 0
    paired = json.loads((folder / "seed_level.json").read_text())["comparisons"][0]["differences"]
    # matched by seed: 10-13, 11-14, 12-15 — a constant −3, so the paired interval has no width
    assert paired["mean_peak_drac_mps2"]["ci95"] == pytest.approx([-3.0, -3.0])
    assert paired["goal_reach_rate"]["diff"] == pytest.approx((0.1 + 0.0 + 0.05) / 3)


def test_bad_input_names_the_file_or_cell(tmp_path: Path, cli_error: Callable[..., str]) -> None:
    def error(*argv: str) -> str:
        return cli_error("seed-level", *argv)

    assert "results.json: not found (expected an experiment's report folder)" in error(str(tmp_path))
    folder = _report(tmp_path / "xp", _wet_cells())
    assert (
        "no cell 'nope|wet'; expected one of aware|wet, unaware|wet, single|wet, other|wet, aware|heavy_rain"
        in error(str(folder), "--compare", "aware|wet", "nope|wet")
    )
    err = error(str(folder), "--compare", "aware|wet", "single|wet")
    assert "cell 'single|wet' has 1 policy; a seed-level difference needs 2 or more per side" in err
    err = error(str(folder), "--paired", "--compare", "aware|wet", "other|wet")
    assert "different training seeds ([0, 1, 2] vs [3, 4])" in err
    (folder / "results.json").write_text("{broken")
    assert "results.json: not valid JSON" in error(str(folder))


def test_a_version_1_report_still_reads_with_the_same_figures(tmp_path: Path) -> None:
    """A report written before the results were typed (cells keyed by name, figures inline per
    policy, no ``version``): the cells keep the file's names and give the same numbers."""
    cells = _wet_cells()
    labels = cell_labels(cells)
    v1 = {
        label: {"per_policy": [{"trained_seed": p.trained_seed, **p.metrics} for p in c.policies]}
        for label, c in zip(labels, cells, strict=True)
    }
    old = tmp_path / "v1"
    old.mkdir()
    (old / "results.json").write_text(json.dumps({"experiment": "wet-road", "results": {"cells": v1}}))
    new = _report(tmp_path / "v2", cells)
    for folder in (old, new):
        assert main(["seed-level", str(folder), "--paired", "--compare", "aware|wet", "unaware|wet"]) == 0
    got, want = (json.loads((f / "seed_level.json").read_text()) for f in (old, new))
    assert [c["label"] for c in got["cells"]] == labels
    for a, b in zip(got["cells"], want["cells"], strict=True):
        assert (a["seeds"], a["figures"]) == (b["seeds"], b["figures"])
    assert got["comparisons"] == want["comparisons"]
    assert (old / "seed_level.md").read_text().split("\n", 3)[3] == (new / "seed_level.md").read_text().split(
        "\n", 3
    )[3]
