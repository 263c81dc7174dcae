"""Named recipes (``go1.recipes``, ``jobs.recipes``) and the flags generated from the config
dataclasses (``cli.flags``): every recipe resolves to a valid training spec; ``whole-body``'s last
stage is the shipped policy's recorded config; each stage whose run-log command is recorded parses
to that stage; flags given beside ``--recipe`` replace its fields; a wrong name is one line listing
the right ones; the generated ``train go1`` flags keep the hand-written ones' names and defaults."""

from __future__ import annotations

import json
import shlex
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from scenefactory import cli
from scenefactory.checkpoint import load_checkpoint
from scenefactory.cli.flags import flag_name, given_fields
from scenefactory.cli.go1_train_flags import RECIPE_FLAGS
from scenefactory.go1 import chain
from scenefactory.go1.jobs import SHIPPED_POLICIES, SHIPPED_POLICY
from scenefactory.go1.options import RecipeOptions
from scenefactory.go1.recipe import train_spec
from scenefactory.go1.recipes import GO1_RECIPES, Go1Recipe, Start
from scenefactory.go1.train import load_go1_policy
from scenefactory.jobs import demo, drive
from scenefactory.jobs.recipes import DRIVE_RECIPES
from scenefactory.rl.checkpoints import write_stage_checkpoint

PARSER = cli.build_parser()


class JobStartedError(Exception):
    """The job was called: its arguments are in ``job_args``."""

    def __init__(self, args: Any) -> None:
        super().__init__("job started")
        self.job_args = args


