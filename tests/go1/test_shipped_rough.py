"""The shipped rough-terrain policy (``--checkpoint rough``, a float16-packed file) does what its model
card says at a test size: ``eval go1`` gives its terrain table, it climbs 10 cm stairs, and the shipped
flat-ground policy, on the same tiles and seed, does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scenefactory.cli import main
from scenefactory.go1 import jobs as go1_jobs
from scenefactory.go1.train import load_go1_policy

ROUGH = go1_jobs.SHIPPED_POLICIES["rough"]


def _stairs(checkpoint: str, out: Path) -> dict[str, int]:
    """``eval go1`` on 10 cm stairs up (level 3), 8 episodes at each speed: successes per speed."""
    argv = ["--threads", "1", "eval", "go1", "--checkpoint", checkpoint, "--tables", "terrain"]
    argv += ["--terrain", "stairs_up", "--level", "3", "--episodes", "8", "--seed", "0", "--out", str(out)]
    assert main(argv) == 0
    result = json.loads((out / "metrics.json").read_text())
    assert result["checkpoint"] == str(go1_jobs.resolve_checkpoint(Path(checkpoint)))
    assert "| stairs_up | 3 |" in (out / "report.md").read_text()
    return {f"{r['speed_mps']:g}": r["successes"] for r in result["terrain"]}


def test_the_shipped_rough_policy_climbs_stairs_the_flat_one_does_not(tmp_path: Path) -> None:
    policy = load_go1_policy(ROUGH)
    assert policy.task_cfg.terrain.kind != "flat" and not policy.task_cfg.terrain.height_scan_actor
    assert policy.task_cfg.history == 25  # the recipe's 25 frames, packed: under the size limit
    rough = _stairs("rough", tmp_path / "rough")
    flat = _stairs("whole-body", tmp_path / "flat")
    assert list(rough) == ["0.5", "1"]
    # the model card's table: 128 episodes each, 10 cm stairs up in about 0.95 of tries
    assert all(n >= 6 for n in rough.values()), rough
    assert all(n <= 2 for n in flat.values()), flat  # its card: flat ground only, it climbs no stairs


def test_the_shipped_names_are_files_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file or folder called ``rough`` in the working directory is what ``--checkpoint rough``
    means; the shipped policy only when there is none."""
    monkeypatch.chdir(tmp_path)
    assert go1_jobs.resolve_checkpoint(Path("rough")) == ROUGH
    (tmp_path / "rough").mkdir()
    assert go1_jobs.resolve_checkpoint(Path("rough")) == Path("rough")
    assert go1_jobs.resolve_checkpoint(Path("nope")) == Path("nope")
