"""Named Go1 training recipes: one explicit registry, :data:`GO1_RECIPES`, from a name to a
:class:`Go1Recipe`, the typed stages (:class:`Go1Stage`, each a
:class:`~scenefactory.go1.options.RecipeOptions` and an iteration count) of a chain of PPO runs
with where each stage starts. ``scenefactory train go1 --recipe NAME --out DIR`` runs them one
after another into ``DIR/<k>-<stage>`` (``go1.chain.train_recipe``); ``--from-stage STAGE
--init-from CKPT`` starts the chain at a later stage from a checkpoint of one's own.

Each recipe is the command (or chain of commands) that gave the figures its docstring names,
written from the project's run log; a chain encodes the checkpoint each stage started from
(:class:`Start`) and the iteration it was taken at (a stage "stopped at 600" of ``--iterations
800`` is 600 iterations here: the iteration count only decides where PPO stops, the adaptive
learning rate and the curricula do not read it). Figures were measured with the code of their
date; a rerun of the chain on today's code is a reproduction of the recipe, not of the weights.

This module loads no Go1 stack (only ``go1.options``): the CLI lists the recipes without MuJoCo.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from scenefactory.errors import UserError
from scenefactory.go1.options import RecipeOptions


class Start(enum.Enum):
    """Where a stage's weights start."""

    FRESH = "fresh"
    """New networks (the first stage of every recipe)."""
    ACTOR = "actor"
    """The previous stage's final actor alone, as ``export go1`` writes it into ``policy.pt``
    (``go1.jobs.save_actor_only``): critic and optimizer start fresh, so the stage needs
    ``critic_warmup``. The shipped chains started their second stage from such a file."""
    CHECKPOINT = "checkpoint"
    """The previous stage's final training checkpoint: actor, critic, normalizers, optimizer,
    curriculum and, on the same terrain tiles, the robots' terrain levels."""


@dataclass(frozen=True)
class Go1Stage:
    """One PPO run of a chain: ``options`` for ``iterations`` iterations, starting as ``start``
    says; ``name`` names its folder, ``command`` is the run-log command it replaces."""

    name: str
    options: RecipeOptions
    iterations: int
    start: Start = Start.FRESH
    command: str = ""

    def __post_init__(self) -> None:
        """A stage's start is ``start``, never a path of its own (the chain gives it)."""
        if self.iterations < 1:
            raise ValueError(f"stage {self.name}: iterations must be positive, got {self.iterations}")
        if self.options.init_from is not None or self.options.teacher is not None:
            raise ValueError(f"stage {self.name}: init_from/teacher come from the chain (start), not options")


@dataclass(frozen=True)
class Go1Recipe:
    """A named chain of :class:`Go1Stage` s on ``envs`` robots with ``seed``; ``summary`` is its
    one line in ``--list-recipes``; ``result`` the figures it gave and where they come from;
    ``train_time`` what it cost on the project's 2-core machine."""

    name: str
    summary: str
    stages: tuple[Go1Stage, ...]
    result: str
    train_time: str
    envs: int = 1024
    seed: int = 0

    def __post_init__(self) -> None:
        """The first stage starts fresh, every later one from the stage before; names unique."""
        if not self.stages or self.stages[0].start is not Start.FRESH:
            raise ValueError(f"recipe {self.name}: the first stage must start fresh")
        if any(s.start is Start.FRESH for s in self.stages[1:]):
            raise ValueError(f"recipe {self.name}: a later stage must start from the stage before")
        if len({s.name for s in self.stages}) != len(self.stages):
            raise ValueError(f"recipe {self.name}: stage names repeat")


# ------------------------------------------------------------------------------- the stages

VELOCITY_STAGE = Go1Stage(
    "velocity",
    RecipeOptions(),
    1000,
    command="scenefactory train go1 --iterations 1000 --out runs/go1_robust",
)
"""go1_robust: velocity commands on flat ground, the base recipe's defaults."""

