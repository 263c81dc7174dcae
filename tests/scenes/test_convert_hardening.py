"""``scenefactory convert`` loses nothing: one bad record or scenario costs that record only.

The classes of fault, each tried on many inputs (hypothesis) as well as on the cases the issue
reported:

- **Framing**: bit flips, truncations, inserted and zeroed bytes, CRC-valid garbage or empty
  payloads in a real-format TFRecord shard → every intact record still converts, each bad stretch
  is one error naming file, record index and byte offset, ``summary.json`` and ``index.json`` are
  always written, and the CLI never prints a traceback.
- **Scenario values**: an implausible or non-finite number in any state field or map point, or a
  ``current_time_index`` outside the steps → that scenario's error, naming track, step and field.
- **Anything else inside one scenario** (an exception in conversion or writing, its worker process
  dying) → that scenario's error; the rest of its shard and the other shards still convert.
- **Never written**: scenes with no controllable agent (skipped with the reason), a second scenario
  with an id already converted in the run (skipped, the first is kept), names too long for a file.
- **Processes**: SIGTERM, SIGINT or SIGKILL to ``convert --workers 2`` ends its worker processes.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scenefactory.cli import main
from scenefactory.scenes.plausibility import ANGLE, COORDINATE, LENGTH, SPEED, WIDTH
from scenefactory.scenes.scene_json import load_scene
from scenefactory.scenes.womd import batch, tfrecord
from scenefactory.scenes.womd.batch import MAX_STEM_CHARS, scene_file_stem
from scenefactory.scenes.womd.convert import ScenarioValueError, scenario_to_scene
from scenefactory.scenes.womd.scenario_pb2 import Scenario
from scenefactory.scenes.womd.tfrecord import (
    HEADER_BYTES,
    Record,
    RecordFault,
    encode_record,
    scan_records,
    write_records,
)
from test_womd_reader import make_scenario

NUM_RECORDS = 4
BASE = [make_scenario(f"s{i}", 2) for i in range(NUM_RECORDS)]
PAYLOADS = [s.SerializeToString() for s in BASE]
FRAMED = [encode_record(p) for p in PAYLOADS]
STARTS = [sum(len(f) for f in FRAMED[:i]) for i in range(NUM_RECORDS)]
SHARD = b"".join(FRAMED)


def _variant(scenario_id: str, edit: Callable[[Scenario], object] | None = None, vehicles: int = 2) -> bytes:
    sc = make_scenario(scenario_id, vehicles)
    if edit is not None:
        edit(sc)
    return sc.SerializeToString()


def _convert(
    capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, dict[str, Any], dict[str, Any]]:
    """Run ``convert`` through the CLI: (exit code, stderr, summary.json, index.json)."""
    args = list(argv)
    out = Path(args[args.index("--out") + 1])
    code = main(["convert", *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    summary = json.loads((out / "summary.json").read_text())
    index = json.loads((out / "index.json").read_text())
    return code, err, summary, index


def _converted(summary_or_index: dict[str, Any]) -> set[str]:
    return set(summary_or_index["scenes"])


# --- framing faults -------------------------------------------------------------------------------

_position = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
_damage = st.one_of(
    st.tuples(st.just("flip"), _position, st.integers(0, 7)),
    st.tuples(st.just("truncate"), _position),
    st.tuples(st.just("insert"), _position, st.binary(min_size=1, max_size=40)),
    st.tuples(st.just("zero"), _position, st.integers(1, 64)),
    st.tuples(
        st.just("payload"),
        st.integers(0, NUM_RECORDS - 1),
        st.one_of(st.just(b""), st.just(b"\xff" * 9), st.binary(max_size=64)),
    ),
)


def _apply(ops: list[tuple[Any, ...]]) -> tuple[bytes, set[int], bool]:
    """Apply damage ops to the shard. Returns the bytes, the indices of records whose framed bytes
    all survive in order (intact), and whether the result is no longer a clean run of records."""
    data = list(SHARD)
    origin: list[int | None] = list(range(len(SHARD)))  # original position of each byte, None if new
    for op in ops:
        n = len(data)
        if op[0] == "payload":
            i = op[1]
            start = origin.index(STARTS[i]) if STARTS[i] in origin else None
            if start is None:
                continue
            end = start + len(FRAMED[i])
            new = encode_record(op[2])
            data[start:end] = list(new)
            origin[start:end] = [None] * len(new)
            continue
        if n == 0:
            continue
        pos = int(op[1] * n)
        if op[0] == "flip":
            data[pos] ^= 1 << op[2]
            origin[pos] = None
        elif op[0] == "truncate":
            del data[pos:], origin[pos:]
        elif op[0] == "insert":
            data[pos:pos] = list(op[2])
            origin[pos:pos] = [None] * len(op[2])
        else:  # zero
            end = min(n, pos + op[2])
            data[pos:end] = [0] * (end - pos)
            origin[pos:end] = [None] * (end - pos)
    where = {o: k for k, o in enumerate(origin) if o is not None}
    intact = set()
    for i, (start, framed) in enumerate(zip(STARTS, FRAMED, strict=True)):
        k = where.get(start)
        if k is not None and origin[k : k + len(framed)] == list(range(start, start + len(framed))):
            intact.add(i)
    clean = bytes(data) in {b"".join(FRAMED[:m]) for m in range(NUM_RECORDS + 1)}
    return bytes(data), intact, not clean


@given(ops=st.lists(_damage, min_size=1, max_size=3), skip_bad=st.booleans())
def test_damaged_shard_costs_only_the_damaged_records(
    ops: list[tuple[Any, ...]], skip_bad: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    data, intact, damaged = _apply(ops)
    with tempfile.TemporaryDirectory() as tmp:
        shard, clean, out = Path(tmp) / "bad.tfrecord", Path(tmp) / "clean.tfrecord", Path(tmp) / "out"
        shard.write_bytes(data)
        write_records(clean, [_variant("other0"), _variant("other1")])
        code, err, summary, index = _convert(
            capsys, str(shard), str(clean), "--out", str(out), *(["--skip-bad"] if skip_bad else [])
        )
        assert _converted(index) == {f"s{i}" for i in intact} | {"other0", "other1"}
        assert summary["converted"] == len(intact) + 2
        errors = summary["errors"]
        for e in errors:
            assert e["file"] == str(shard.resolve())
            assert isinstance(e["record"], int) and 0 <= e["offset"] < len(data)
            assert f"{shard.name}: record {e['record']} at byte offset {e['offset']}" in e["error"]
            assert e["error"] in err
        if damaged:
            assert errors or summary["skipped"]  # a CRC-valid garbage payload may parse as an empty scenario
        assert code == (1 if errors and not skip_bad else 0)
        for entry in index["scenes"].values():
            assert (out / entry["files"][0]).is_file()


@given(
    ops=st.lists(
        st.tuples(st.integers(0, NUM_RECORDS - 1), st.integers(0, HEADER_BYTES - 1)),
        min_size=1,
        max_size=2,
        unique_by=lambda op: op[0],  # one flip per header: two could cancel
    ),
    chunk=st.integers(1, 64),
)
def test_resync_after_a_bad_length_finds_every_later_record(
    ops: list[tuple[int, int]], chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flip in a record's length field or length CRC: its next offset is unknown, so the reader
    searches (here in chunks of a few bytes, to cross chunk edges) and finds every later record."""
    monkeypatch.setattr(tfrecord, "_RESYNC_CHUNK", chunk)
    data = bytearray(SHARD)
    bad = set()
    for i, byte in ops:
        data[STARTS[i] + byte] ^= 0x10
        bad.add(i)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.tfrecord"
        path.write_bytes(bytes(data))
        items = list(scan_records(path))
    good = [it for it in items if isinstance(it, Record)]
    faults = [it for it in items if isinstance(it, RecordFault)]
    assert [r.offset for r in good] == [STARTS[i] for i in range(NUM_RECORDS) if i not in bad]
    assert [r.data for r in good] == [PAYLOADS[i] for i in range(NUM_RECORDS) if i not in bad]
    assert {f.offset for f in faults} <= {STARTS[i] for i in bad} and faults
    for f in faults:
        assert "bad length CRC" in f.message and "byte offset" in f.message