def _capture(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
    def job(args: Any) -> None:
        raise JobStartedError(args)

    monkeypatch.setattr(module, name, job)


def _options(command: str) -> RecipeOptions:
    """The :class:`RecipeOptions` ``train go1`` builds from a recorded command line."""
    args = PARSER.parse_args(shlex.split(command)[1:])
    return RecipeOptions(**given_fields(args, RECIPE_FLAGS))


@pytest.mark.parametrize("name", list(GO1_RECIPES))
def test_every_go1_stage_resolves_to_a_valid_spec(name: str, tmp_path: Path) -> None:
    """Each stage's options pass ``train_spec``'s checks (a fine-tune's start is a file here)."""
    recipe = GO1_RECIPES[name]
    assert recipe.name == name and recipe.summary and recipe.result and recipe.train_time
    start = tmp_path / "prev.pt"
    start.touch()
    for stage in recipe.stages:
        init = None if stage.start is Start.FRESH else start
        spec = train_spec(recipe.envs, stage.iterations, recipe.seed, replace(stage.options, init_from=init))
        assert spec.iterations == stage.iterations and spec.task.num_envs == recipe.envs


def test_the_recipes_train_what_their_names_say() -> None:
    """velocity: flat, velocity only; whole-body: body commands at the end; rough: terrain with a
    blind actor; rough-scan: the height scan in the actor (and a scan needs terrain)."""
    last = {n: r.stages[-1].options for n, r in GO1_RECIPES.items()}
    assert last["velocity"] == RecipeOptions()
    assert last["whole-body"].whole_body and last["whole-body"].terrain == "flat"
    assert last["rough"].terrain == "rough" and not last["rough"].height_scan_actor
    assert last["rough-scan"].terrain == "rough" and last["rough-scan"].height_scan_actor
    assert [s.iterations for s in GO1_RECIPES["rough"].stages] == [1000, 850, 200, 425, 175, 325]
    assert sum(s.iterations for s in GO1_RECIPES["rough-scan"].stages[1:]) == 3575  # the run log's count


@pytest.mark.parametrize("name", ["whole-body", "rough"])
def test_the_recipe_of_each_shipped_policy_makes_it(name: str) -> None:
    """A shipped checkpoint stores the task and PPO config it was trained with: ``--recipe NAME``'s
    last stage must make exactly those (and at its iteration and seed)."""
    recipe = GO1_RECIPES[name]
    stage = recipe.stages[-1]
    path = SHIPPED_POLICIES[name]
    spec = train_spec(recipe.envs, stage.iterations, recipe.seed, replace(stage.options, init_from=path))
    shipped = load_go1_policy(path)
    assert spec.task == shipped.task_cfg
    assert spec.ppo == shipped.ppo_cfg
    assert shipped.meta["iteration"] == stage.iterations and shipped.meta["seed"] == recipe.seed


def test_a_stage_other_than_whole_body_is_not_the_shipped_config() -> None:
    """The comparison above can fail: the stage before (no in-place turns) differs."""
    recipe = GO1_RECIPES["whole-body"]
    stage = recipe.stages[1]
    spec = train_spec(
        recipe.envs, stage.iterations, recipe.seed, replace(stage.options, init_from=SHIPPED_POLICY)
    )
    assert spec.task != load_go1_policy(SHIPPED_POLICY).task_cfg


def test_recorded_commands_parse_to_their_stages() -> None:
    """A stage whose run-log command is recorded in full is what that command line parses to (its
    ``--init-from`` aside: the chain gives it); the others say what they changed."""
    parsed = 0
    for recipe in GO1_RECIPES.values():
        for stage in recipe.stages:
            if not stage.command.startswith("scenefactory "):
                assert stage.command.startswith("run ") and "command with" in stage.command
                continue
            assert replace(_options(stage.command), init_from=None) == stage.options, stage.name
            assert ("--init-from" in stage.command) == (stage.start is not Start.FRESH)
            parsed += 1
    assert parsed >= 15


def test_a_chain_starts_fresh_once() -> None:
    """A recipe is refused at construction unless only its first stage starts fresh."""
    velocity = GO1_RECIPES["velocity"].stages[0]
    with pytest.raises(ValueError, match="later stage"):
        Go1Recipe("x", "x", (velocity, velocity), "r", "t")
    with pytest.raises(ValueError, match="first stage"):
        Go1Recipe("x", "x", (replace(velocity, start=Start.ACTOR),), "r", "t")


# ---------------------------------------------------------------------------- the command line


def test_flags_given_beside_a_recipe_replace_its_fields(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _capture(monkeypatch, chain, "train_recipe")
    argv = ["train", "go1", "--recipe", "whole-body", "--out", str(tmp_path / "r")]
    with pytest.raises(JobStartedError) as run:
        cli.main([*argv, "--pure-turn-prob", "0.5", "--iterations", "2", "--envs", "8", "--seed", "3"])
    got = run.value.job_args.recipe
    want = GO1_RECIPES["whole-body"]
    assert [s.options.pure_turn_prob for s in got.stages] == [0.5, 0.5, 0.5]
    assert [s.options.whole_body for s in got.stages] == [s.options.whole_body for s in want.stages]
    assert [s.iterations for s in got.stages] == [2, 2, 2] and (got.envs, got.seed) == (8, 3)
    with pytest.raises(JobStartedError) as run:
        cli.main(argv)
    assert run.value.job_args.recipe == want  # nothing given: the recipe as registered


def test_wrong_recipe_names_and_starts_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["train", "go1", "--recipe", "wholebody", "--out", str(tmp_path / "a")]) == 2
    assert "expected one of velocity, whole-body, rough, rough-scan" in capsys.readouterr().err
    assert cli.main(["train", "drive", "--recipe", "womd", "--out", str(tmp_path / "b")]) == 2
    assert "expected one of demo, real-format" in capsys.readouterr().err
    argv = ["train", "go1", "--recipe", "rough", "--init-from", "x.pt", "--out", str(tmp_path / "c")]
    assert cli.main(argv) == 2
    assert "--init-from with --recipe rough" in capsys.readouterr().err


def test_from_stage_starts_a_chain_later_from_a_given_checkpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--from-stage whole-body --init-from go1_robust.pt`` is the run log's second stage command:
    the chain skips the velocity stage and starts there from the file given."""
    _capture(monkeypatch, chain, "train_recipe")
    argv = ["train", "go1", "--recipe", "whole-body", "--out", str(tmp_path / "r")]
    with pytest.raises(JobStartedError) as run:
        cli.main([*argv, "--from-stage", "whole-body", "--init-from", str(SHIPPED_POLICY)])
    assert (run.value.job_args.first_stage, run.value.job_args.init_from) == (1, SHIPPED_POLICY)
    assert run.value.job_args.recipe == GO1_RECIPES["whole-body"]  # --init-from is the start, not a field
    assert cli.main([*argv, "--from-stage", "whole-body"]) == 2
    assert "--from-stage whole-body of --recipe whole-body needs --init-from CKPT" in capsys.readouterr().err
    assert cli.main([*argv, "--from-stage", "turns", "--init-from", str(SHIPPED_POLICY)]) == 2
    assert "has the stages velocity, whole-body, pure-turn" in capsys.readouterr().err
    assert cli.main([*argv, "--from-stage", "velocity", "--init-from", str(SHIPPED_POLICY)]) == 2
    assert "starts fresh: give no --init-from" in capsys.readouterr().err


@pytest.mark.parametrize(("task", "names"), [("go1", GO1_RECIPES), ("drive", DRIVE_RECIPES)])
def test_list_recipes_needs_no_out(
    task: str, names: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["train", task, "--list-recipes"])
    assert done.value.code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == list(names)


FLAG_OF_FIELD = {
    "robust": "--no-robustness",
    "pure_turn_prob": "--pure-turn-prob",
    "yaw_precision_weight": "--yaw-precision-weight",
    "joint_friction_scale": "--joint-friction-dr",
    "latency_ms": "--latency-ms",
    "reward_weights": "--reward-weight",
    "history": "--history",
    "init_from": "--init-from",
    "rnn": "--rnn",
    "rnn_hidden": "--rnn-hidden",
    "teacher": "--teacher",
    "critic_warmup": "--critic-warmup",
    "privileged_actor": "--privileged-actor",
    "whole_body": "--whole-body",
    "terrain": "--terrain",
    "height_scan_actor": "--height-scan-actor",
    "command_limits": "--command-limits",
    "foot_clearance_target_m": "--foot-clearance-target",
    "heading_prob": "--heading-prob",
    "terrain_proportions": "--terrain-proportions",
    "entropy_coef": "--entropy-coef",
    "forward_only": "--forward-only",
    "min_forward_mps": "--min-forward-speed",
    "terrain_spacing_m": "--terrain-spacing",
    "init_action_std": "--action-std",
}
"""The hand-written parser's flag of each field (its names are a contract with users and docs)."""

SAMPLES: dict[str, tuple[list[str], Any]] = {
    "robust": ([], False),
    "joint_friction_scale": (["0.8", "1.8"], (0.8, 1.8)),
    "latency_ms": (["0", "10"], (0.0, 10.0)),
    "reward_weights": (["action_rate=-0.03"], (("action_rate", -0.03),)),
    "init_from": (["a.pt"], Path("a.pt")),
    "teacher": (["t.pt"], Path("t.pt")),
    "rnn": (["gru"], "gru"),
    "terrain": (["rough"], "rough"),
    "command_limits": (["1", "0.3", "1"], (1.0, 0.3, 1.0)),
    "terrain_proportions": (["random=0.5", "steps=0.5"], (("random", 0.5), ("steps", 0.5))),
    "history": (["25"], 25),
    "rnn_hidden": (["32"], 32),
    "critic_warmup": (["10"], 10),
}
"""A value for each field whose flag is not a switch or a single number."""


def test_generated_flags_keep_the_hand_written_names_and_defaults() -> None:
    """Every field has its old flag with help; no flag gives the dataclass defaults; each flag alone
    sets its field, and only it."""
    assert {f: flag_name(f, RECIPE_FLAGS[f]) for f in RECIPE_FLAGS} == FLAG_OF_FIELD
    assert all(RECIPE_FLAGS[f].help for f in RECIPE_FLAGS)
    base = ["train", "go1", "--out", "o"]
    assert RecipeOptions(**given_fields(PARSER.parse_args(base), RECIPE_FLAGS)) == RecipeOptions()
    hints = get_type_hints(RecipeOptions)
    for f in fields(RecipeOptions):
        switch = hints[f.name] is bool
        values, want = SAMPLES.get(f.name, ([], True) if switch else (["0.25"], 0.25))
        args = PARSER.parse_args([*base, FLAG_OF_FIELD[f.name], *values])
        assert given_fields(args, RECIPE_FLAGS) == {f.name: want}, f.name


# ------------------------------------------------------------------------------------- driving


def test_demo_recipe_is_what_make_demo_trains(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``train drive --recipe demo`` gives the very ``TrainArgs`` the demo job trains with."""
    _capture(monkeypatch, demo, "train")
    with pytest.raises(JobStartedError) as made:
        demo.demo(demo.DemoArgs(out=tmp_path))
    _capture(monkeypatch, drive, "train")
    with pytest.raises(JobStartedError) as run:
        cli.main(["train", "drive", "--recipe", "demo", "--out", str(tmp_path / "train")])
    assert run.value.job_args == made.value.job_args


def test_drive_flags_replace_recipe_values(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _capture(monkeypatch, drive, "train")
    with pytest.raises(JobStartedError) as run:
        cli.main(["train", "drive", "--recipe", "demo", "--iterations", "3", "--out", str(tmp_path / "d")])
    assert run.value.job_args == replace(DRIVE_RECIPES["demo"].args, iterations=3, out=tmp_path / "d")
    scenes = tmp_path / "scenes"
    scenes.mkdir()
    argv = ["train", "drive", "--recipe", "real-format", "--out", str(tmp_path / "w")]
    with pytest.raises(JobStartedError) as run:
        cli.main([*argv, "--scenes", str(scenes), "--worlds", "4"])
    want = replace(DRIVE_RECIPES["real-format"].args, scenes_dir=scenes, worlds=4, out=tmp_path / "w")
    assert run.value.job_args == want and want.agents == "auto" and want.scene_split == "train"


def test_real_format_recipe_needs_scenes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["train", "drive", "--recipe", "real-format", "--out", str(tmp_path / "w")]) == 2
    assert "give --scenes DIR" in capsys.readouterr().err


CHAIN_ARGV = ["--threads", "1", "train", "go1", "--recipe", "whole-body", "--iterations", "1", "--envs", "4"]


@pytest.fixture(scope="module")
def wb_chain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole-body chain at one iteration per stage on 4 robots."""
    out = tmp_path_factory.mktemp("chain") / "wb"
    assert cli.main([*CHAIN_ARGV, "--out", str(out)]) == 0
    return out


@pytest.mark.slow
def test_whole_body_chain_runs_each_stage_from_the_one_before(wb_chain: Path) -> None:
    """One iteration per stage on 4 robots: stage 2 starts from stage 1's actor alone (as the shipped
    chain started from the exported go1_robust.pt), stage 3 from stage 2's training checkpoint, and
    the last stage trains the shipped policy's task (the robot count aside)."""
    out = wb_chain
    folders = chain.stage_folders(out, GO1_RECIPES["whole-body"])
    assert [f.name for f in folders] == ["1-velocity", "2-whole-body", "3-pure-turn"]
    specs = [json.loads((f / "config.json").read_text()) for f in folders]
    assert specs[1]["init_from"] == str(folders[0] / "actor.pt")
    assert specs[2]["init_from"] == str(folders[1] / "checkpoints" / "model_1.pt")
    assert "critic_state_dict" not in load_checkpoint(folders[0] / "actor.pt")
    last = load_go1_policy(folders[2] / "checkpoints" / "model_1.pt")
    assert last.task_cfg == replace(load_go1_policy(SHIPPED_POLICY).task_cfg, num_envs=4)
    assert json.loads((out / "recipe.json").read_text())["name"] == "whole-body"


@pytest.mark.slow
def test_a_chain_goes_on_from_a_committed_stage_checkpoint(
    wb_chain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """How a later session goes on (``stages/README.md``): stage 2's stage checkpoint, given to a
    fresh ``--out`` with ``--from-stage whole-body --stage-checkpoint FILE``, becomes that stage's
    start; at its last iteration it trains nothing, its ``model_1.pt`` is the stage file, and stage
    3 trains from that. The same command again resumes from the folder's own checkpoints."""
    recipe = GO1_RECIPES["whole-body"]
    done = chain.stage_folders(wb_chain, recipe)
    stage_file = tmp_path / "2-whole-body.pt"
    write_stage_checkpoint(done[1] / "checkpoints" / "latest.pt", stage_file)
    out = tmp_path / "again"
    argv = [*CHAIN_ARGV, "--out", str(out), "--from-stage", "whole-body"]
    # another stage's file is refused by the resume check and leaves the folder empty
    write_stage_checkpoint(done[2] / "checkpoints" / "latest.pt", tmp_path / "3-pure-turn.pt")
    assert cli.main([*argv, "--stage-checkpoint", str(tmp_path / "3-pure-turn.pt")]) != 0
    assert "cannot resume" in capsys.readouterr().err
    assert not (out / "2-whole-body" / "checkpoints" / "latest.pt").exists()
    # the stage's start lived in the other run's folder (another session's): it need not exist now
    start = done[0] / "actor.pt"
    start.rename(tmp_path / "moved.pt")
    try:
        assert cli.main([*argv, "--stage-checkpoint", str(stage_file)]) == 0
    finally:
        (tmp_path / "moved.pt").rename(start)
    err = capsys.readouterr().err
    assert f"2-whole-body resumes from {stage_file} (iteration 1)" in err
    assert f"stage 2/3 whole-body, 1 iterations resumed from {stage_file} (started from" in err
    folders = chain.stage_folders(out, recipe)
    assert not folders[0].exists()
    second = load_checkpoint(folders[1] / "checkpoints" / "model_1.pt")
    assert second["stage_checkpoint"] and second["iteration"] == 1
    third = json.loads((folders[2] / "config.json").read_text())
    assert third["init_from"] == str(folders[1] / "checkpoints" / "model_1.pt")
    assert load_checkpoint(folders[2] / "checkpoints" / "latest.pt")["iteration"] == 1
    assert json.loads((out / "recipe.json").read_text())["stage_checkpoint"] == str(stage_file)
    assert cli.main([*argv, "--stage-checkpoint", str(stage_file)]) == 0
    assert "already holds checkpoints: resuming from them" in capsys.readouterr().err
    # a training checkpoint is not a stage file; --init-from beside it, or no --from-stage, is refused
    full = done[1] / "checkpoints" / "latest.pt"
    assert cli.main([*argv, "--stage-checkpoint", str(full), "--out", str(tmp_path / "x")]) != 0
    assert "not a stage checkpoint" in capsys.readouterr().err
    assert cli.main([*argv, "--stage-checkpoint", str(stage_file), "--init-from", str(full)]) == 2
    assert "give no --init-from" in capsys.readouterr().err
    assert cli.main([*CHAIN_ARGV, "--out", str(out), "--stage-checkpoint", str(stage_file)]) == 2
    assert "resumes the --from-stage stage" in capsys.readouterr().err


def test_the_parser_reads_recipes_without_the_go1_stack() -> None:
    """``cli.go1`` imports ``go1.options`` and ``go1.recipes`` to build its flags and list recipes:
    they must import no Go1 module but each other (``scenefactory --help`` loads no MuJoCo model
    or rsl-rl for them)."""
    import ast

    import scenefactory.go1.options as options_module
    import scenefactory.go1.recipes as recipes_module

    allowed = {"__future__", "enum", "dataclasses", "pathlib", "typing", "scenefactory.errors"}
    allowed |= {"scenefactory.go1.options"}
    for module in (options_module, recipes_module):
        tree = ast.parse(Path(str(module.__file__)).read_text())
        names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert names <= allowed, (module.__name__, names - allowed)
