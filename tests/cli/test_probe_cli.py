"""The classes of CLI problems a tester's probe found, each pinned down.

1. ``--scenes DIR`` is read and checked before any status line (``train drive`` printed "building
   N procedural training scenes plus the scenes in DIR ..." and then the error); likewise for
   ``eval``/``render drive --scenes`` and ``collect logs --scenes``.
2. ``collect drive --engine learned|grounded`` has the ``--dynamics-model``/``--grounding`` flags
   its ``--engine`` help names, checked before the progress bar.
3. ``convert --ray ADDRESS``: an unreachable address is one line naming ``--ray`` within seconds
   (``ray.init`` retried for minutes).
4. Scene JSON is strict: an unknown key anywhere (but inside the free-form ``params``) and a type
   code outside its enum are errors naming the field; every procedural scene, the converted and
   signalled ones included, still round-trips.
5. Ctrl-C says what the command leaves behind: a resumable checkpoint only where there is one.
"""

from __future__ import annotations

import copy
import json
import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scenefactory.cli import main
from scenefactory.engines import EngineSpec
from scenefactory.errors import SceneFormatError, UserError
from scenefactory.jobs import data, drive, vehicle
from scenefactory.scenes.library import GENERATOR_KINDS, procedural_scenes
from scenefactory.scenes.roadgraph import RoadEdgeType, RoadLineType
from scenefactory.scenes.scene import Scene, SignalLog, SignalState
from scenefactory.scenes.scene_json import (
    KEYS,
    ObjectKind,
    load_scene,
    save_scene,
    scene_from_dict,
    scene_to_dict,
)
from scenefactory.scenes.womd.batch import check_ray_address
from scenefactory.scenes.womd.convert import scenario_to_scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from test_womd_reader import make_scenario

# --------------------------------------------------------------------------- 1. --scenes first


def _bad_folders(root: Path) -> dict[str, tuple[Path, str]]:
    """Scene folders that must be refused, and a piece of the expected message."""
    good = scene_to_dict(procedural_scenes("eval", 1, 2, kinds=("straight",))[0])
    folders: dict[str, tuple[Path, str]] = {
        "missing": (root / "nonexistent", "does not exist or is not a folder"),
        "file": (root / "afile", "does not exist or is not a folder"),
        "empty": (root / "empty", "holds no *.json scene files"),
        "invalid_json": (root / "invalid", "not valid JSON"),
        "nan": (root / "nan", "agents[0].spawn_pose[0]"),
        "unknown_key": (root / "unknown", "agents[0].colour"),
    }
    (root / "afile").write_text("not a folder")
    (root / "empty").mkdir()
    (root / "invalid").mkdir()
    (root / "invalid" / "s.json").write_text('{"format": "scenefactory.scene", }')
    nan = copy.deepcopy(good)
    nan["agents"][0]["spawn_pose"][0] = float("nan")
    (root / "nan").mkdir()
    (root / "nan" / "s.json").write_text(json.dumps(nan))
    unknown = copy.deepcopy(good)
    unknown["agents"][0]["colour"] = "red"
    (root / "unknown").mkdir()
    (root / "unknown" / "s.json").write_text(json.dumps(unknown))
    return folders


@pytest.fixture(scope="module")
def bad_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    return _bad_folders(tmp_path_factory.mktemp("bad_scenes"))


@pytest.fixture
def fake_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """``eval``/``render drive --checkpoint`` without training one: any path loads a 1-agent policy."""
    policy = SimpleNamespace(
        task_cfg=DrivingTaskConfig(num_worlds=1, agents_per_world=1),
        act=lambda obs: None,
        meta={"engine": "kinematic", "iteration": 1},
    )
    monkeypatch.setattr(drive, "load_policy", lambda path: policy)


CASES = ("missing", "file", "empty", "invalid_json", "nan", "unknown_key")


@pytest.mark.parametrize("case", CASES)
def test_train_scenes_folder_is_checked_before_the_status_line(
    case: str, bad_folders: dict[str, tuple[Path, str]], cli_error: Callable[..., str], tmp_path: Path
) -> None:
    folder, expected = bad_folders[case]
    err = cli_error(
        "train", "drive", "--iterations", "1", "--scenes", str(folder), "--out", str(tmp_path / "r")
    )
    assert err.startswith("scenefactory: error: ") and expected in err and "building" not in err


