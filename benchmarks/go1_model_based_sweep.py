"""Tuning sweep of the model-based trot baseline (``go1.model_based``): each variant of
:class:`~scenefactory.go1.model_based.TrotConfig` through the evaluation's tracking table on flat
ground → ``benchmarks/results/go1_model_based_sweep.json`` (falls and errors per command, and in all).

Each variant is a JSON object of fields that replace the defaults (``{}``: the defaults). The
defaults were chosen this way: first on the nominal world (``--fixed-episodes``), then in the
evaluation's varied worlds (the default), a few seeds each; single runs of a few episodes are noisy
(± 2 falls in 48 episodes), so compare variants on the same seed and keep what wins repeatedly.

Usage: ``.venv/bin/python benchmarks/go1_model_based_sweep.py --episodes 8 '{}' '{"raibert_gain_s": 0.15}'``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from scenefactory.go1 import evaluation as ev
from scenefactory.go1.config import Go1TaskConfig
from scenefactory.go1.model_based import ModelBasedController, TrotConfig
from scenefactory.io import write_json

OUT = Path(__file__).parent / "results" / "go1_model_based_sweep.json"
ROW_KEYS = ("command", "falls", "lin_vel_error_mps", "yaw_rate_error_radps", "achieved_vx_mps")


def run_variant(overrides: dict[str, Any], cfg: ev.EvalConfig, seed: int) -> dict[str, Any]:
    """The tracking table of one variant, summed up."""
    task = Go1TaskConfig()
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    trot = TrotConfig(**fields)
    t0 = time.perf_counter()
    rows = ev.tracking_table(task, ModelBasedController(task, trot), cfg, seed)
    walked = [r for r in rows if r["falls"] < r["episodes"]]
    return {
        "overrides": overrides,
        "falls": sum(r["falls"] for r in rows),
        "episodes": sum(r["episodes"] for r in rows),
        "mean_lin_vel_error_mps": sum(r["lin_vel_error_mps"] for r in walked) / max(1, len(walked)),
        "mean_yaw_rate_error_radps": sum(r["yaw_rate_error_radps"] for r in walked) / max(1, len(walked)),
        "rows": [{k: r[k] for k in ROW_KEYS} for r in rows],
        "wall_s": time.perf_counter() - t0,
    }


def main() -> None:
    """Parse the variants, run each, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="*", default=["{}"], help="JSON objects of TrotConfig fields")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fixed-episodes", action="store_true", help="the nominal world, exact commands")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = ev.EvalConfig(episodes=args.episodes, episode_s=args.seconds, fixed_episodes=args.fixed_episodes)
    results = []
    for text in args.variants:
        res = run_variant(json.loads(text), cfg, args.seed)
        print(
            f"{text}: falls {res['falls']}/{res['episodes']}, lin {res['mean_lin_vel_error_mps']:.3f} m/s, "
            f"yaw {res['mean_yaw_rate_error_radps']:.3f} rad/s ({res['wall_s']:.0f} s)",
            flush=True,
        )
        results.append(res)
    write_json(
        args.out,
        {"episodes": args.episodes, "seconds": args.seconds, "seed": args.seed, "variants": results},
    )


if __name__ == "__main__":
    main()
