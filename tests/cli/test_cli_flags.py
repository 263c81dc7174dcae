"""Flags and paths are checked before any work: a bad value of any flag of any subcommand, an
unknown flag, a physics rate that does not fit the policy rate, a seed past its scene range or an
``--out`` that cannot take the result is one line naming the flag, exit status 2, and no job starts.

Every job the CLI can start is replaced by one that raises :class:`JobStartedError`, so a check that
let a bad flag through fails the test at once instead of running the work, and a test of a good
flag sees the job begin. The parser is built once for the module (a bad flag never gets past it).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scenefactory import bounds, cli
from scenefactory.bounds import FloatRange, IntRange
from scenefactory.cli import argtypes
from scenefactory.errors import UserError
from scenefactory.evaluation.wosac import benchmark as wosac_benchmark
from scenefactory.go1 import jobs as go1_jobs
from scenefactory.jobs import data, demo, drive, vehicle

CliError = Callable[..., str]


class JobStartedError(Exception):
    """A job of the CLI was called: the flags were accepted."""


def _leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, (*path, name))


PARSER = cli.build_parser()
LEAVES = dict(_leaves(PARSER))
REQUIRED: dict[tuple[str, ...], list[str]] = {
    ("convert",): ["shard.tfrecord"],
    ("collect", "logs"): ["--scenes", "scenes"],
    ("fit-dynamics",): ["--data", "data"],
    ("ground",): ["--method", "dr", "--data", "data"],
    ("experiment",): ["transfer"],
    ("seed-level",): ["report"],
    ("benchmark", "wosac"): ["--scenes", "scenes", "--policy", "log"],
}
"""Positional and required arguments (besides ``--out``) each command needs to parse."""
OUTPUT = {path for path, p in LEAVES.items() if any("--out" in a.option_strings for a in p._actions)}
NUMERIC = sorted(
    (path, a.option_strings[-1], a.type, a.nargs)
    for path, p in [((), PARSER), *LEAVES.items()]
    for a in p._actions
    if isinstance(a.type, IntRange | FloatRange)
)
JOBS: tuple[tuple[ModuleType, tuple[str, ...]], ...] = (
    (drive, ("train", "evaluate", "evaluate_expert", "bench", "render")),
    (demo, ("demo",)),
    (vehicle, ("validate",)),
    (data, ("convert", "collect", "collect_logs", "fit_dynamics", "ground")),
    (go1_jobs, ("train", "evaluate", "bench", "render", "export", "deploy")),
    (wosac_benchmark, ("run_wosac",)),
)


@pytest.fixture(autouse=True)
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job raises :class:`JobStartedError`; the parser is the module's."""
    import scenefactory.experiments
    import scenefactory.experiments.seed_level

    def started(name: str) -> Callable[..., None]:
        def job(*args: object, **kwargs: object) -> None:
            raise JobStartedError(name)

        return job

    for module, names in JOBS:
        for name in names:
            monkeypatch.setattr(module, name, started(name))
    monkeypatch.setattr(scenefactory.experiments, "run_experiment", started("experiment"))
    monkeypatch.setattr(scenefactory.experiments.seed_level, "write_seed_level", started("seed-level"))
    monkeypatch.setattr(cli, "build_parser", lambda: PARSER)


def argv_of(path: tuple[str, ...], *extra: str, out: Path | None = None) -> list[str]:
    """A command line of ``path`` with its required arguments, ``extra`` and ``--out``."""
    tail = ["--out", str(out)] if out is not None and path in OUTPUT else []
    return [*path, *REQUIRED.get(path, []), *extra, *tail]


def test_every_numeric_flag_has_a_checked_type() -> None:
    """No option takes a bare ``int`` or ``float``: the class of unchecked values is gone."""
    loose = [
        (path, a.option_strings[-1])
        for path, p in [((), PARSER), *LEAVES.items()]
        for a in p._actions
        if a.type in (int, float)
    ]
    assert loose == []
    assert len(NUMERIC) > 60
    assert all(isinstance(t, IntRange | FloatRange) for *_, t, _ in NUMERIC)


def bad_values(kind: IntRange | FloatRange) -> st.SearchStrategy[str]:
    """Text the type must refuse: out of range (either side, huge), non-finite, not a number."""
    words = st.text(st.characters(codec="ascii", categories=["L"]), min_size=1, max_size=8)
    nonfinite = st.sampled_from(["nan", "inf", "-inf", "1e999", "NaN"])
    if isinstance(kind, IntRange):
        fractions = st.floats(-1e6, 1e6).filter(lambda x: not x.is_integer()).map(repr)
        out_of_range = st.integers(max_value=kind.low - 1) | st.integers(min_value=kind.high + 1)
        return st.one_of(out_of_range.map(str), fractions, nonfinite, words)
    below = st.floats(max_value=kind.low, allow_nan=False, allow_infinity=False).filter(
        lambda x: x < kind.low or (kind.low_open and x == kind.low)
    )
    above = st.floats(min_value=kind.high, allow_nan=False, allow_infinity=False).filter(
        lambda x: x > kind.high or (kind.high_open and x == kind.high)
    )
    return st.one_of(below.map(repr), above.map(repr), nonfinite, words)


