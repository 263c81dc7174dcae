"""Size of the HTML replay (``render drive --format html``) on real-size scenes.

1. **Scenes**: ``--scenes`` (default 8) city-grid scenarios in the WOMD wire format
   (``scenes.womd.synthetic.write_corpus``, seed ``--seed``, 5,000-8,000 road points each, the
   ``WOMD_MIX`` traffic: parked and moving vehicles, pedestrians, cyclists), converted as
   ``scenefactory convert`` does.
2. **Real episodes**: the logged drivers closed loop on the kinematic tier, one world per scene, as
   ``render drive --policy expert --scenes DIR --agents auto --panels 8 --format html`` records them
   (their logs end after 8.1 s, so the episodes run about 65-80 steps): the file's size.
3. **Per step**: the same recordings cut to their first ``--short`` (default 16) steps and written
   again; the difference in size over the difference in world-steps is what a further world-step
   costs (agents, logged objects, signals; the maps are in both), and the size of ``--steps``
   (default 200) steps per world is extrapolated from it (the logs end after about 80 steps, so the
   logged drivers' episodes are never 200 steps long; a lengthened copy of them would understate
   the size, gzip finding the repeats).

Writes ``benchmarks/results/html_replay_size.json`` (``--out``): sizes, scene sizes (road points,
agents, logged objects) and the seed. The corpus is kept in ``--work`` (git-ignored) and reused.

Usage: ``.venv/bin/python benchmarks/html_replay_size.py [--scenes 8] [--steps 200] [--seed 5]``.
"""

from __future__ import annotations

import argparse
import json
import platform
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from scenefactory.cli.main import main as cli
from scenefactory.evaluation.html_replay import replay_payload, write_html_replay
from scenefactory.evaluation.human import replay_beyond
from scenefactory.evaluation.record import EpisodeRecord
from scenefactory.evaluation.rollout import EXPERT, record_episodes
from scenefactory.scenes.library import load_scene_dir
from scenefactory.scenes.womd.synthetic import WOMD_MIX, write_corpus
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.pool import road_points

ROOT = Path(__file__).resolve().parent


def _first(rec: EpisodeRecord, steps: int) -> EpisodeRecord:
    """``rec`` cut to its first ``steps`` steps."""
    idx = np.arange(min(steps, rec.num_steps))

    def take(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else np.asarray(a)[idx]

    terms = {k: np.asarray(v)[idx] for k, v in (rec.reward_terms or {}).items()}
    return replace(
        rec,
        pos_xy=rec.pos_xy[idx],
        yaw=rec.yaw[idx],
        speed=rec.speed[idx],
        status=rec.status[idx],
        ttc_s=take(rec.ttc_s),
        drac_mps2=take(rec.drac_mps2),
        reward=take(rec.reward),
        reward_terms=terms,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenes", type=int, default=8)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--short", type=int, default=16)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--work", type=Path, default=ROOT / ".cache" / "html_replay_size")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "html_replay_size.json")
    a = p.parse_args()
    torch.set_num_threads(1)
    work = a.work / f"seed{a.seed}_n{a.scenes}"
    json_dir = work / "conv" / "json"
    if not json_dir.is_dir():
        shards = write_corpus(
            work / "in", a.scenes, seed=a.seed, road_points=(5000, 8000), mix=WOMD_MIX, workers=1
        )
        assert cli(["--threads", "1", "convert", *map(str, shards), "--out", str(work / "conv")]) == 0
    scenes = load_scene_dir(json_dir, "all", a.scenes)
    k = max(sc.num_agents for sc in scenes)
    fitted = [replay_beyond(sc, k) for sc in scenes]
    recs = record_episodes(EXPERT, DrivingTaskConfig(agents_per_world=k), fitted)
    real = write_html_replay(recs, work / "real.html", title="real-size scenes, logged drivers")
    cut = [_first(r, a.short) for r in recs]
    short = write_html_replay(cut, work / f"first{a.short}.html", title="real-size scenes, logged drivers")
    payload = replay_payload(recs)

    def part(key: str) -> int:
        return sum(len(json.dumps(w[key], separators=(",", ":"))) for w in payload["worlds"])

    real_steps = sum(r.num_steps for r in recs)
    per_step = (real.stat().st_size - short.stat().st_size) / (real_steps - sum(r.num_steps for r in cut))
    estimate = real.stat().st_size + per_step * (len(recs) * a.steps - real_steps)
    result = {
        "command": "python benchmarks/html_replay_size.py "
        + f"--scenes {a.scenes} --steps {a.steps} --seed {a.seed}",
        "seed": a.seed,
        "scenes": [
            {
                "name": sc.name,
                "road_points": len(road_points(sc, 3.0)[0]),
                "agents": sc.num_agents,
                "logged_objects": 0 if sc.replay is None else sc.replay.num_objects,
            }
            for sc in fitted
        ],
        "agents_per_world": k,
        "real": {"worlds": len(recs), "steps": [r.num_steps for r in recs], "bytes": real.stat().st_size},
        "first_steps": {"worlds": len(cut), "steps_each": a.short, "bytes": short.stat().st_size},
        "bytes_per_world_step": per_step,
        "extrapolated": {"worlds": len(recs), "steps_each": a.steps, "bytes": round(estimate)},
        "json_bytes_before_gzip": {k2: part(k2) for k2 in ("map", "agents", "objects", "signals")},
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpu": platform.processor(),
        },
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        json.dumps({k2: result[k2] for k2 in ("real", "first_steps", "bytes_per_world_step", "extrapolated")})
    )


if __name__ == "__main__":
    main()
