"""The job behind ``train go1 --recipe NAME``: a named recipe's stages (``go1.recipes``) trained one
after another, each ``go1.jobs.train`` run starting from the stage before."""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from scenefactory.checkpoint import LATEST, load_checkpoint
from scenefactory.engines.mjwarp import PhysicsBackend
from scenefactory.errors import CheckpointError, UserError
from scenefactory.go1.jobs import Go1TrainArgs, save_actor_only, train
from scenefactory.go1.recipes import Go1Recipe, Start, check_start
from scenefactory.io import atomic_write_bytes, write_json
from scenefactory.rl.checkpoints import resume_path
from scenefactory.rl.distributed import ranks_from_environ


@dataclass(frozen=True, kw_only=True)
class Go1RecipeArgs:
    """Arguments of ``train go1 --recipe NAME``: the ``recipe`` (flags given beside it already
    applied, ``go1.recipes.overridden``), its stages trained into ``out/<k>-<stage>`` on ``physics``."""

    out: Path
    recipe: Go1Recipe
    physics: PhysicsBackend = field(default_factory=PhysicsBackend)
    first_stage: int = 0
    """Start the chain at this stage (``--from-stage``): the ones before are skipped."""
    init_from: Path | None = None
    """With ``first_stage``: the checkpoint that stage starts from in place of the stage before's
    (a training checkpoint, or a policy file; only its actor is read where the stage starts from
    the previous actor alone)."""
    stage_checkpoint: Path | None = None
    """With ``first_stage``, in place of ``init_from``: a committed stage checkpoint of that stage
    (``rl.checkpoints.write_stage_checkpoint``, ``stages/README.md``) which the stage resumes from
    (copied to its ``latest.pt`` when its folder holds no checkpoint yet)."""


def stage_folders(out: Path, recipe: Go1Recipe) -> list[Path]:
    """Where each stage of ``recipe`` trains: ``out/1-velocity``, ``out/2-whole-body``, ..."""
    return [out / f"{k}-{s.name}" for k, s in enumerate(recipe.stages, 1)]


def _recipe_json(recipe: Go1Recipe) -> dict[str, Any]:
    stages = [
        {
            "name": s.name,
            "iterations": s.iterations,
            "start": s.start.value,
            "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(s.options).items()},
            "command": s.command,
        }
        for s in recipe.stages
    ]
    return {"name": recipe.name, "envs": recipe.envs, "seed": recipe.seed, "stages": stages}


def train_recipe(args: Go1RecipeArgs) -> Path:
    """Train the stages of a named recipe one after another, each from the one before as its
    :class:`~scenefactory.go1.recipes.Start` says (the previous stage's ``model_<N>.pt``, or its
    actor alone written beside it as ``actor.pt``), from ``first_stage`` on (that one from
    ``init_from``); writes ``out/recipe.json``; returns the last stage's final checkpoint.
    Rerunning the command resumes: a finished stage trains nothing."""
    recipe, out = args.recipe, args.out
    if len(recipe.stages) > 1 and ranks_from_environ().distributed:
        raise UserError(
            f"--recipe {recipe.name} chains {len(recipe.stages)} stages in one process; under torchrun "
            "train each stage with its own command (go1.recipes lists them)"
        )
    first, last = args.first_stage, args.init_from
    folders = stage_folders(out, recipe)
    resumed_init: str | None = None
    placed: Path | None = None  # the stage file copied into the first stage's folder, if it was
    if args.stage_checkpoint is None:
        check_start(recipe, first, last)
    else:
        resumed_init, placed = _place_stage_checkpoint(args.stage_checkpoint, folders[first])
    out.mkdir(parents=True, exist_ok=True)
    record = {**_recipe_json(recipe), "first_stage": first, "init_from": None if last is None else str(last)}
    record["stage_checkpoint"] = None if args.stage_checkpoint is None else str(args.stage_checkpoint)
    write_json(out / "recipe.json", record)
    for k, (stage, folder) in enumerate(zip(recipe.stages, folders, strict=True), 1):
        if k - 1 < first:
            continue  # --from-stage: started from init_from instead
        init: Path | None = None
        if args.stage_checkpoint is not None and k - 1 == first:
            init = None if resumed_init is None else Path(resumed_init)  # the stage's own start, as saved
        elif stage.start is Start.CHECKPOINT:
            init = last
        elif stage.start is Start.ACTOR:
            assert last is not None  # Go1Recipe: only the first stage starts fresh; check_start
            actor = out / "start_actor.pt" if k - 1 == first else last.parent.parent / "actor.pt"
            init = save_actor_only(last, actor)
        start = f"from {init or 'scratch'}"
        if args.stage_checkpoint is not None and k - 1 == first:
            start = f"resumed from {args.stage_checkpoint} (started {start})"
        print(
            f"train go1 --recipe {recipe.name}: stage {k}/{len(recipe.stages)} {stage.name}, "
            f"{stage.iterations} iterations {start} -> {folder}",
            file=sys.stderr,
            flush=True,
        )
        options = replace(stage.options, init_from=init)
        job = Go1TrainArgs(
            out=folder,
            envs=recipe.envs,
            iterations=stage.iterations,
            seed=recipe.seed,
            recipe=options,
            physics=args.physics,
        )
        try:
            trainer = train(job)
        except CheckpointError:
            if placed is not None and k - 1 == first:  # not this stage's file: leave the folder as it was
                placed.unlink(missing_ok=True)
            raise
        last = trainer.ckpt_dir / f"model_{stage.iterations}.pt"
        if not last.is_file() and trainer.iteration == stage.iterations:  # resumed at its end (a stage file)
            atomic_write_bytes(last, (trainer.ckpt_dir / LATEST).read_bytes())
        if not last.is_file():
            raise UserError(
                f"--recipe {recipe.name}: stage {stage.name} ended without {last} (its folder holds "
                "another run's checkpoints?)"
            )
    assert last is not None
    return last


def _place_stage_checkpoint(path: Path, folder: Path) -> tuple[str | None, Path | None]:
    """Put the stage checkpoint ``path`` where stage ``folder`` resumes from (its ``latest.pt``),
    unless the folder already holds a checkpoint (a resumed stage: its own newer one is used, as
    printed); returns the ``init_from`` the stage's run was started with (its saved spec's), which a
    resumed run must repeat, and the file written (``None`` when none was)."""
    data = load_checkpoint(path)
    if not data.get("stage_checkpoint"):
        raise CheckpointError(
            f"--stage-checkpoint {path}: not a stage checkpoint (written by "
            "rl.checkpoints.write_stage_checkpoint; for a policy or training checkpoint use --init-from)"
        )
    spec = data.get("spec")
    init = spec.get("init_from") if isinstance(spec, dict) else None
    if init is not None and not isinstance(init, str):
        raise CheckpointError(f"--stage-checkpoint {path}: its field 'spec.init_from' is not a path")
    placed: Path | None = None
    if resume_path(folder) is None:
        placed = folder / "checkpoints" / LATEST
        atomic_write_bytes(placed, path.read_bytes())
        note = f"{folder.name} resumes from {path} (iteration {data.get('iteration')})"
    else:
        note = f"{folder} already holds checkpoints: resuming from them, not {path}"
    print(f"train go1: {note}", file=sys.stderr)
    return init, placed