@pytest.mark.parametrize("case", ("missing", "invalid_json", "unknown_key"))
def test_eval_render_and_collect_logs_check_the_scenes_folder_first(
    case: str,
    bad_folders: dict[str, tuple[Path, str]],
    cli_error: Callable[..., str],
    tmp_path: Path,
    fake_policy: None,
) -> None:
    folder, expected = bad_folders[case]
    ckpt = str(tmp_path / "any.pt")
    for argv in (
        ["eval", "drive", "--checkpoint", ckpt, "--scenes", str(folder), "--out", str(tmp_path / "e")],
        ["eval", "drive", "--policy", "expert", "--scenes", str(folder), "--out", str(tmp_path / "e")],
        ["render", "drive", "--checkpoint", ckpt, "--scenes", str(folder), "--out", str(tmp_path / "v.gif")],
        ["render", "drive", "--policy", "expert", "--scenes", str(folder), "--out", str(tmp_path / "v.gif")],
        ["collect", "logs", "--scenes", str(folder), "--out", str(tmp_path / "d")],
    ):
        err = cli_error(*argv)
        assert expected in err and "building" not in err and "eval drive" not in err, argv


def test_train_reads_the_scenes_folder_then_says_what_it_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "scenes"
    for sc in procedural_scenes("eval", 2, 2, kinds=("straight", "merge")):
        save_scene(sc, folder / f"{sc.name}.json")
    seen: list[int] = []

    class StopError(Exception):
        pass

    def trainer(
        spec: Any, scenes: list[Scene], out: Path, checkpoint: Any = None, device: Any = "cpu"
    ) -> None:
        seen.append(len(scenes))
        raise StopError

    monkeypatch.setattr(drive, "Trainer", trainer)
    with pytest.raises(StopError):
        main(["train", "drive", "--train-scenes", "1", "--scenes", str(folder), "--out", str(tmp_path / "r")])
    assert seen == [3]  # the folder's two scenes, then one procedural one
    said = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert f"building 1 procedural training scenes plus the 2 scenes in {folder} (seed 0)" in said


# ------------------------------------------------------------------- 2. collect drive engines


