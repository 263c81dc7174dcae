"""Malformed inputs found by a CLI probe, by class: transition datasets (``fit-dynamics``/``ground``
``--data``), experiment reports (``seed-level``) and exported Go1 policies (``deploy go1``).

Every one is a one-line ``UserError`` naming the file and field (array, key) and what was expected,
raised before any work starts — for the dataset commands before the progress bar — never a
traceback, and never a silently wrong result (NaN transitions, NaN or mistyped report figures).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scenefactory.cli import main
from scenefactory.engines import EngineSpec
from scenefactory.errors import UserError
from scenefactory.experiments.results import RESULTS_VERSION, Cell, PolicyFigures
from scenefactory.experiments.seed_level import seed_level, write_seed_level
from scenefactory.grounding.dataset import DATASET_FORMAT, STATE_FIELDS, load_transitions
from scenefactory.jobs import data
from scenefactory.vehicles.params import VehicleParams

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
"""Any JSON value (Python's json module reads and writes NaN and Infinity)."""


def one_line(exc: BaseException) -> str:
    msg = str(exc)
    assert msg and "\n" not in msg, msg
    return msg


# --------------------------------------------------------------------------- transition datasets


def shard_arrays(episodes: int = 4, steps: int = 12, first_episode: int = 0) -> dict[str, np.ndarray]:
    """Plausible transitions: cars driving straight at 5 m/s, 0.1 s apart."""
    n = episodes * steps
    ep = np.repeat(np.arange(first_episode, first_episode + episodes), steps).astype(np.int64)
    step = np.tile(np.arange(steps), episodes).astype(np.int32)
    state = np.zeros((n, 6), dtype=np.float32)
    state[:, 0] = step * 0.5
    state[:, 1] = ep * 4.0
    state[:, 3] = 5.0
    nxt = state.copy()
    nxt[:, 0] += 0.5
    action = np.zeros((n, 2), dtype=np.float32)
    return {
        "state": state,
        "action": action,
        "next_state": nxt,
        "friction": np.full(n, 0.9, dtype=np.float32),
        "episode": ep,
        "step": step,
        "policy": np.ones(n, dtype=np.int8),
        "reward": np.zeros(n, dtype=np.float32),
    }


def write_shard(path: Path, arrays: dict[str, np.ndarray]) -> None:
    stream = io.BytesIO()
    np.savez(stream, **arrays)  # type: ignore[arg-type]
    path.write_bytes(stream.getvalue())


def good_meta(transitions: int, shards: int) -> dict[str, Any]:
    return {
        "format": DATASET_FORMAT,
        "engine": "kinematic",
        "engine_spec": EngineSpec().to_dict(),
        "policy_dt_s": 0.1,
        "vehicle": asdict(VehicleParams()),
        "state_fields": list(STATE_FIELDS),
        "policies": ["trained", "noisy", "random"],
        "transitions": transitions,
        "shards": shards,
    }


def make_dataset(folder: Path) -> Path:
    """Two shards of 4 episodes each (48 transitions a shard)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("shard_*.npz"):
        old.unlink()
    write_shard(folder / "shard_00000.npz", shard_arrays())
    write_shard(folder / "shard_00001.npz", shard_arrays(first_episode=4))
    (folder / "meta.json").write_text(json.dumps(good_meta(96, 2)))
    return folder


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return make_dataset(tmp_path / "data")


def test_a_good_dataset_loads(dataset: Path) -> None:
    data, meta = load_transitions(dataset, min_episodes=2)
    assert len(data["state"]) == meta["transitions"] == 96
    assert set(data) == {"state", "action", "next_state", "friction", "episode", "step", "policy", "reward"}


def _edit_meta(folder: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    edit(meta)
    (folder / "meta.json").write_text(json.dumps(meta))


def _edit_shard(folder: Path, edit: Callable[[dict[str, np.ndarray]], None], index: int = 1) -> None:
    path = folder / f"shard_{index:05d}.npz"
    with np.load(path) as z:
        arrays = {k: z[k].copy() for k in z.files}
    edit(arrays)
    write_shard(path, arrays)


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.__setitem__(key, value)


def _pop(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda d: d.pop(key)


def _nan_at(key: str, index: tuple[int, ...], value: float = math.nan) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        d[key][index] = value

    return edit


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (
            lambda f: (f / "meta.json").write_text('{"format": '),
            r"meta\.json: not valid JSON \(Expecting value",
        ),
        (lambda f: (f / "meta.json").write_bytes(b"\xff\xfe{}"), r"meta\.json: not UTF-8 text"),
        (lambda f: (f / "meta.json").write_text("[]"), r"meta\.json: expected a JSON object .*, got \[\]"),
        (lambda f: (f / "meta.json").unlink(), r"data: not a transition dataset \(no meta\.json"),
        (
            lambda f: _edit_meta(f, _set("format", "x/9")),
            r"field 'format': expected 'scenefactory\.transitions/1'",
        ),
        (
            lambda f: _edit_meta(f, _pop("shards")),
            r"field 'shards': expected a whole number >= 0, got nothing",
        ),
        (
            lambda f: _edit_meta(f, _set("shards", "2")),
            r"field 'shards': expected a whole number >= 0, got \"2\"",
        ),
        (
            lambda f: _edit_meta(f, _set("shards", 50)),
            r"2 shard files \(shard_\*\.npz\), but meta\.json field 'shards' says 50",
        ),
        (
            lambda f: _edit_meta(f, _set("transitions", 10**9)),
            r"field 'transitions' says 1000000000, but the shards hold 96",
        ),
        (
            lambda f: _edit_meta(f, _set("policy_dt_s", math.nan)),
            r"field 'policy_dt_s': expected a policy step in \(0, 10\] s, got NaN",
        ),
        (
            lambda f: _edit_meta(f, _pop("vehicle")),
            r"field 'vehicle': expected an object of wheelbase_m, .*got nothing",
        ),
        (
            lambda f: _edit_meta(f, lambda m: m["vehicle"].__setitem__("max_speed_mps", -1.0)),
            r"field 'vehicle': VehicleParams\.max_speed_mps must be positive",
        ),
        (
            lambda f: _edit_meta(f, lambda m: m["vehicle"].__setitem__("wings", 2)),
            r"field 'vehicle\.wings': unknown",
        ),
        (
            lambda f: _edit_meta(f, lambda m: m["vehicle"].__setitem__("length_m", "long")),
            r"field 'vehicle\.length_m': expected a finite number, got \"long\"",
        ),
        (
            lambda f: _edit_meta(f, _set("state_fields", ["x", "y"])),
            r"field 'state_fields': expected \[\"x_m\"",
        ),
        (
            lambda f: _edit_meta(f, lambda m: m["engine_spec"].__setitem__("action_lag_steps", -1)),
            r"field 'engine_spec': \S+ \(--action-lag-steps\): expected an integer in \[0, 100\], got -1",
        ),
        (
            lambda f: _edit_meta(f, _set("engine_spec", {"tier": "learned"})),
            r"field 'engine_spec': --engine learned needs --dynamics-model PATH",
        ),
        (  # a dataset collected before engine_spec: the flat fields are read as they were written
            lambda f: _edit_meta(f, lambda m: m.update(engine_spec=None, action_lag_steps=-1)),
            r"field 'engine': \S+ \(--action-lag-steps\): expected an integer in \[0, 100\], got -1",
        ),
        (
            lambda f: (f / "shard_00001.npz").write_bytes(b""),
            r"shard_00001\.npz: not a \.npz archive \(empty file",
        ),
        (
            lambda f: (f / "shard_00001.npz").write_bytes(b"\x80\x04junk" * 50),
            r"shard_00001\.npz: not a \.npz archive \(unknown bytes",
        ),
        (
            lambda f: _edit_shard(f, _pop("next_state")),
            r"shard_00001\.npz: array 'next_state' is missing; expected a shard holding state, action",
        ),
        (
            lambda f: _edit_shard(f, _pop("reward")),
            r"shard_00001\.npz: array 'reward' is missing; the dataset's first shard has it",
        ),
        (
            lambda f: _edit_shard(f, _set("scene", np.zeros(48, dtype=np.int32))),
            r"shard_00001\.npz: array 'scene' is here but not in the dataset's first shard",
        ),
        (
            lambda f: _edit_shard(f, _nan_at("state", (3, 2))),
            r"shard_00001\.npz: array 'state' holds 1 non-finite values \(first nan at row 3, column 2\)",
        ),
        (
            lambda f: _edit_shard(f, _nan_at("reward", (7,), math.inf)),
            r"shard_00001\.npz: array 'reward' holds 1 non-finite values \(first inf at row 7\)",
        ),
        (
            lambda f: _edit_shard(f, _nan_at("friction", (5,), 0.0)),
            r"shard_00001\.npz: array 'friction': expected friction coefficients in \(0, 2\], got 0 at row 5",
        ),
        (
            lambda f: _edit_shard(f, _set("action", np.zeros((48, 3), dtype=np.float32))),
            r"array 'action': expected shape \(N, 2\) with N = 48 transitions \(as 'state'\), got \(48, 3\)",
        ),
        (
            lambda f: _edit_shard(f, _set("step", np.zeros(47, dtype=np.int32))),
            r"array 'step': expected shape \(N,\) with N = 48 transitions \(as 'state'\), got \(47,\)",
        ),
        (
            lambda f: _edit_shard(f, _set("episode", np.zeros(48, dtype=np.float32))),
            r"array 'episode': expected integers, got dtype float32",
        ),
        (
            lambda f: _edit_shard(f, _set("state", np.full((48, 6), "x"))),
            r"array 'state': expected real numbers, got dtype <U1",
        ),
        (
            lambda f: _edit_shard(f, _set("state", np.array([object()] * 48, dtype=object))),
            r"not a readable dataset shard \(array 'state': holds Python objects, refused",
        ),
    ],
)
def test_broken_datasets_are_one_line_errors(
    dataset: Path, breakage: Callable[[Path], None], expected: str
) -> None:
    breakage(dataset)
    with pytest.raises(UserError, match=expected) as info:
        load_transitions(dataset)
    one_line(info.value)


def test_too_few_episodes_is_refused_when_asked(tmp_path: Path) -> None:
    folder = tmp_path / "one"
    folder.mkdir()
    write_shard(folder / "shard_00000.npz", shard_arrays(episodes=1))
    (folder / "meta.json").write_text(json.dumps(good_meta(12, 1)))
    load_transitions(folder)  # a valid dataset...
    with pytest.raises(UserError, match=r"holds 1 episode; expected at least 2 episodes"):
        load_transitions(folder, min_episodes=2)  # ...too small to hold episodes out
    (folder / "shard_00000.npz").unlink()
    (folder / "meta.json").write_text(json.dumps(good_meta(0, 0)))
    with pytest.raises(UserError, match="the dataset holds no transitions"):
        load_transitions(folder, min_episodes=2)


FIELDS = (
    "format",
    "shards",
    "transitions",
    "policy_dt_s",
    "vehicle",
    "state_fields",
    "engine",
    "engine_spec",
    "extra",
)


@given(field=st.sampled_from(FIELDS), value=JSON)
def test_any_meta_field_value_loads_or_is_a_user_error(dataset: Path, field: str, value: Any) -> None:
    meta = good_meta(96, 2)
    meta[field] = value
    (dataset / "meta.json").write_text(json.dumps(meta))
    try:
        data, _ = load_transitions(dataset)
    except UserError as exc:
        assert "meta.json" in one_line(exc)
    else:
        assert len(data["state"]) == 96


@given(value=JSON)
def test_any_json_document_as_meta_loads_or_is_a_user_error(dataset: Path, value: Any) -> None:
    (dataset / "meta.json").write_text(json.dumps(value))
    with pytest.raises(UserError, match=r"meta\.json"):
        load_transitions(dataset)


KEYS = ("state", "action", "next_state", "friction", "reward")


@given(
    key=st.sampled_from(KEYS),
    row=st.integers(0, 47),
    bad=st.sampled_from([math.nan, math.inf, -math.inf]),
)
def test_a_non_finite_value_anywhere_names_the_shard_and_array(
    dataset: Path, key: str, row: int, bad: float
) -> None:
    arrays = shard_arrays(first_episode=4)
    target = arrays[key]
    index = (row, row % target.shape[1]) if target.ndim == 2 else (row,)
    target[index] = bad
    write_shard(dataset / "shard_00001.npz", arrays)
    with pytest.raises(UserError) as info:
        load_transitions(dataset)
    msg = one_line(info.value)
    assert "shard_00001.npz" in msg and f"array '{key}'" in msg and f"at row {row}" in msg, msg


@given(
    key=st.sampled_from([*KEYS, "episode", "step", "policy"]),
    shape=st.lists(st.integers(0, 7), min_size=0, max_size=3).map(tuple),
    dtype=st.sampled_from(["float32", "int64", "bool", "U2", "complex64"]),
)
def test_any_array_shape_or_dtype_loads_or_is_a_user_error(
    dataset: Path, key: str, shape: tuple[int, ...], dtype: str
) -> None:
    arrays = shard_arrays(first_episode=4)
    arrays[key] = np.ones(shape, dtype=dtype)
    write_shard(dataset / "shard_00001.npz", arrays)
    try:
        load_transitions(dataset)
    except UserError as exc:
        msg = one_line(exc)
        assert "shard_00001.npz" in msg and f"'{key}'" in msg, msg


@pytest.fixture
def no_progress_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress bar (work started) must not be reached: a bad dataset is refused before it."""

    def started() -> None:
        raise AssertionError("the progress bar started before the dataset was checked")

    monkeypatch.setattr(data, "progress_bar", started)


@pytest.mark.parametrize(
    "breakage",
    [
        lambda f: (f / "meta.json").write_text('{"format": '),
        lambda f: (f / "meta.json").write_text("[]"),
        lambda f: (f / "shard_00001.npz").write_bytes(b""),
        lambda f: _edit_shard(f, _pop("state")),
        lambda f: _edit_shard(f, _nan_at("next_state", (0, 0))),
        lambda f: _edit_meta(f, _set("transitions", 7)),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["fit-dynamics", "--model", "mlp", "--epochs", "1"],
        ["ground", "--method", "markov", "--steps", "2"],
    ],
)
def test_cli_refuses_a_bad_dataset_before_the_progress_bar(
    dataset: Path,
    tmp_path: Path,
    breakage: Callable[[Path], None],
    command: list[str],
    cli_error: Callable[..., str],
    no_progress_bar: None,
) -> None:
    breakage(dataset)
    err = cli_error("--threads", "1", *command, "--data", str(dataset), "--out", str(tmp_path / "out"))
    assert err.startswith("scenefactory: error: ") and str(dataset) in err
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_budget_the_dataset_cannot_fill_before_the_progress_bar(
    dataset: Path, tmp_path: Path, cli_error: Callable[..., str], no_progress_bar: None
) -> None:
    argv = ["ground", "--method", "markov", "--steps", "2", "--budget", "1000", "--data", str(dataset)]
    err = cli_error(*argv, "--out", str(tmp_path / "out"))
    assert "--budget 1000 exceeds the" in err and "target transitions left after holding out" in err


def test_cli_fits_and_grounds_a_good_dataset(dataset: Path, tmp_path: Path) -> None:
    """The dataset read up front is the one the fit uses (read once, passed on)."""
    import scenefactory.grounding.dataset as ds
    import scenefactory.grounding.fit as fit
    import scenefactory.grounding.ground as gr

    calls: list[Path] = []

    original = ds.load_transitions

    def counted(folder: Path, min_episodes: int = 0) -> Any:
        calls.append(folder)
        return original(folder, min_episodes)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ds, "load_transitions", counted)  # the data jobs call it through its module
        mp.setattr(fit, "load_transitions", counted)
        mp.setattr(gr, "load_transitions", counted)
        fit_out, ground_out = tmp_path / "fit", tmp_path / "gnd"
        argv = ["--threads", "1", "fit-dynamics", "--model", "mlp", "--epochs", "1", "--data", str(dataset)]
        assert main([*argv, "--out", str(fit_out)]) == 0
        argv = ["--threads", "1", "ground", "--method", "markov", "--steps", "2", "--data", str(dataset)]
        assert main([*argv, "--out", str(ground_out)]) == 0
    assert calls == [dataset, dataset]  # once per command
    assert json.loads((fit_out / "metrics.json").read_text())["dataset"]["transitions"] == 96
    assert json.loads((ground_out / "metrics.json").read_text())["data"]["transitions"] == 96