def test_flipped_bit_in_record_0_costs_record_0_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: record 0's data CRC fails (its length CRC holds, so record 1's offset is known)."""
    data = bytearray(SHARD)
    data[HEADER_BYTES + 100] ^= 0x01
    shard = tmp_path / "a.tfrecord"
    shard.write_bytes(bytes(data))
    out = tmp_path / "out"
    code, err, summary, index = _convert(capsys, str(shard), "--out", str(out), "--skip-bad")
    assert code == 0 and _converted(index) == {"s1", "s2", "s3"}
    [error] = summary["errors"]
    assert (error["record"], error["offset"]) == (0, 0) and "bad data CRC" in error["error"]
    assert "a.tfrecord: record 0 at byte offset 0" in err
    code, _, summary, _ = _convert(capsys, str(shard), "--out", str(tmp_path / "out2"))
    assert code == 1 and summary["converted"] == 3


def test_flipped_length_of_record_0_resumes_at_record_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = bytearray(SHARD)
    data[2] ^= 0x80  # the length field: the length CRC fails, the next record must be searched for
    shard = tmp_path / "a.tfrecord"
    shard.write_bytes(bytes(data))
    code, _, summary, index = _convert(capsys, str(shard), "--out", str(tmp_path / "out"))
    assert code == 1 and _converted(index) == {"s1", "s2", "s3"}
    [error] = summary["errors"]
    assert "bad length CRC" in error["error"]
    assert f"to the next valid record at byte offset {STARTS[1]}" in error["error"]


def test_crc_valid_empty_or_garbage_payload_costs_that_record_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shard = tmp_path / "a.tfrecord"
    write_records(
        shard, [PAYLOADS[0], b"", PAYLOADS[1], b"\x08\x96\x01 not a protobuf \xff\xff", PAYLOADS[2]]
    )
    code, _, summary, index = _convert(capsys, str(shard), "--out", str(tmp_path / "out"))
    assert code == 1 and _converted(index) == {"s0", "s1", "s2"}
    empty, garbage = summary["errors"]
    assert empty["record"] == 1 and "empty record" in empty["error"]
    assert garbage["record"] == 3 and "not a Scenario protobuf" in garbage["error"]


def test_gzip_and_non_tfrecord_files_are_one_error_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gzip

    (tmp_path / "z.tfrecord.gz").write_bytes(gzip.compress(SHARD))
    (tmp_path / "notes.tfrecord").write_text("not a tfrecord at all\n" * 50)
    write_records(tmp_path / "good.tfrecord", [PAYLOADS[0]])
    code, _, summary, index = _convert(capsys, str(tmp_path / "*.tfrecord*"), "--out", str(tmp_path / "out"))
    assert code == 1 and _converted(index) == {"s0"}
    messages = sorted(e["error"] for e in summary["errors"])
    assert len(messages) == 2 and "decompress it first" in messages[1] and "notes.tfrecord" in messages[0]


def test_truncated_shard_keeps_every_whole_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shard = tmp_path / "a.tfrecord"
    shard.write_bytes(SHARD[: STARTS[3] + HEADER_BYTES + 7])
    code, _, summary, index = _convert(capsys, str(shard), "--out", str(tmp_path / "out"))
    assert code == 1 and _converted(index) == {"s0", "s1", "s2"}
    [error] = summary["errors"]
    assert error["record"] == 3 and error["offset"] == STARTS[3] and "truncated data" in error["error"]


# --- scenario values --------------------------------------------------------------------------------

_STATE_FIELDS = {
    "center_x": ("center_x", COORDINATE),
    "center_y": ("center_y", COORDINATE),
    "velocity_x": ("speed (velocity_x, velocity_y)", SPEED),
    "velocity_y": ("speed (velocity_x, velocity_y)", SPEED),
    "heading": ("heading", ANGLE),
    "length": ("length", LENGTH),
    "width": ("width", WIDTH),
}
_bad_number = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e300]),
    st.floats(min_value=1.01e6, max_value=1e30),
    st.floats(min_value=-1e30, max_value=-1.01e6),
)


@given(
    field=st.sampled_from(sorted(_STATE_FIELDS)),
    track=st.sampled_from([0, 2]),
    step=st.integers(0, 90),
    value=_bad_number,
)
def test_implausible_state_value_is_a_named_scenario_error(
    field: str, track: int, step: int, value: float
) -> None:
    """Track 0 (the self-driving car) and 2 (the pedestrian) are observed at every step."""
    sc = make_scenario("v", 2)
    setattr(sc.tracks[track].states[step], field, value)
    name, bound = _STATE_FIELDS[field]
    with pytest.raises(ScenarioValueError) as info:
        scenario_to_scene(sc)
    assert f"scenario 'v': track {track} (id {sc.tracks[track].id}) step {step}: {name} =" in str(info.value)
    assert bound.describe() in str(info.value)


@given(feature=st.integers(0, 7), point=st.integers(0, 3), axis=st.sampled_from("xy"), value=_bad_number)
def test_implausible_map_point_is_a_named_scenario_error(
    feature: int, point: int, axis: str, value: float
) -> None:
    sc = make_scenario("m", 2)
    f = sc.map_features[feature]
    kind = f.WhichOneof("feature_data")
    points = (
        [f.stop_sign.position]
        if kind == "stop_sign"
        else getattr(getattr(f, kind), "polygon" if kind in ("crosswalk", "speed_bump") else "polyline")
    )
    setattr(points[point % len(points)], axis, value)
    with pytest.raises(
        ScenarioValueError, match=rf"map feature {f.id} \({kind}\) point {point % len(points)}: {axis} ="
    ):
        scenario_to_scene(sc)


@given(t0=st.one_of(st.integers(-(2**31), -1), st.integers(91, 2**31 - 1)))
def test_current_time_index_outside_the_steps_is_an_error(t0: int) -> None:
    sc = make_scenario("t", 2)
    sc.current_time_index = t0
    with pytest.raises(
        ScenarioValueError, match=rf"current_time_index {t0} is outside its 91 logged steps \[0, 90\]"
    ):
        scenario_to_scene(sc)


def test_failures_inside_scenarios_are_theirs_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's cases in one shard, and a clean second shard that converts whatever the first holds."""
    long_id = "x" * 300

    def far(sc: Scenario) -> None:
        sc.tracks[0].states[20].center_x = 1e300

    def nan_speed(sc: Scenario) -> None:
        sc.tracks[0].states[15].velocity_y = math.nan

    def t0(value: int) -> Callable[[Scenario], None]:
        return lambda sc: setattr(sc, "current_time_index", value)

    records = [
        _variant("ok"),
        _variant("far", far),
        _variant(long_id),
        _variant("nobody", vehicles=0),
        _variant("early", t0(-1)),
        _variant("late", t0(200)),
        _variant("nan", nan_speed),
    ]
    write_records(tmp_path / "a.tfrecord", records)
    write_records(tmp_path / "b.tfrecord", [_variant("b0"), _variant("b1")])
    out = tmp_path / "out"
    code, _, summary, index = _convert(capsys, str(tmp_path / "*.tfrecord"), "--out", str(out))
    assert code == 1 and _converted(index) == {"ok", long_id, "b0", "b1"}
    errors = {e["scenario_id"]: e for e in summary["errors"]}
    assert sorted(errors) == ["early", "far", "late", "nan"]
    assert "center_x = 1e+300 is not a coordinate in [-1e+06, 1e+06] m" in errors["far"]["error"]
    assert "current_time_index -1 is outside" in errors["early"]["error"]
    assert "current_time_index 200 is outside" in errors["late"]["error"]
    assert "speed (velocity_x, velocity_y) = nan" in errors["nan"]["error"]
    for e in errors.values():
        assert f"a.tfrecord: record {e['record']} at byte offset {e['offset']}" in e["error"]
    [skip] = summary["skipped"]
    assert skip["scenario_id"] == "nobody" and "no controllable agent" in skip["reason"]
    assert summary["scenarios_read"] == 9
    long_file = out / index["scenes"][long_id]["files"][0]
    assert len(long_file.name) < 255 and load_scene(long_file).name == long_id


