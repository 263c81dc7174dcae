"""``convert`` splits scenes into train and eval by their scenario id alone, and ``--scene-split``
loads one split of a converted folder (``scenes.library.load_scene_dir``)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from scenefactory.cli import main
from scenefactory.errors import UserError
from scenefactory.scenes.library import load_scene_dir
from scenefactory.scenes.womd.batch import convert_files, scene_split
from scenefactory.scenes.womd.synthetic import write_corpus

FRACTION = 0.5


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("corpus")
    return write_corpus(
        folder,
        10,
        seed=2,
        road_points=(1000, 1200),
        vehicles=(2, 3),
        scenarios_per_shard=4,
        parked=0,
        workers=1,
    )


@pytest.fixture(scope="module")
def out(shards: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("out")
    summary = convert_files(shards, folder, eval_fraction=FRACTION)
    assert summary["converted"] == 10 and not summary["errors"]
    return folder


def _splits(folder: Path) -> dict[str, str]:
    index = json.loads((folder / "index.json").read_text())
    return {sid: entry["split"] for sid, entry in index["scenes"].items()}


def test_the_split_is_a_hash_of_the_id(out: Path) -> None:
    splits = _splits(out)
    assert len(splits) == 10 and set(splits.values()) == {"train", "eval"}
    assert all(split == scene_split(sid, FRACTION) for sid, split in splits.items())
    summary = json.loads((out / "summary.json").read_text())
    counts = {s: sum(1 for v in splits.values() if v == s) for s in ("train", "eval")}
    assert summary["splits"] == counts and summary["eval_fraction"] == FRACTION
    assert json.loads((out / "index.json").read_text())["eval_fraction"] == FRACTION


def test_scene_split_edges_and_share() -> None:
    ids = [f"scenario-{i}" for i in range(4000)]
    assert all(scene_split(i, 0.0) == "train" and scene_split(i, 1.0) == "eval" for i in ids[:50])
    share = sum(scene_split(i, 0.1) == "eval" for i in ids) / len(ids)
    assert 0.08 < share < 0.12
    with pytest.raises(ValueError):
        scene_split("x", 1.5)


def test_same_split_in_another_order_with_workers_renamed_and_reconverted(
    shards: list[Path], out: Path, tmp_path: Path
) -> None:
    expected = _splits(out)
    other = tmp_path / "reversed"
    convert_files(list(reversed(shards)), other, workers=2, eval_fraction=FRACTION)
    assert _splits(other) == expected
    renamed = []
    for i, shard in enumerate(shards):  # other names, and the shards' order turned around by them
        renamed.append(tmp_path / f"part-{len(shards) - i}.tfrecord")
        shutil.copy(shard, renamed[-1])
    again = tmp_path / "renamed"
    convert_files(renamed, again, eval_fraction=FRACTION)
    assert _splits(again) == expected
    convert_files(renamed[:1], again, eval_fraction=FRACTION)  # re-converting one shard into the index
    assert _splits(again) == expected


def test_load_scene_dir_by_split(out: Path) -> None:
    splits = _splits(out)
    every = load_scene_dir(out / "json")
    assert sorted(sc.name for sc in every) == sorted(splits)
    for split in ("train", "eval"):
        names = sorted(sid for sid, s in splits.items() if s == split)
        assert [sc.name for sc in load_scene_dir(out / "json", split)] == names
        assert [sc.name for sc in load_scene_dir(out, split)] == names  # the index beside the files


def test_missing_index_empty_split_and_unknown_split_are_one_line_errors(
    shards: list[Path], out: Path, tmp_path: Path
) -> None:
    lone = tmp_path / "lone" / "scenes"
    lone.mkdir(parents=True)
    shutil.copy(next((out / "json").glob("*.json")), lone)
    with pytest.raises(UserError, match=r"no index\.json") as missing:
        load_scene_dir(lone, "eval")
    assert "\n" not in str(missing.value) and str(lone) in str(missing.value)
    assert len(load_scene_dir(lone)) == 1  # "all" needs no index
    none_eval = tmp_path / "none-eval"
    convert_files(shards[:1], none_eval, eval_fraction=0.0)
    with pytest.raises(UserError, match="holds no eval scenes") as empty:
        load_scene_dir(none_eval / "json", "eval")
    assert "\n" not in str(empty.value) and "json" in str(empty.value)
    with pytest.raises(UserError, match="unknown scene split"):
        load_scene_dir(out / "json", "test")


def test_cli_convert_flag_and_eval_on_the_eval_split(
    shards: list[Path],
    tmp_path: Path,
    cli_error: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    one_torch_thread: None,
) -> None:
    converted = tmp_path / "out"
    assert main(["convert", *map(str, shards), "--out", str(converted), "--eval-fraction", "0.5"]) == 0
    assert _splits(converted) == {sid: scene_split(sid, 0.5) for sid in _splits(converted)}
    evals = load_scene_dir(converted / "json", "eval")[:2]
    m_out = tmp_path / "expert"
    args = [
        "eval",
        "drive",
        "--policy",
        "expert",
        "--scenes",
        str(converted / "json"),
        "--scene-split",
        "eval",
    ]
    assert main([*args, "--episodes", "2", "--out", str(m_out)]) == 0
    metrics = json.loads((m_out / "metrics.json").read_text())
    assert metrics["scenes"] == 2 and metrics["episodes"] == sum(sc.num_agents for sc in evals)
    assert metrics["scene_split"].endswith(" split=eval")
    capsys.readouterr()
    bad = ["convert", str(shards[0]), "--out", str(tmp_path / "x"), "--eval-fraction", "2"]
    assert "--eval-fraction" in cli_error(*bad)
    assert "--scenes" in cli_error(
        "eval", "drive", "--policy", "expert", "--scene-split", "eval", "--out", "x"
    )
    assert "no index.json" in cli_error(
        *args[:5], str(tmp_path), "--scene-split", "train", "--out", str(m_out)
    )