# --------------------------------------------------------------------------- seed-level reports


def _report(folder: Path, cells: Any, version: Any = RESULTS_VERSION) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"version": version, "experiment": "x", "results": {"cells": cells}}
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


def _policy(seed: Any, goal: Any, coll: Any = 0.1) -> dict[str, Any]:
    figures = {"goal_reach_rate": goal, "collision_rate": coll}
    return {"checkpoint": f"s{seed}.pt", "trained_seed": seed, "metrics": figures}


def _cell(kind: str, *policies: Any) -> dict[str, Any]:
    return {"kind": kind, "eval_tier": "mujoco", "condition": "", "metrics": {}, "policies": list(policies)}


GOOD_CELLS = [
    _cell("a", _policy(0, 0.8), _policy(1, 0.9), _policy(2, 0.7)),
    _cell("b", _policy(0, 0.5), _policy(1, 0.6), _policy(2, 0.55)),
]


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        ([1, 2], r"field 'results\.cells\[0\]': expected an object, got 1"),
        ({"a": _cell("a")}, r"field 'results\.cells': expected a list, got \{"),  # version 1's cells by name
        ([{**_cell("a"), "policies": "abc"}], r"field 'results\.cells\[0\]\.policies': expected a list"),
        ([{"kind": "a"}], r"field 'results\.cells\[0\]\.eval_tier' is missing"),
        ([_cell("a", 3)], r"field 'results\.cells\[0\]\.policies\[0\]': expected an object, got 3"),
        (
            [_cell("a", _policy(0, "high"))],
            r"field 'results\.cells\[0\]\.policies\[0\]\.metrics\.goal_reach_rate': "
            r"expected a number or null, got \"high\"",
        ),
        ([_cell("a", _policy(0, True))], r"goal_reach_rate': expected a number or null, got true"),
        ([_cell("a", _policy(0, 1.5))], r"goal_reach_rate': expected a rate in \[0, 1\], got 1\.5"),
        ([_cell("a", _policy([1], 0.5))], r"trained_seed': expected an integer seed or null, got \[1\]"),
        ([_cell("a")], r"cell 'a' has no per-policy figures"),
        (
            [_cell("a", _policy(0, 0.5)), _cell("a", _policy(1, 0.5))],
            r"field 'results\.cells': cells with the same kind, tier and condition: \['a', 'a'\]",
        ),
    ],
)
def test_malformed_reports_name_the_file_and_field(
    tmp_path: Path, cells: Any, expected: str, cli_error: Callable[..., str]
) -> None:
    folder = _report(tmp_path / "xp", cells)
    err = cli_error("seed-level", str(folder))
    assert str(folder / "results.json") in err
    assert re.search(expected, err), err