def test_unexpected_exceptions_in_one_scenario_are_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Conversion raising ValueError, or writing raising OSError, costs that scenario only."""
    real_convert, real_save = batch.scenario_to_scene, batch.save_scene

    def convert(scenario: Scenario, **kw: Any) -> Any:
        if scenario.scenario_id == "s1":
            raise ValueError("cannot resample a route of length inf")
        return real_convert(scenario, **kw)

    def save(scene: Any, path: Path) -> None:
        if scene.name == "s2":
            raise OSError(36, "File name too long")
        real_save(scene, path)

    monkeypatch.setattr(batch, "scenario_to_scene", convert)
    monkeypatch.setattr(batch, "save_scene", save)
    shard = tmp_path / "a.tfrecord"
    write_records(shard, [*PAYLOADS, _variant("s2")])  # a second s2: its claim was released, so it may write
    code, _, summary, index = _convert(capsys, str(shard), "--out", str(tmp_path / "out"))
    assert code == 1 and _converted(index) == {"s0", "s3"}
    one, two, again = summary["errors"]
    assert one["scenario_id"] == "s1" and "ValueError: cannot resample" in one["error"]
    assert two["scenario_id"] == "s2" and "not written: OSError" in two["error"]
    assert again["record"] == 4  # the second s2 got past the duplicate check and failed to write too


def test_duplicate_scenario_ids_keep_the_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_records(tmp_path / "a.tfrecord", [_variant("d"), _variant("x1"), _variant("d")])
    write_records(tmp_path / "b.tfrecord", [_variant("d"), _variant("x2")])
    out = tmp_path / "out"
    code, _, summary, index = _convert(
        capsys, str(tmp_path / "*.tfrecord"), "--out", str(out), "--workers", "2"
    )
    assert code == 0 and _converted(index) == {"d", "x1", "x2"} and summary["converted"] == 3
    reasons = [s["reason"] for s in summary["skipped"]]
    assert len(reasons) == 2 and all(
        "duplicate scenario_id 'd': already converted in this run" in r for r in reasons
    )
    assert sorted(p.name for p in (out / "json").iterdir()) == ["d.json", "x1.json", "x2.json"]
    assert not list(out.glob(".convert-claims-*"))
    # a second run into the same folder rewrites its own scenes rather than calling them duplicates
    code, _, summary, _ = _convert(capsys, str(tmp_path / "a.tfrecord"), "--out", str(out))
    assert code == 0 and summary["converted"] == 2


def test_gpudrive_json_inputs_fail_one_file_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_gpudrive_json import make_json_scenario

    good, far = make_json_scenario("j-good"), make_json_scenario("j-far")
    far["objects"][0]["position"][12]["x"] = 1e300
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "far.json").write_text(json.dumps(far))
    (tmp_path / "cut.json").write_text(json.dumps(good)[:500])
    write_records(tmp_path / "a.tfrecord", PAYLOADS[:2])
    pattern = str(tmp_path / "*")
    code, _, summary, index = _convert(capsys, pattern, "--out", str(tmp_path / "out"), "--workers", "2")
    assert code == 1 and _converted(index) == {"j-good", "s0", "s1"}
    errors = {Path(e["file"]).name: e["error"] for e in summary["errors"]}
    assert sorted(errors) == ["cut.json", "far.json"]
    assert "not valid JSON" in errors["cut.json"] and "center_x = 1e+300" in errors["far.json"]


@given(name=st.text(min_size=1, max_size=400))
def test_scene_file_stems_are_safe_distinct_and_short(name: str) -> None:
    stem = scene_file_stem(name)
    assert 0 < len(stem.encode()) <= MAX_STEM_CHARS + 13 and not stem.startswith(".")
    assert all(c.isascii() and (c.isalnum() or c in "-_.") for c in stem)
    assert scene_file_stem(name + "/") != stem  # distinct names, distinct files
    safe = (
        len(name) <= MAX_STEM_CHARS
        and not name.startswith(".")
        and all(c.isascii() and (c.isalnum() or c in "-_.") for c in name)
    )
    assert (stem == name) == safe


def test_empty_tfrecord_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    write_records(tmp_path / "a.tfrecord", PAYLOADS[:1])
    code, err, summary, index = _convert(capsys, str(tmp_path / "*.tfrecord"), "--out", str(tmp_path / "out"))
    assert code == 0 and _converted(index) == {"s0"} and not summary["errors"]
    [warning] = summary["warnings"]
    assert "empty.tfrecord: empty TFRecord file" in warning
    assert f"scenefactory: warning: {warning}" in err


@pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork", reason="the fault is injected by monkeypatch"
)
def test_a_worker_dying_costs_the_record_it_was_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = os.getpid()
    real = batch.scenario_to_scene

    def convert(scenario: Scenario, **kw: Any) -> Any:
        if scenario.scenario_id == "boom" and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(scenario, **kw)

    monkeypatch.setattr(batch, "scenario_to_scene", convert)
    write_records(tmp_path / "a.tfrecord", [_variant("a0"), _variant("boom"), _variant("a2")])
    write_records(tmp_path / "b.tfrecord", [_variant("b0"), _variant("b1")])
    code, _, summary, index = _convert(
        capsys, str(tmp_path / "*.tfrecord"), "--out", str(tmp_path / "out"), "--workers", "2"
    )
    assert code == 1 and _converted(index) == {"a0", "a2", "b0", "b1"}
    [error] = summary["errors"]
    assert error["record"] == 1 and "worker process died (killed by SIGKILL" in error["error"]


def test_user_errors_exit_2_with_one_line(tmp_path: Path, cli_error: Callable[..., str]) -> None:
    shard = tmp_path / "a.tfrecord"
    write_records(shard, PAYLOADS[:1])
    assert "no input file matches" in cli_error(
        "convert", str(tmp_path / "none*.tfrecord"), "--out", str(tmp_path / "o")
    )
    assert "is not a file" in cli_error("convert", str(tmp_path), "--out", str(tmp_path / "o"))
    assert "does not exist" in cli_error(
        "convert", str(tmp_path / "gone.tfrecord"), "--out", str(tmp_path / "o")
    )
    assert "--format" in cli_error(
        "convert", str(shard), "--format", "json,obj", "--out", str(tmp_path / "o")
    )
    (tmp_path / "file").write_text("x")
    for out in (tmp_path / "file", tmp_path / "file" / "sub"):  # not a folder, cannot be one
        assert str(out) in cli_error("convert", str(shard), "--out", str(out))
    bad = tmp_path / "bad_out"
    bad.mkdir()
    (bad / "index.json").write_text("{not json")
    assert "cannot read the existing index" in cli_error("convert", str(shard), "--out", str(bad))
    assert not (bad / "summary.json").exists()


# --- processes ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two shards of 250 scenarios each: a few seconds of work for two workers."""
    folder = tmp_path_factory.mktemp("big")
    sc = make_scenario("big", 3)
    for name in ("a", "b"):
        records = []
        for i in range(250):
            sc.scenario_id = f"{name}{i:03d}"
            records.append(sc.SerializeToString())
        write_records(folder / f"{name}.tfrecord", records)
    return folder