_STAIRS_UP_4 = (
    ("random", 0.2),
    ("slope_up", 0.1),
    ("slope_down", 0.1),
    ("stairs_up", 0.4),
    ("stairs_down", 0.1),
    ("steps", 0.1),
)
"""Four of the ten terrain columns stairs up (run 13 on)."""

RUN14 = RecipeOptions(
    terrain="rough",
    command_limits=(1.0, 1.0, 1.0),
    heading_prob=1.0,
    history=25,
    critic_warmup=30,
    reward_weights=(("orientation", 0.0), ("foot_clearance", -60.0)),
    terrain_proportions=_STAIRS_UP_4,
)
"""Run 14: memory (25 frames) and heading commands on rough terrain, from the flat policy."""
RUN19 = replace(RUN14, critic_warmup=10, forward_only=True)
"""Run 19: forward commands only."""
RUN24 = replace(RUN19, reward_weights=(*RUN19.reward_weights, ("track_lin_vel_xy", 3.0)))
"""Run 24: twice the linear tracking weight, so that stopping at a riser costs more."""
RUN28 = replace(RUN24, init_action_std=0.3)
"""Run 28: the action noise restarted at 0.3."""
RUN30 = replace(RUN28, entropy_coef=0.003)
"""Run 30: a lower entropy bonus (the blind targets met at its iteration 325)."""
RUN26 = replace(RUN24, foot_clearance_target_m=0.12, height_scan_actor=True)
"""Run 26: run 24 with a 12 cm swing target and the height scan in the actor."""
RUN29 = replace(RUN26, init_action_std=0.3)
RUN31 = replace(RUN29, entropy_coef=0.003)
RUN32 = replace(RUN31, reward_weights=(*RUN31.reward_weights, ("leg_contacts", -1.0)))
"""Run 32: a penalty on thighs and calves on the ground."""
RUN34 = replace(RUN32, init_action_std=0.2, entropy_coef=0.001)
RUN35 = replace(RUN34, command_limits=(1.0, 0.3, 1.0))
"""Run 35: sideways commands to ±0.3 m/s."""
RUN38 = replace(RUN35, command_limits=(1.2, 0.3, 1.0), min_forward_mps=0.5)
"""Run 38: forward commands U(0.5, 1.2) m/s (15 cm stairs 0.92 / 0.875 at its iteration 250)."""

_TERRAIN = (
    "train go1 --terrain rough --command-limits 1 1 1 --heading-prob 1 --history 25 --critic-warmup 10 "
    "--reward-weight orientation=0 --terrain-proportions random=0.2 slope_up=0.1 slope_down=0.1 "
    "stairs_up=0.4 stairs_down=0.1 steps=0.1 --iterations 1000 --seed 0 --forward-only"
)
"""The shape of the terrain stages' commands from run 24 on (run log), before their own flags."""
_REWARDS = "--reward-weight foot_clearance=-60 --reward-weight track_lin_vel_xy=3"


def _run(n: int, options: RecipeOptions, iterations: int, start: Start, command: str) -> Go1Stage:
    """Stage ``run<n>``: ``command`` is the run log's full command where it gives one (a test parses
    it and compares), else how the log describes it (what it changed on the run before)."""
    return Go1Stage(f"run{n}", options, iterations, start, command)


_RUN14 = _run(
    14,
    RUN14,
    850,
    Start.ACTOR,
    "scenefactory --threads 2 train go1 --terrain rough --command-limits 1 1 1 --heading-prob 1 "
    "--history 25 --init-from runs/go1_robust.pt --critic-warmup 30 --reward-weight orientation=0 "
    "--reward-weight foot_clearance=-60 --terrain-proportions random=0.2 slope_up=0.1 slope_down=0.1 "
    "stairs_up=0.4 stairs_down=0.1 steps=0.1 --iterations 1500 --seed 0 --out runs/go1_terrain_one",
)
_RUN19 = _run(
    19, RUN19, 200, Start.CHECKPOINT, "run 14's command with --critic-warmup 10 --forward-only (from its 850)"
)
_RUN24 = _run(
    24,
    RUN24,
    425,
    Start.CHECKPOINT,
    f"scenefactory --threads 1 {_TERRAIN} {_REWARDS} --init-from "
    "runs/go1_terrain_fwd/checkpoints/model_200.pt --out runs/go1_terrain_lin3",
)
_SCAN = "--height-scan-actor --foot-clearance-target 0.12 --reward-weight leg_contacts=-1"