def test_a_report_that_is_not_an_object_or_of_another_version(
    tmp_path: Path, cli_error: Callable[..., str]
) -> None:
    (tmp_path / "results.json").write_text("[]")
    assert "results.json: expected a JSON object (an experiment report), got []" in cli_error(
        "seed-level", str(tmp_path)
    )
    (tmp_path / "results.json").write_text(json.dumps({"version": RESULTS_VERSION, "results": {}}))
    assert "field 'results.cells' is missing" in cli_error("seed-level", str(tmp_path))
    folder = _report(tmp_path / "v9", GOOD_CELLS, version=9)
    err = cli_error("seed-level", str(folder))
    assert f"reads results version {RESULTS_VERSION}, the file has version 9" in err


def _v1_policy(seed: Any, goal: Any, coll: Any = 0.1) -> dict[str, Any]:
    return {"trained_seed": seed, "goal_reach_rate": goal, "collision_rate": coll}


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        ([1, 2], r"field 'results\.cells': expected an object of cells by name, got \[1, 2\]"),
        ({"a": [1]}, r"field 'results\.cells\.a': expected an object \(a cell\), got \[1\]"),
        (
            {"a": {"per_policy": "abc"}},
            r"cell 'a' has no per_policy figures \(field 'results\.cells\.a\.per_policy'",
        ),
        ({"a": {"per_policy": [3]}}, r"field 'results\.cells\.a\.per_policy\[0\]': expected an object"),
        (
            {"a": {"per_policy": [_v1_policy(0, "high")]}},
            r"field 'results\.cells\.a\.per_policy\[0\]\.goal_reach_rate': "
            r"expected a number or null, got \"high\"",
        ),
        (
            {"a": {"per_policy": [_v1_policy(0, 1.5)]}},
            r"goal_reach_rate': expected a rate in \[0, 1\], got 1\.5",
        ),
        ({"a": {"per_policy": [_v1_policy([1], 0.5)]}}, r"trained_seed': expected an integer seed or null"),
        ({"a": {"per_policy": []}}, r"cell 'a' has no per-policy figures"),
    ],
)
def test_malformed_version_1_reports_name_the_file_and_field(
    tmp_path: Path, cells: Any, expected: str, cli_error: Callable[..., str]
) -> None:
    """Reports written before the results were typed (no ``version``: cells keyed by name)."""
    folder = tmp_path / "xp"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"experiment": "x", "results": {"cells": cells}}))
    err = cli_error("seed-level", str(folder))
    assert str(folder / "results.json") in err
    assert re.search(expected, err), err


