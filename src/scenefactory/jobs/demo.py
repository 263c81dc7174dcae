"""The demo: the main job on the embedded default scenes, end to end (train on procedural scenes,
evaluate on held-out ones, plot, render, and write ``report.md``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from scenefactory.evaluation.plots import plot_learning_curve
from scenefactory.io import atomic_write_text
from scenefactory.jobs.drive import (
    METRIC_KEYS,
    TRAIN_SCENES,
    EvalArgs,
    RenderArgs,
    TrainArgs,
    evaluate,
    render,
    train,
)
from scenefactory.rl.driving import Trainer
from scenefactory.rl.driving_spec import spec_to_dict

DEMO_ITERATIONS = 200
"""PPO iterations of the demo's policy unless told otherwise."""
DEMO_EVAL_SCENES = 120
"""Held-out procedural scenes the demo evaluates on unless told otherwise."""


@dataclass(frozen=True, kw_only=True)
class DemoArgs:
    """Arguments of ``scenefactory demo``: the report folder, the PPO ``iterations`` and held-out
    ``eval_scenes``, and ``signals`` (train and evaluate with traffic signals, as
    ``train drive --signals``)."""

    out: Path = Path("runs/demo")
    iterations: int = DEMO_ITERATIONS
    eval_scenes: int = DEMO_EVAL_SCENES
    signals: bool = False


def demo(args: DemoArgs) -> dict[str, Any]:
    """Train 128 worlds x 8 agents on the kinematic tier (seed 0), evaluate, render and write
    ``report.md`` into ``args.out``; returns the evaluation's metrics."""
    t0 = time.perf_counter()
    train_args = TrainArgs(
        out=args.out / "train",
        worlds=128,
        agents=8,
        iterations=args.iterations,
        seed=0,
        num_train_scenes=TRAIN_SCENES,
        signals=args.signals,
    )
    trainer = train(train_args)
    ckpt = args.out / "train" / "checkpoints" / "latest.pt"
    engine = train_args.engine
    metrics = evaluate(EvalArgs(checkpoint=ckpt, out=args.out, engine=engine, episodes=args.eval_scenes))
    # one recording of 8 held-out scenes: the GIF shows the first 4, the HTML replay all 8
    gif, html = render(
        RenderArgs(
            out=args.out / "episodes.gif", engine=engine, checkpoint=ckpt, panels=8, formats=("gif", "html")
        )
    )
    curve = args.out / "learning_curve.png"
    plot_learning_curve(trainer.history, curve, title="demo: PPO on procedural scenes (kinematic)")
    wall = time.perf_counter() - t0
    _write_report(args.out, trainer, metrics, gif, html, wall)
    return metrics


def _write_report(
    out: Path, trainer: Trainer, metrics: dict[str, Any], gif: Path, html: Path, wall: float
) -> None:
    spec = spec_to_dict(trainer.spec)

    def row(label: str, key: str) -> str:
        lo, hi = metrics[f"{key}_ci95"]
        return f"| {label} | {metrics[key]:.3f} | [{lo:.3f}, {hi:.3f}] |"

    keys: tuple[str, ...] = (*METRIC_KEYS, "mean_peak_drac_mps2", "route_progress")
    if trainer.spec.task.observations.traffic_signals:
        keys += ("red_light_violation_rate", "stop_sign_violation_rate")
    rows = "\n".join(row(k, k) for k in keys)
    task = spec["task"]
    text = f"""# scenefactory demo report

Trained PPO (rsl-rl) on {spec["num_train_scenes"]} procedural training scenes, kinematic engine,
{task["num_worlds"]} worlds × {task["agents_per_world"]} agents, {spec["iterations"]} iterations
({trainer.env_steps:,} agent steps), seed {spec["seed"]}; evaluated on {metrics["scenes"]} held-out
procedural scenes (eval seed range, disjoint from training) = {metrics["episodes"]} agent-episodes.
Total wall time {wall / 60:.1f} min on {torch.get_num_threads()} torch threads.

| metric | value | 95 % CI |
|---|---|---|
{rows}

Files: `metrics.json`, `metrics.png`, `learning_curve.png`, `{gif.name}` (top-down video),
`{html.name}` (the same episodes as a replay to open in a browser: play, scrub, zoom, click an agent),
`train/` (checkpoints, `config.json`, `history.json`, TensorBoard logs in `train/tensorboard`).
Reproduce: `scenefactory demo --out {out}`.
"""
    atomic_write_text(out / "report.md", text)