@pytest.mark.parametrize(("path", "flag", "kind", "nargs"), NUMERIC, ids=lambda v: str(v))
def test_a_bad_number_is_one_line_naming_the_flag(
    path: tuple[str, ...],
    flag: str,
    kind: IntRange | FloatRange,
    nargs: int | None,
    tmp_path: Path,
    cli_error: CliError,
) -> None:
    @given(bad=bad_values(kind))
    def check(bad: str) -> None:
        given_flag = [flag, "1", bad] if nargs == 2 else [f"{flag}={bad}"]
        command = [*given_flag, "demo"] if not path else argv_of(path, *given_flag, out=tmp_path / "o")
        line = cli_error(*command)
        assert line.startswith("scenefactory: error: ") and flag in line

    check()


@given(data=st.data())
def test_an_unknown_flag_is_one_line_naming_it(
    data: st.DataObject, tmp_path: Path, cli_error: CliError
) -> None:
    path = data.draw(st.sampled_from(sorted(LEAVES)))
    name = data.draw(
        st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-"), min_size=1, max_size=12)
    )
    flag = f"--{name}"
    known = [o for a in LEAVES[path]._actions for o in a.option_strings]
    assume(not any(o.startswith(flag) for o in known))
    line = cli_error(*argv_of(path, flag, out=tmp_path / "o"))
    assert f"unrecognized arguments: {flag}" in line and " ".join(path) in line


def test_the_help_names_every_experiment() -> None:
    """``experiment --help`` lists the registry's names (the CLI does not import the experiments
    package to build its parser: it is slow to import)."""
    import scenefactory.experiments
    from scenefactory.cli import experiment

    assert tuple(scenefactory.experiments.EXPERIMENTS) == experiment.EXPERIMENT_NAMES


def test_help_still_prints_the_full_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "drive", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: scenefactory bench drive") and "--policy-hz" in text and "--out" in text


def test_missing_required_and_bad_choices_name_the_flag(cli_error: CliError) -> None:
    assert "the following arguments are required: --out" in cli_error("train", "drive")
    assert "argument --policy: invalid choice: 'x'" in cli_error(
        "eval", "drive", "--policy", "x", "--out", "o"
    )
    assert "argument --engine: unknown engine 'warp9'" in cli_error("train", "drive", "--engine", "warp9")


# -------------------------------------------------------------------------------------- --out


def _assert_no_work(tmp_path: Path, before: set[Path], t0: float) -> None:
    assert set(tmp_path.rglob("*")) == before, "files were created"
    assert time.perf_counter() - t0 < 5.0


@pytest.mark.parametrize("path", sorted(OUTPUT), ids=" ".join)
def test_out_of_the_wrong_kind_is_refused_before_the_work(
    path: tuple[str, ...], tmp_path: Path, cli_error: CliError
) -> None:
    """A folder output given an existing file, a file output given an existing folder, and any
    output under a file (the unwritable place: root may write anywhere else)."""
    wants_file = (path[0], path[1] if len(path) > 1 else None) in argtypes.FILE_OUTPUTS
    suffix = ".gif" if path == ("render", "drive") else ".json"
    a_file = tmp_path / f"taken{suffix}"
    a_file.write_text("keep me")
    (tmp_path / "folder").mkdir()
    before = set(tmp_path.rglob("*"))
    t0 = time.perf_counter()
    wrong_kind = tmp_path / "folder" if wants_file else a_file
    line = cli_error(*argv_of(path, out=wrong_kind))
    assert f"--out {wrong_kind}: is an existing {'folder' if wants_file else 'file'}" in line
    under_a_file = a_file / f"out{suffix}"
    line = cli_error(*argv_of(path, out=under_a_file))
    assert f"--out {under_a_file}: {a_file} is a file" in line
    _assert_no_work(tmp_path, before, t0)
    assert a_file.read_text() == "keep me"