# ------------------------------------------------------------------------------- the recipes

VELOCITY = Go1Recipe(
    name="velocity",
    summary="velocity commands on flat ground (go1_robust, the shipped policy until 2026-12-02)",
    stages=(VELOCITY_STAGE,),
    result=(
        "eval go1 --fixed-episodes --episodes 256 --seed 0 (nominal robot): 2.0 m/s tracked within "
        "0.107 m/s, turning in place at +-1.8 rad/s within 0.035 / 0.052 rad/s, 0 falls in 2,816 "
        "episodes, 1.5 m/s pushes recovered 0.984 [0.961, 0.994] (run log, 'Results' of the Go1 "
        "section of README.md at commit 714c17a)"
    ),
    train_time="86 min (--threads 1, beside another run); about 45 min alone on 2 cores",
)

WHOLE_BODY = Go1Recipe(
    name="whole-body",
    summary="velocity, then body height/pitch/roll commands, then in-place turns: the shipped "
    "go1_whole_body.pt",
    stages=(
        VELOCITY_STAGE,
        Go1Stage(
            "whole-body",
            RecipeOptions(whole_body=True, critic_warmup=30),
            600,
            Start.ACTOR,
            "scenefactory --threads 2 train go1 --whole-body --init-from go1_robust.pt "
            "--critic-warmup 30 --iterations 800 --out runs/go1_whole_body",
        ),
        Go1Stage(
            "pure-turn",
            RecipeOptions(whole_body=True, pure_turn_prob=0.2),
            150,
            Start.CHECKPOINT,
            "scenefactory --threads 2 train go1 --whole-body --init-from "
            "runs/go1_whole_body/checkpoints/model_600.pt --pure-turn-prob 0.2 --iterations 150 "
            "--out runs/go1_wb_pt",
        ),
    ),
    result=(
        "the shipped src/scenefactory/go1/policies/go1_whole_body.pt (its stored task_cfg and "
        "ppo_cfg are this recipe's last stage, tests/go1/test_recipes.py): deploy go1 passes; eval go1 "
        "--episodes 32 --seed 0: 2.0 m/s within 0.162 m/s, +-1.8 rad/s within 0.070 / 0.056, "
        "whole-body errors at most 0.005 m / 0.035 rad / 0.024 rad, 1.5 m/s pushes 0.980 "
        "[0.955, 0.992] (256 episodes) ('The shipped policy', README.md at commit 714c17a)"
    ),
    train_time="86 min + 600 iterations (about 25 min per 300 on two threads) + 12 min (stages "
    "1-3, on one or two threads, mostly beside other jobs)",
)