def test_collect_drive_offers_the_flags_its_engine_help_names(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["collect", "drive", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "learned (--dynamics-model)" in help_text and "grounded (--grounding)" in help_text
    assert "--dynamics-model DYNAMICS_MODEL" in help_text and "--grounding GROUNDING" in help_text


@pytest.mark.parametrize(
    ("extra", "expected"),
    (
        (["--engine", "learned"], "--engine learned needs --dynamics-model PATH"),
        (["--engine", "grounded"], "--engine grounded needs --grounding PATH"),
        (["--engine", "kinematic", "--grounding", "g"], "--grounding applies to --engine grounded"),
        (["--engine", "learned", "--dynamics-model", "nonexistent.pt"], "--dynamics-model"),
        (["--engine", "grounded", "--grounding", "nonexistent"], "--grounding"),
    ),
)
def test_collect_drive_engine_flags_fail_before_the_progress_bar(
    extra: list[str], expected: str, cli_error: Callable[..., str], tmp_path: Path
) -> None:
    err = cli_error("collect", "drive", *extra, "--steps", "2", "--out", str(tmp_path / "d"))
    assert expected in err and "collect (" not in err


def test_collect_drive_passes_the_model_through_and_the_learned_engine_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scenefactory.dynamics.models import DynamicsModelConfig, ModelKind
    from scenefactory.grounding import dataset
    from scenefactory.grounding.fit import fit_dynamics

    dataset.collect(tmp_path / "data", engine=EngineSpec(), worlds=2, agents=1, steps=30, num_scenes=2)
    fit_dynamics(tmp_path / "data", DynamicsModelConfig(kind=ModelKind.MLP), tmp_path / "fit", epochs=1)
    model = str(tmp_path / "fit" / "model.pt")
    # the collector runs the learned engine (one scene: building the CLI's 60 takes ~15 s)
    small = {"worlds": 1, "agents": 1, "steps": 2, "num_scenes": 1}
    spec = EngineSpec(tier="learned", dynamics_model=Path(model))
    meta = dataset.collect(tmp_path / "learned", engine=spec, **small)
    assert meta["engine"] == "learned" and meta["transitions"] > 0
    assert meta["engine_spec"]["dynamics_model"] == model
    # and the CLI hands it the flag (checked first: the model is read before any work)
    got: dict[str, Any] = {}

    def spy(out: Path, engine: EngineSpec, **kwargs: Any) -> dict[str, Any]:
        got.update(kwargs, engine=engine)
        return {"engine": engine.tier, "transitions": 0, "shards": 0, "policies_used": []}

    monkeypatch.setattr(dataset, "collect", spy)
    argv = ["collect", "drive", "--engine", "learned", "--dynamics-model", model, "--steps", "2"]
    assert main([*argv, "--out", str(tmp_path / "cli")]) == 0
    assert got["engine"] == spec


def test_collect_passes_the_grounding_to_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scenefactory.grounding import dataset

    got: dict[str, Any] = {}

    class StopError(Exception):
        pass

    def env(*args: Any, **kwargs: Any) -> None:
        got.update(kwargs)
        raise StopError

    monkeypatch.setattr(dataset, "DrivingEnv", env)
    with pytest.raises(StopError):
        spec = EngineSpec(tier="grounded", grounding=Path("g"))
        dataset.collect(tmp_path, engine=spec, worlds=1, agents=1, steps=1, num_scenes=1)
    assert got["engine"] == EngineSpec(tier="grounded", grounding=Path("g"))


# --------------------------------------------------------------------------------- 3. --ray


@pytest.fixture
def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def listening() -> Iterator[int]:
    """A local TCP port something listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_convert_ray_unreachable_is_one_line_naming_ray(
    closed_port: int, cli_error: Callable[..., str], tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    shard = tmp_path / "training.tfrecord-00000-of-00001"
    shard.write_bytes(b"")
    address = f"127.0.0.1:{closed_port}"
    err = cli_error("convert", str(shard), "--ray", address, "--out", str(tmp_path / "out"))
    assert f"--ray '{address}'" in err and "no Ray cluster reachable" in err and "convert" not in err


def test_ray_address_forms(closed_port: int, listening: int, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    check_ray_address(f"127.0.0.1:{listening}")  # something answers: ray.init takes it from there
    check_ray_address(f"ray://127.0.0.1:{listening}")
    check_ray_address("local")  # a new local instance: nothing to reach
    for address in (f"127.0.0.1:{closed_port}", f"ray://127.0.0.1:{closed_port}"):
        with pytest.raises(UserError, match="no Ray cluster reachable"):
            check_ray_address(address)
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{closed_port}")
    with pytest.raises(UserError, match=r"from --ray auto"):
        check_ray_address("auto")  # 'auto' reads RAY_ADDRESS first, as ray.init does


MALFORMED = st.sampled_from(
    ["", "h:", ":6379", "h:0", "h:65536", "h:port", "ray://h", "[]:1", "http://h:1", "h:-1", "Auto"]
) | st.text(alphabet="abc/ .[]", max_size=15).filter(lambda t: t.strip() not in ("auto", "local"))


@given(text=MALFORMED)
def test_malformed_ray_addresses_are_refused_without_connecting(text: str) -> None:
    pytest.importorskip("ray")
    with pytest.raises(UserError, match=r"^--ray .*(not a Ray address|unsupported scheme)"):
        check_ray_address(text, timeout_s=0.01)


def test_ray_timeout_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")

    def silent(address: tuple[str, int], timeout: float) -> None:
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", silent)
    with pytest.raises(UserError, match=r"--ray '192\.0\.2\.2:6379': .* within 5 s \(timed out\)"):
        check_ray_address("192.0.2.2:6379")


# ---------------------------------------------------------------------------- 4. scene JSON


def _rich_scene() -> Scene:
    """A converted WOMD scene (lanes, lines, edges, markings, agents, log, replay) with a signal
    section (one light, one stop sign)."""
    scene = scenario_to_scene(make_scenario("probe", 3))[0]
    sig = SignalLog(
        stop_xy=np.array([[5.0, 0.0]]),
        lane=np.array([0]),
        state=np.full((4, 1), int(SignalState.GO), dtype=np.int64),
        sign_xy=np.array([[6.0, 1.0]]),
        sign_lane=np.array([-1]),
    )
    return replace(scene, signals=sig)


RICH = scene_to_dict(_rich_scene())


def _objects(data: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object of a scene document and its path, ``params``' contents left out (free-form)."""
    if isinstance(data, dict):
        yield path, data
        for key, value in data.items():
            if key != "params" or path:
                yield from _objects(value, f"{path}.{key}" if path else key)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _objects(value, f"{path}[{i}]")


OBJECTS = [p for p, _ in _objects(RICH)]


def test_the_rich_scene_holds_every_kind_of_object() -> None:
    tails = {p.split(".")[-1].split("[")[0] for p in OBJECTS}
    assert {"", "roadgraph", "lanes", "road_lines", "road_edges", "agents", "log", "replay"} <= tails
    assert {"objects", "signals", "lights", "stop_signs"} <= tails
    assert RICH["params"]["agents"]  # the converter's agent counts ride in params
    assert scene_from_dict(RICH)  # and it loads


@given(where=st.sampled_from(OBJECTS), key=st.text(min_size=1, max_size=12))
def test_an_unknown_key_anywhere_is_an_error_naming_it(where: str, key: str) -> None:
    data = copy.deepcopy(RICH)
    target = dict(_objects(data))[where]
    if key in set().union(*KEYS.values()):
        return
    target[key] = 1
    with pytest.raises(SceneFormatError) as info:
        scene_from_dict(data, "s.json")
    shown = key if key.isprintable() else json.dumps(key)[1:-1]
    field = f"{where}.{shown}" if where else shown
    assert f"field '{field}': unknown to scene format version 1" in str(info.value)
    assert "\n" not in str(info.value)


@given(params=st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=5), max_size=4))
def test_params_stay_free_form(params: dict[str, Any]) -> None:
    data = copy.deepcopy(RICH)
    data["params"] = {**data["params"], **params}
    assert scene_from_dict(data).params == data["params"]