@pytest.mark.parametrize("path", sorted(OUTPUT), ids=" ".join)
def test_a_good_out_reaches_the_job(
    path: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks refuse only what is wrong: a new path of the right kind gets to the work."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    out = tmp_path / "new" / ("v.gif" if path == ("render", "drive") else "result")
    extra: dict[tuple[str, ...], list[str]] = {
        ("eval", "drive"): ["--checkpoint", "p.pt"],
        ("render", "drive"): ["--checkpoint", "p.pt"],
    }
    with pytest.raises(JobStartedError):
        cli.main(argv_of(path, *extra.get(path, []), out=out))
    assert not out.exists()


def test_render_wants_a_gif_and_bench_a_file(tmp_path: Path, cli_error: CliError) -> None:
    assert "expected a .gif file, e.g." in cli_error("render", "drive", "--out", str(tmp_path / "v.mp4"))
    line = cli_error("bench", "drive", "--out", str(tmp_path))
    assert "is an existing folder, expected a file name (e.g." in line


def test_check_out_and_check_input(tmp_path: Path) -> None:
    argtypes.check_out(tmp_path / "a" / "b", folder=True)
    argtypes.check_out(tmp_path / "a" / "b.json", folder=False)
    with pytest.raises(UserError, match="not a regular file"):
        argtypes.check_out(Path("/dev/null"), folder=False)
    with pytest.raises(UserError, match=r"--data .*: not found, expected a dataset"):
        argtypes.check_input(tmp_path / "nope", "--data", True, "a dataset")
    with pytest.raises(UserError, match=r"--dynamics-model .*: is a folder, expected a model.pt"):
        argtypes.check_input(tmp_path, "--dynamics-model", False, "a model.pt")


def test_places_that_cannot_be_written_are_refused_and_nothing_is_left_behind(
    tmp_path: Path, cli_error: CliError
) -> None:
    """Root passes os.access everywhere: the check must really write (``/proc``, broken or looping
    symlinks), and must not leave the folders it created while checking."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    for place in (Path("/proc/sf_out"), loop, dangling / "sub"):
        with pytest.raises(UserError, match="cannot write there"):
            argtypes.check_out(place, folder=True)
    argtypes.check_out(tmp_path / "new" / "deeper", folder=True)
    assert not (tmp_path / "new").exists()
    assert "expected a path, got an empty string" in cli_error("eval", "drive", "--out", "")


# -------------------------------------------------------------------------------------- rates


@given(physics=st.floats(100, 1000), policy=st.floats(1, 1000))
def test_a_physics_rate_must_be_a_whole_multiple_of_the_policy_rate(physics: float, policy: float) -> None:
    try:
        n = bounds.policy_steps(physics, policy, "--policy-hz")
    except UserError as exc:
        assert "--physics-hz" in str(exc) and "--policy-hz" in str(exc)
        ratio = physics / policy
        assert not math.isclose(ratio, max(1, round(ratio)), rel_tol=1e-6)
    else:
        assert n >= 1 and math.isclose(n * policy, physics, rel_tol=1e-6)


@pytest.mark.parametrize(
    ("physics", "policy", "ok"),
    [("120", "10", True), ("120", "30", True), ("105", "7", True), ("120", "7", False), ("100", "30", False)],
)
def test_bench_rates_are_checked_like_the_mujoco_tier(
    physics: str, policy: str, ok: bool, tmp_path: Path, cli_error: CliError
) -> None:
    from scenefactory.engines.mujoco_engine import MujocoEngine

    argv = [
        "bench",
        "drive",
        "--physics-hz",
        physics,
        "--policy-hz",
        policy,
        "--out",
        str(tmp_path / "b.json"),
    ]
    if ok:
        with pytest.raises(JobStartedError):
            cli.main(argv)
        MujocoEngine(1, 1, dt=1.0 / float(policy), physics_hz=float(physics))
    else:
        assert "a policy step must be a whole number of physics steps" in cli_error(*argv)
        with pytest.raises(ValueError, match="whole number of physics steps"):
            MujocoEngine(1, 1, dt=1.0 / float(policy), physics_hz=float(physics))


def test_the_lowest_physics_rate_is_the_car_models() -> None:
    from scenefactory.vehicles.car import world_mjcf

    world_mjcf(1, timestep_s=1.0 / bounds.MIN_PHYSICS_HZ)
    with pytest.raises(ValueError, match="timestep_s"):
        world_mjcf(1, timestep_s=1.0 / (bounds.MIN_PHYSICS_HZ - 1))


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "drive", "--physics-hz", "1e9", "--out", "b.json"],
        ["bench", "drive", "--physics-hz", "inf", "--out", "b.json"],
        ["eval", "drive", "--physics-hz", "60", "--out", "e"],
        ["validate", "vehicle", "--physics-hz", "100", "--out", "v"],
        ["train", "drive", "--physics-hz", "125", "--out", "t"],
    ],
    ids=" ".join,
)
def test_absurd_or_unfitting_physics_rates_name_the_flag(argv: list[str], cli_error: CliError) -> None:
    assert "--physics-hz" in cli_error(*argv)


# ---------------------------------------------------------------------------------- seed ranges


@given(seed=st.integers(0, 999_999), episodes=st.integers(1, 10_000))
def test_eval_seeds_stay_in_the_evaluation_range(
    seed: int, episodes: int, tmp_path: Path, cli_error: CliError
) -> None:
    argv = ["eval", "drive", "--checkpoint", "p.pt", "--seed", str(seed), "--episodes", str(episodes)]
    argv += ["--out", str(tmp_path / "e")]
    if seed + episodes <= 1_000_000:
        with pytest.raises(JobStartedError):
            cli.main(argv)
    else:
        line = cli_error(*argv)
        assert f"--seed {seed} with --episodes {episodes}" in line and "evaluation range" in line


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["train", "drive", "--seed", "999990"], "--seed 999990 with --train-scenes 120"),
        (["train", "drive", "--seed", "999000", "--train-scenes", "1001"], "--train-scenes 1001"),
        (["render", "drive", "--checkpoint", "p.pt", "--seed", "999990"], "--seed 999990 with --panels 4"),
        (["bench", "drive", "--seed", "999990"], "--seed 999990"),
        (["collect", "drive", "--seed", "999990"], "--seed 999990"),
        (["experiment", "transfer", "--seed", "999990"], "--seed 999990 with --seeds 3"),
        (["experiment", "transfer", "--seed", "999000", "--episodes", "1001"], "--episodes 1001"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_seeds_past_their_scene_range_are_refused(
    argv: list[str], names: str, tmp_path: Path, cli_error: CliError, monkeypatch: pytest.MonkeyPatch
) -> None:
    import scenefactory.experiments
    from scenefactory.experiments import transfer

    def resolve_only(name: str, args: Any) -> None:  # the experiment's first step: its sizes
        args.resolve(transfer.FULL, transfer.QUICK)
        raise JobStartedError(name)

    monkeypatch.setattr(scenefactory.experiments, "run_experiment", resolve_only)
    out = tmp_path / ("b.json" if argv[0] == "bench" else "v.gif" if argv[0] == "render" else "o")
    line = cli_error(*argv, "--out", str(out))
    assert names in line and "range" in line


def test_negative_seeds_name_the_seed(cli_error: CliError) -> None:
    for argv in (["train", "drive"], ["train", "go1"], ["deploy", "go1"], ["ground", "--method", "dr"]):
        assert "argument --seed: expected an integer in [0, " in cli_error(
            *argv, "--seed", "-1", "--out", "o"
        )


# ------------------------------------------------------------------------- engines and go1 flags


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--engine", "learned"], "--engine learned needs --dynamics-model PATH"),
        (["--engine", "grounded"], "--engine grounded needs --grounding PATH"),
        (["--grounding", "g"], "--grounding applies to --engine grounded"),
        (
            ["--engine", "grounded", "--grounding", "nowhere"],
            "--grounding nowhere: not found, expected a folder",
        ),
    ],
)
def test_engine_flags_are_checked_before_the_scenes(
    extra: list[str], message: str, cli_error: CliError
) -> None:
    assert message in cli_error("train", "drive", *extra, "--out", "t")


def test_go1_latency_past_one_policy_period_is_refused(
    tmp_path: Path, cli_error: CliError, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scenefactory.go1 import jobs as real

    monkeypatch.undo()  # the real go1 train, whose first step is the spec; the trainer must not start
    monkeypatch.setattr(real, "Go1Trainer", lambda *a, **k: pytest.fail("the trainer was built"))
    monkeypatch.setattr(cli, "build_parser", lambda: PARSER)
    line = cli_error("train", "go1", "--latency-ms", "0", "50", "--out", str(tmp_path / "g"))
    assert "--latency-ms: HIGH must be at most one policy period (20 ms" in line
    assert not (tmp_path / "g").exists()


# --------------------------------------------------------------------------- agents beyond K


def test_scenes_with_more_agents_than_k_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    from scenefactory.scenes.library import procedural_scenes

    scenes = procedural_scenes("eval", 2, 4, kinds=("straight",))
    assert all(sc.num_agents > 2 for sc in scenes)
    left = drive.agents_left_out(scenes, 2, Path("scenes/json"), "the checkpoint's agents per world")
    assert left == sum(sc.num_agents - 2 for sc in scenes)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 of 2 scenes in scenes/json hold more controlled agents" in err
    assert "the checkpoint's agents per world (2)" in err
    assert drive.agents_left_out(scenes, 32, None, "--agents") == 0
    assert capsys.readouterr().err == ""