def test_nan_and_missing_figures_are_reported_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells = [
        _cell("a", _policy(0, math.nan), _policy(1, 0.9), _policy(2, None)),
        _cell(
            "b", _policy(0, 0.5), _policy(1, 0.6), {"checkpoint": "s2.pt", "trained_seed": 2, "metrics": {}}
        ),
        _cell("c", _policy(0, 0.5), _policy(1, 0.6), _policy(2, 0.4)),
    ]
    cells[1]["policies"][2]["metrics"]["collision_rate"] = 0.2
    folder = _report(tmp_path / "xp", cells)
    assert main(["seed-level", str(folder), "--compare", "a", "c", "--compare", "b", "c"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scenefactory: warning: "), err
    assert "cell 'a' goal_reach_rate (seeds 0, 2) and 1 more" in err
    doc = json.loads((folder / "seed_level.json").read_text())
    figures = {c["label"]: c["figures"] for c in doc["cells"]}
    a = figures["a"]["goal_reach_rate"]
    assert a["per_seed"] == [None, 0.9, None] and a["missing_seeds"] == [0, 2] and "mean" not in a
    assert figures["b"]["goal_reach_rate"]["missing_seeds"] == [2]
    assert "mean" in figures["a"]["collision_rate"]  # the other figures are summarised
    for comparison in doc["comparisons"]:  # no difference from a partial set of seeds
        assert "goal_reach_rate" not in comparison["differences"]
        assert "collision_rate" in comparison["differences"]
    md = (folder / "seed_level.md").read_text()
    assert "| a | n/a / 0.900 / n/a | n/a (no figure for seed 0, 2) |" in md
    assert "| b | 0.500 / 0.600 / n/a | n/a (no figure for seed 2) |" in md


FIGURE = st.one_of(st.none(), st.floats(0.0, 1.0), st.just(math.nan), st.just(math.inf))


@given(figures=st.lists(st.lists(FIGURE, min_size=2, max_size=2), min_size=1, max_size=4))
def test_every_figure_is_summarised_or_reported_missing(figures: list[list[float | None]]) -> None:
    per = tuple(
        PolicyFigures(f"s{i}.pt", None, i, None, None, {"goal_reach_rate": g, "collision_rate": c})
        for i, (g, c) in enumerate(figures)
    )
    row = seed_level([Cell("k", "mujoco", "", {}, per)]).cell("k")
    for j, metric in enumerate(("goal_reach_rate", "collision_rate")):
        values = [f[j] for f in figures]
        bad = [i for i, v in enumerate(values) if v is None or not math.isfinite(v)]
        entry = row.figures[metric]  # never silently dropped
        assert list(entry.missing_seeds) == bad
        assert (entry.summary is not None) == (not bad and len(values) > 1)


@given(
    where=st.sampled_from(
        ["version", "cells", "cell", "policies", "entry", "figure", "seed", "kind", "v1 cells", "v1 entry"]
    ),
    value=JSON,
)
def test_any_report_value_summarises_or_is_a_user_error(tmp_path: Path, where: str, value: Any) -> None:
    if where.startswith("v1"):  # a report from before the results were typed: cells by name
        v1: Any = {"a": {"per_policy": [_v1_policy(0, 0.8), _v1_policy(1, 0.9)]}, "b": {"per_policy": []}}
        if where == "v1 cells":
            v1 = value
        else:
            v1["a"]["per_policy"][1] = value
        folder = tmp_path / "v1"
        folder.mkdir(exist_ok=True)
        (folder / "results.json").write_text(json.dumps({"results": {"cells": v1}}))
        try:
            write_seed_level(folder)
        except UserError as exc:
            one_line(exc)
        return
    cells: Any = json.loads(json.dumps(GOOD_CELLS))
    version: Any = RESULTS_VERSION
    if where == "version":
        version = value
    elif where == "cells":
        cells = value
    elif where == "cell":
        cells[0] = value
    elif where == "policies":
        cells[0]["policies"] = value
    elif where == "entry":
        cells[0]["policies"][1] = value
    elif where == "figure":
        cells[0]["policies"][1]["metrics"]["goal_reach_rate"] = value
    elif where == "seed":
        cells[0]["policies"][1]["trained_seed"] = value
    else:
        cells[0]["kind"] = value
    folder = _report(tmp_path / "xp", cells, version)
    try:
        write_seed_level(folder, [("a", "b")] if where not in ("cells", "kind") else [])
    except UserError as exc:
        one_line(exc)


# --------------------------------------------------------------------------- exported Go1 policies


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An export folder of an untrained (tiny) feed-forward Go1 policy."""
    from dataclasses import replace

    from scenefactory.go1.config import Go1TaskConfig
    from scenefactory.go1.deploy.export import export_go1
    from scenefactory.go1.train import Go1Policy, go1_ppo_config
    from scenefactory.rl.ppo import build_actor

    ppo = replace(go1_ppo_config(), actor_hidden_dims=(16,))
    policy = Go1Policy(build_actor(135, ppo, num_actions=12), Go1TaskConfig(), ppo, {})
    out = tmp_path_factory.mktemp("export")
    export_go1(policy, out)
    return out


@pytest.fixture
def policy_dir(exported: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "policy"
    folder.mkdir()
    for name in ("go1_policy.onnx", "go1_policy.json"):
        (folder / name).write_bytes((exported / name).read_bytes())
    return folder


def _sidecar(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "go1_policy.json").read_text())


def _write_sidecar(folder: Path, side: Any) -> None:
    (folder / "go1_policy.json").write_text(json.dumps(side))


def test_a_good_export_opens(policy_dir: Path) -> None:
    from scenefactory.go1.deploy.runner import OnnxPolicyRunner

    runner = OnnxPolicyRunner(policy_dir)
    assert runner.control_hz == 50.0 and runner.history == 3 and not runner.recurrent


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda s: [1, 2],
            r"go1_policy\.json: expected a JSON object \(the policy's sidecar\), got \[1, 2\]",
        ),
        (
            lambda s: {**s, "control_hz": math.nan},
            r"field 'control_hz': expected a finite number in \(0, 1000\], got NaN",
        ),
        (
            lambda s: {**s, "kp": "stiff"},
            r"field 'kp': expected a finite number in \(0, 10000\], got \"stiff\"",
        ),
        (
            lambda s: {k: v for k, v in s.items() if k != "kd"},
            r"field 'kd': expected .*, got nothing \(missing\)",
        ),
        (
            lambda s: {**s, "kd": math.inf},
            r"field 'kd': expected a finite number in \[0, 1000\], got Infinity",
        ),
        (
            lambda s: {**s, "action_scale": -1},
            r"field 'action_scale': expected a finite number in \(0, 100\]",
        ),
        (
            lambda s: {**s, "default_joint_pos_rad": [0.0] * 11},
            r"field 'default_joint_pos_rad': expected a list of 12 finite numbers",
        ),
        (
            lambda s: {**s, "default_joint_pos_rad": [math.nan] * 12},
            r"field 'default_joint_pos_rad\[0\]': expected a finite number, got NaN",
        ),
        (lambda s: {**s, "torque_limits_nm": None}, r"field 'torque_limits_nm': expected a list of 12"),
        (
            lambda s: {**s, "joint_names": ["a"] * 12},
            r"field 'joint_names': expected a list of 12 distinct joint names",
        ),
        (
            lambda s: {**s, "observation": {**s["observation"], "history": 2.5}},
            r"field 'observation\.history': expected an integer in \[1, 1000\], got 2\.5",
        ),
        (
            lambda s: {**s, "observation": {**s["observation"], "frame_dim": 44}},
            r"field 'observation\.frame_dim': expected an integer in \[45, 45\], got 44",
        ),
        (lambda s: {**s, "observation": []}, r"field 'observation': expected an object, got \[\]"),
        (lambda s: {**s, "recurrent_state": {}}, r"field 'recurrent_state': expected a list"),
        (
            lambda s: {
                **s,
                "recurrent_state": [{"input": "h_in", "output": "h_out", "shape": [10**9, 1, 10**9]}],
            },
            r"field 'recurrent_state\[0\]\.shape': expected \[layers, 1, hidden\]",
        ),
        (lambda s: {**s, "onnx": "../../etc/passwd"}, r"field 'onnx': expected a file name in this folder"),
        (lambda s: {**s, "onnx_sha256": "abc"}, r"field 'onnx_sha256': expected 64 hex digits, got \"abc\""),
        (
            lambda s: {k: v for k, v in s.items() if k != "onnx_sha256"},
            r"field 'onnx_sha256': expected .*got nothing \(missing\)",
        ),
        (
            lambda s: {**s, "onnx_sha256": "0" * 64},
            r"go1_policy\.onnx: SHA-256 .* does not match .*go1_policy\.json field 'onnx_sha256'",
        ),
        (lambda s: {**s, "robot": "a1"}, r"field 'robot': expected \"go1\", got \"a1\""),
    ],
)
def test_malformed_sidecars_are_one_line_errors(
    policy_dir: Path, edit: Callable[[dict[str, Any]], Any], expected: str, cli_error: Callable[..., str]
) -> None:
    from scenefactory.go1.deploy.runner import OnnxPolicyRunner, SidecarError

    _write_sidecar(policy_dir, edit(_sidecar(policy_dir)))
    with pytest.raises(SidecarError, match=expected) as info:
        OnnxPolicyRunner(policy_dir)
    one_line(info.value)
    out = policy_dir.parent / "deploy"
    err = cli_error(
        "deploy", "go1", "--episodes", "1", "--seconds", "0.5", "--policy", str(policy_dir), "--out", str(out)
    )
    assert "scenefactory: error: " in err and not out.exists()


def test_onnx_bytes_are_checked_against_the_sidecar_then_loaded_safely(policy_dir: Path) -> None:
    from scenefactory.go1.deploy.runner import OnnxPolicyRunner, SidecarError

    junk = np.random.default_rng(0).bytes(2000)
    (policy_dir / "go1_policy.onnx").write_bytes(junk)
    with pytest.raises(SidecarError, match=r"SHA-256 .* does not match"):
        OnnxPolicyRunner(policy_dir)  # a replaced file: refused before onnxruntime parses it
    _write_sidecar(policy_dir, {**_sidecar(policy_dir), "onnx_sha256": hashlib.sha256(junk).hexdigest()})
    with pytest.raises(SidecarError, match=r"go1_policy\.onnx: not a usable ONNX model \(InvalidProtobuf"):
        OnnxPolicyRunner(policy_dir)  # a matching sidecar, still not a model: one line, no traceback


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"control_hz": 30.0}, r"field 'control_hz' 30: a control period must be a whole number"),
        ({"joint_names": [f"j{i}" for i in range(12)]}, r"field 'joint_names' lists \['j0'"),
    ],
)
def test_a_sidecar_the_simulated_robots_cannot_follow_is_refused_before_any_work(
    policy_dir: Path, edit: dict[str, Any], expected: str
) -> None:
    from scenefactory.go1.deploy import check
    from scenefactory.go1.deploy.runner import OnnxPolicyRunner

    _write_sidecar(policy_dir, {**_sidecar(policy_dir), **edit})
    runner = OnnxPolicyRunner(policy_dir)
    with pytest.raises(UserError, match=expected):
        check.sim2sim(runner, episodes=1, seconds=0.1)


SIDECAR_FIELDS = (
    "format",
    "robot",
    "onnx",
    "onnx_sha256",
    "control_hz",
    "joint_names",
    "default_joint_pos_rad",
    "kp",
    "kd",
    "torque_limits_nm",
    "action_scale",
    "action_clip",
    "observation",
    "recurrent_state",
    "checkpoint",
)


@given(field=st.sampled_from(SIDECAR_FIELDS), value=JSON)
def test_any_sidecar_field_value_opens_or_is_a_one_line_error(
    policy_dir: Path, exported: Path, field: str, value: Any
) -> None:
    from scenefactory.go1.deploy.runner import OnnxPolicyRunner

    side = _sidecar(exported)
    side[field] = value
    _write_sidecar(policy_dir, side)
    try:
        OnnxPolicyRunner(policy_dir)
    except (ValueError, FileNotFoundError) as exc:  # what 'deploy go1' turns into a UserError
        assert "go1_policy" in one_line(exc)