def _children(pid: int) -> set[int]:
    kids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            kids.add(int(stat.parent.name))
    return kids


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    ("sig", "workers", "code"),
    [(signal.SIGTERM, 2, 143), (signal.SIGINT, 2, 130), (signal.SIGKILL, 2, -9), (signal.SIGTERM, 1, 143)],
)
def test_a_signal_to_convert_ends_its_workers_and_keeps_the_index_whole(
    big_shards: Path, tmp_path: Path, sig: int, workers: int, code: int
) -> None:
    """The signal reaches the parent only (as ``kill PID`` does). Its workers must be gone within
    seconds, and (unless SIGKILLed) every scene file on disk must be listed in ``index.json``."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "scenefactory", "convert", str(big_shards / "*.tfrecord")]
    cmd += ["--out", str(out), "--workers", str(workers)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        children: set[int] = set()
        while time.monotonic() < deadline and not (
            len(children) == (workers if workers > 1 else 0) and list(out.glob("json/*.json"))
        ):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            children = _children(proc.pid)
            time.sleep(0.05)
        assert len(children) == (workers if workers > 1 else 0), "convert did not start its workers"
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == code
        gone_by = time.monotonic() + 5
        while time.monotonic() < gone_by and any(_running(c) for c in children):
            time.sleep(0.05)
        assert not any(_running(c) for c in children), "a worker outlived convert"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read() if proc.stderr else ""
    assert "Traceback" not in err, err
    if sig == signal.SIGKILL:
        return
    summary = json.loads((out / "summary.json").read_text())
    index = json.loads((out / "index.json").read_text())
    assert summary["interrupted"] and 0 < summary["converted"] < 500
    assert sorted(p.name for p in (out / "json").iterdir()) == sorted(
        Path(e["files"][0]).name for e in index["scenes"].values()
    )
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"scenefactory: convert interrupted by {signal.Signals(sig).name}")