ROUGH = Go1Recipe(
    name="rough",
    summary="blind rough terrain (no height scan in the actor): the chain that met the blind "
    "terrain targets (run 30); the shipped go1_rough.pt",
    stages=(
        VELOCITY_STAGE,
        _RUN14,
        _RUN19,
        _RUN24,
        _run(
            28,
            RUN28,
            175,
            Start.CHECKPOINT,
            f"scenefactory --threads 1 {_TERRAIN} {_REWARDS} --action-std 0.3 --init-from "
            "runs/go1_terrain_lin3/checkpoints/model_425.pt --out runs/go1_terrain_std03",
        ),
        _run(
            30,
            RUN30,
            325,
            Start.CHECKPOINT,
            f"scenefactory --threads 1 {_TERRAIN} {_REWARDS} --action-std 0.3 --entropy-coef 0.003 "
            "--init-from runs/go1_terrain_std03/checkpoints/model_175.pt --out runs/go1_terrain_ent003",
        ),
    ),
    result=(
        "the shipped src/scenefactory/go1/policies/go1_rough.pt (this chain remade on the code of "
        "2026-12-07, float16-packed; tests/go1/test_recipes.py): eval go1 --checkpoint rough --tables "
        "terrain --terrain rough --level 3 4 5 7 --episodes 128 --seed 0, success at 0.5 / 1.0 m/s: "
        "10 cm stairs up 0.930 / 0.906, +-5 cm ground 1.000 / 0.992, 20 deg slopes up and down "
        "1.000 / 1.000 (benchmarks/results/go1_rough_eval.json; the first run 30: 0.969 / 0.961, "
        "1.000 / 0.992, 1.000 / 0.969 and 1.000 / 0.992, README.md at commit 714c17a)"
    ),
    train_time="86 min flat + 268 min of terrain stages on two threads (1,975 iterations; the "
    "remake's history.json sums; the first chain 300 min), about 6 h",
)

ROUGH_SCAN = Go1Recipe(
    name="rough-scan",
    summary="rough terrain with the height scan in the actor: the chain that climbed 15 cm stairs in "
    "92 % / 88 % of tries (run 38)",
    stages=(
        VELOCITY_STAGE,
        _RUN14,
        _RUN19,
        _RUN24,
        _run(
            26,
            RUN26,
            250,
            Start.CHECKPOINT,
            "run 24's command with --foot-clearance-target 0.12 --height-scan-actor (from its 425)",
        ),
        _run(29, RUN29, 250, Start.CHECKPOINT, "run 26's command with --action-std 0.3 (from its 250)"),
        _run(31, RUN31, 325, Start.CHECKPOINT, "run 29's command with --entropy-coef 0.003 (from its 250)"),
        _run(
            32,
            RUN32,
            600,
            Start.CHECKPOINT,
            f"scenefactory --threads 2 {_TERRAIN} {_REWARDS} --action-std 0.3 --entropy-coef 0.003 "
            f"{_SCAN} --init-from runs/go1_terrain_scanent003/checkpoints/model_325.pt "
            "--out runs/go1_terrain_scanlegs",
        ),
        _run(
            34,
            RUN34,
            175,
            Start.CHECKPOINT,
            "run 32's command with --action-std 0.2 --entropy-coef 0.001 (from its 600)",
        ),
        _run(
            35,
            RUN35,
            250,
            Start.CHECKPOINT,
            f"scenefactory --threads 2 {_TERRAIN.replace('1 1 1', '1 0.3 1')} {_REWARDS} --action-std 0.2 "
            f"--entropy-coef 0.001 {_SCAN} --init-from runs/go1_terrain_scanstd02/checkpoints/model_175.pt "
            "--out runs/go1_terrain_scanvy03",
        ),
        _run(
            38,
            RUN38,
            250,
            Start.CHECKPOINT,
            f"scenefactory --threads 1 {_TERRAIN.replace('1 1 1', '1.2 0.3 1')} --min-forward-speed 0.5 "
            f"{_REWARDS} --action-std 0.2 --entropy-coef 0.001 {_SCAN} --init-from "
            "runs/go1_terrain_scanvy03/checkpoints/model_250.pt --out runs/go1_terrain_vmax12",
        ),
    ),
    result=(
        "eval go1 --tables terrain --terrain stairs_up --level 4 5 --episodes 128 --seed 0 on run "
        "38's iteration 250: 15 cm stairs up 0.922 / 0.875 at 0.5 / 1.0 m/s, 12.5 cm 0.969 / "
        "0.906 (README.md at commit 714c17a; the 1 m/s target of 0.90 not met; the chain's "
        "checkpoints were lost, run 40's one command from go1_robust reached 0.664 / 0.500)"
    ),
    train_time="3,575 terrain iterations at about 6.0 s each on 2 idle cores (bench go1 --scan): "
    "about 6 h, plus the 86 min flat stage",
)