CODES: dict[str, tuple[tuple[str, ...], type]] = {
    "road line": (("roadgraph", "road_lines", 0, "type"), RoadLineType),
    "road edge": (("roadgraph", "road_edges", 0, "type"), RoadEdgeType),
    "replay kind": (("replay", "objects", 0, "kind"), ObjectKind),
}


@given(
    which=st.sampled_from(sorted(CODES)),
    code=st.integers(-(2**40), 2**40) | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=3),
)
def test_type_codes_must_be_in_their_enum(which: str, code: Any) -> None:
    path, enum = CODES[which]
    data = copy.deepcopy(RICH)
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = code
    valid = not isinstance(code, bool) and isinstance(code, int) and code in {int(m) for m in enum}
    if valid:
        scene_from_dict(data)
        return
    field = f"{path[0]}.{path[1]}[{path[2]}].{path[3]}"
    with pytest.raises(SceneFormatError, match=re.escape(f"field '{field}': expected a WOMD")):
        scene_from_dict(data, "s.json")


def test_probe_fixtures_line_type_999_and_unknown_agent_field(tmp_path: Path) -> None:
    data = copy.deepcopy(RICH)
    data["roadgraph"]["road_lines"][0]["type"] = 999
    (tmp_path / "a.json").write_text(json.dumps(data))
    with pytest.raises(SceneFormatError, match=r"road_lines\[0\]\.type': expected a WOMD road line type"):
        load_scene(tmp_path / "a.json")


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
@pytest.mark.parametrize("cycle", (0.0, 40.0))
def test_every_procedural_scene_round_trips(kind: str, cycle: float, tmp_path: Path) -> None:
    for sc in procedural_scenes("train", 1, 8, kinds=(kind,), signal_cycle_s=cycle):
        save_scene(sc, tmp_path / "s.json")
        back = load_scene(tmp_path / "s.json")
        assert scene_to_dict(back) == scene_to_dict(sc)
    assert set(RICH) <= KEYS[""] and set(RICH["roadgraph"]) == KEYS["roadgraph"]


# ----------------------------------------------------------------------------- 5. Ctrl-C


@pytest.mark.parametrize(
    ("argv", "job", "says", "never"),
    (
        (["train", "drive", "--iterations", "1"], (drive, "train"), "rerun the same command to resume", ""),
        (["collect", "drive", "--steps", "2"], (data, "collect"), "meta.json", "checkpoint"),
        (["validate", "vehicle"], (vehicle, "validate"), "every file written is complete", "checkpoint"),
    ),
)
def test_ctrl_c_says_what_the_command_leaves(
    argv: list[str],
    job: tuple[ModuleType, str],
    says: str,
    never: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(*job, interrupted)
    assert main([*argv, "--out", str(tmp_path / "o")]) == 130
    err = capsys.readouterr().err
    assert err.startswith("scenefactory: interrupted (") and err.count("\n") == 1 and says in err
    assert not never or never not in err
