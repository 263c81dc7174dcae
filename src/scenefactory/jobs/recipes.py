"""Named driving recipes: one explicit registry, :data:`DRIVE_RECIPES`, from a name to a
:class:`DriveRecipe`, whose ``args`` are the :class:`~scenefactory.jobs.drive.TrainArgs` of the
run it names. ``scenefactory train drive --recipe NAME --out DIR`` trains them; flags given beside
it replace those fields. The Go1 recipes are ``scenefactory.go1.recipes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.jobs.demo import DEMO_ITERATIONS
from scenefactory.jobs.drive import TRAIN_SCENES, TrainArgs


@dataclass(frozen=True)
class DriveRecipe:
    """A named ``train drive`` run: ``args`` (their ``out`` is the folder the recorded command
    wrote; ``--out`` replaces it), ``summary`` (one line of ``--list-recipes``), ``command`` (the
    command it replaces), ``result`` (what it gave, and where that comes from), ``train_time`` (on
    the project's 2-core machine). ``needs_scenes``: ``--scenes DIR`` must be given (a folder
    written by ``convert``: the repository holds no driving logs). The engine, device and seed are
    the command line's (``--engine``, ``--device``, ``--seed``): a recipe keeps their defaults."""

    name: str
    summary: str
    args: TrainArgs
    command: str
    result: str
    train_time: str
    needs_scenes: bool = False

    def __post_init__(self) -> None:
        """The engine, device and seed are left to the flags (their defaults here)."""
        default = TrainArgs(out=self.args.out)
        for key in ("engine", "device", "seed"):
            if getattr(self.args, key) != getattr(default, key):
                raise ValueError(f"recipe {self.name}: {key} is the command line's, leave it at its default")


DEMO = DriveRecipe(
    name="demo",
    summary="what 'make demo' trains: 128 worlds x 8 agents, 120 procedural scenes, kinematic, "
    "200 iterations",
    args=TrainArgs(
        out=Path("runs/demo/train"),
        engine=EngineSpec("kinematic"),
        worlds=128,
        agents=8,
        iterations=DEMO_ITERATIONS,
        seed=0,
        num_train_scenes=TRAIN_SCENES,
    ),
    command="make demo (scenefactory demo: jobs.demo trains with these arguments, then evaluates "
    "and renders)",
    result=(
        "120 held-out procedural scenes (960 agent-episodes): goal reach 0.973 [0.961, 0.981], "
        "collision 0.021 [0.014, 0.032], off-road 0.006 (runs/demo/metrics.json of make demo at "
        "a3f74bb and 10801e1, seed 0; README.md at commit 714c17a)"
    ),
    train_time="5 min 49 s for the whole demo on a quiet 2-core machine (200 iterations, 6.55 M agent steps)",
)

REAL_FORMAT = DriveRecipe(
    name="real-format",
    summary="scenes converted from real-format WOMD shards (--scenes DIR, its train split), agents "
    "per world chosen from them, worlds reset at half their agents",
    args=TrainArgs(
        out=Path("runs/womd"),
        agents="auto",
        min_active_fraction=0.5,
        num_train_scenes=0,
        iterations=200,
        scene_split="train",
    ),
    command=(
        "scenefactory train drive --scenes scenes/json --scene-split train --agents auto "
        "--min-active-fraction 0.5 --train-scenes 0 --iterations 200 --out runs/womd"
    ),
    result=(
        "no policy figures recorded (the repository holds no Waymo data); --agents auto with "
        "--min-active-fraction 0.5 gave the highest active slot fraction on 200 scenes of 3-32 "
        "moving vehicles, 0.663 under an untrained policy (bench drive, README.md at commit 714c17a)"
    ),
    train_time="depends on the scenes: 10,000 synthetic scenes at 256 worlds took 11.8 min to load, "
    "then 4.8 s per iteration (benchmarks/results/scene_loading.json)",
    needs_scenes=True,
)

DRIVE_RECIPES: dict[str, DriveRecipe] = {"demo": DEMO, "real-format": REAL_FORMAT}
"""Name → recipe: ``train drive --recipe NAME``."""


def drive_recipe(name: str) -> DriveRecipe:
    """The recipe called ``name``; a :class:`UserError` lists the names otherwise."""
    if name not in DRIVE_RECIPES:
        raise UserError(
            f"--recipe {name}: no such driving recipe, expected one of {', '.join(DRIVE_RECIPES)}"
        )
    return DRIVE_RECIPES[name]


def listing() -> str:
    """One line per recipe (``train drive --list-recipes``)."""
    width = max(map(len, DRIVE_RECIPES))
    return "\n".join(f"{name:<{width}}  {r.summary}" for name, r in DRIVE_RECIPES.items())