"""The shipped policy's three stages; the second was started for 800 iterations and stopped at 600,
whose checkpoint the third fine-tuned: 600 here."""

GO1_RECIPES: dict[str, Go1Recipe] = {
    "velocity": VELOCITY,
    "whole-body": WHOLE_BODY,
    "rough": ROUGH,
    "rough-scan": ROUGH_SCAN,
}
"""Name → recipe: ``train go1 --recipe NAME``."""


def go1_recipe(name: str) -> Go1Recipe:
    """The recipe called ``name``; a :class:`UserError` lists the names otherwise."""
    if name not in GO1_RECIPES:
        raise UserError(f"--recipe {name}: no such Go1 recipe, expected one of {', '.join(GO1_RECIPES)}")
    return GO1_RECIPES[name]


def listing() -> str:
    """One line per recipe: name, stages and iterations, summary (``--list-recipes``)."""
    width = max(map(len, GO1_RECIPES))
    lines = []
    for name, r in GO1_RECIPES.items():
        its = "+".join(str(s.iterations) for s in r.stages)
        stages = f"{len(r.stages)} stage{'s' if len(r.stages) > 1 else ''}, {its} iterations"
        lines.append(f"{name:<{width}}  {r.summary} [{stages}]")
    return "\n".join(lines)


def stage_index(recipe: Go1Recipe, name: str) -> int:
    """The index of ``recipe``'s stage called ``name``; a :class:`UserError` lists them otherwise."""
    names = [s.name for s in recipe.stages]
    if name not in names:
        raise UserError(f"--from-stage {name}: --recipe {recipe.name} has the stages {', '.join(names)}")
    return names.index(name)


def check_start(recipe: Go1Recipe, first: int, init_from: Path | None) -> None:
    """A chain started at stage ``first`` (``--from-stage``) needs ``init_from`` exactly when that
    stage does not start fresh, and the file must exist; :class:`UserError` otherwise."""
    stage = recipe.stages[first]
    if (stage.start is Start.FRESH) != (init_from is None):
        want = "starts fresh: give no --init-from" if init_from is not None else "needs --init-from CKPT"
        raise UserError(f"--from-stage {stage.name} of --recipe {recipe.name} {want}")
    if init_from is not None and not init_from.is_file():
        raise UserError(f"--init-from {init_from}: checkpoint not found")


OPTION_NAMES = frozenset(f.name for f in fields(RecipeOptions))


def overridden(
    recipe: Go1Recipe,
    options: dict[str, Any],
    envs: int | None = None,
    seed: int | None = None,
    iterations: int | None = None,
) -> Go1Recipe:
    """``recipe`` with flags given on the command line: ``options`` (fields of
    :class:`RecipeOptions`) replace those fields in every stage (``--no-robustness`` on
    ``whole-body`` is the same-recipe ablation the run log reports), ``iterations`` every stage's
    count (a smoke test of the chain), ``envs`` and ``seed`` the run's. A stage's start comes from
    the chain, so ``init_from`` and ``teacher`` are refused."""
    if unknown := set(options) - OPTION_NAMES:
        raise ValueError(f"not RecipeOptions fields: {sorted(unknown)}")
    for key, flag in (("init_from", "--init-from"), ("teacher", "--teacher")):
        if options.get(key) is not None:
            chain = " -> ".join(s.name for s in recipe.stages)
            raise UserError(
                f"{flag} with --recipe {recipe.name}: a recipe's stages start fresh or from the stage "
                f"before ({chain}); to start a later stage from your own checkpoint give --from-stage "
                "STAGE --init-from CKPT"
            )
    stages = tuple(
        replace(s, options=replace(s.options, **options), iterations=iterations or s.iterations)
        for s in recipe.stages
    )
    return replace(
        recipe,
        stages=stages,
        envs=recipe.envs if envs is None else envs,
        seed=recipe.seed if seed is None else seed,
    )
