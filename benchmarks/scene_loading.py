"""Scene loading at dataset scale: generate, convert and load a corpus of real-format WOMD scenarios.

1. **Generate** ``--scenes`` city-grid scenarios (``scenes.womd.synthetic.write_corpus``: road-point
   targets and moving-vehicle counts drawn from ``--road-points`` and ``--vehicles``) as TFRecord
   shards in the work folder.
2. **Convert** them with ``convert_files`` (``--workers``, default one per CPU), as
   ``scenefactory convert`` does, with the ``--eval-fraction`` split; like ``convert``, the workers
   build every scene's road data (drivable grid, road-point index) into the per-scene road cache
   (``tasks.driving.road_cache``; here ``$SCENEFACTORY_CACHE_DIR`` is a folder of the work folder).
3. **Load** the train split for training, in a fresh process, the way ``train drive --scenes DIR
   --scene-split train`` does after ``convert``: ``load_scene_dir`` (read and check every JSON file),
   then ``build_pool(scenes, --agents, 3.0, cpu)`` reading the cache; wall time of each phase, peak
   RSS (``ru_maxrss``), RSS, and the bytes of the pool's tensors (``warm``). Then ``cold``: the
   first ``--cold-scenes`` scenes again in another fresh process with an empty cache, so every
   drivable grid and index is built (what a folder converted elsewhere costs at its first load).

4. **Train** (``--train-iterations N`` > 0, default 2): ``scenefactory train drive --scenes DIR
   --scene-split train --agents auto --worlds 256`` for N PPO iterations in a fresh process: wall time,
   the time before the first iteration (reading the scenes, building the pool and the environment),
   seconds per iteration, and the process's peak RSS. ``--train-only`` runs this phase alone on an
   existing conversion and adds it to the JSON already written.

A corpus and its conversion are kept in ``--work`` (default ``benchmarks/.cache/scene_loading``,
git-ignored) under a name made from their parameters, and reused by a later run with the same ones
(the JSON says so, and keeps the first run's generation and conversion times).

Writes ``benchmarks/results/scene_loading.json`` (``--out``): the seed, the corpus parameters, the
machine, and per phase the wall time and per-scene means.

Usage: ``.venv/bin/python benchmarks/scene_loading.py [--scenes 10000] [--seed 0] [--work DIR]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_WORK = Path(__file__).resolve().parent / ".cache" / "scene_loading"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "scene_loading.json"


def _key(params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]


def _folder_bytes(folder: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in folder.glob(pattern) if p.is_file())


def _read_marker(path: Path, params: dict[str, Any]) -> dict[str, Any] | None:
    """The record of an earlier phase with the same parameters, if there is one."""
    try:
        done = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return done if done.get("params") == params else None


def generate(work: Path, params: dict[str, Any], workers: int) -> dict[str, Any]:
    """Write the corpus, or reuse the one of the same parameters."""
    from scenefactory.scenes.womd.synthetic import write_corpus

    folder = work / f"corpus-{_key(params)}"
    marker = folder / "corpus.json"
    done = _read_marker(marker, params)
    if done is not None and all((folder / name).is_file() for name in done["shards"]):
        return {**done, "folder": str(folder), "reused": True}
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    shards = write_corpus(
        folder,
        params["num_scenarios"],
        seed=params["seed"],
        road_points=tuple(params["road_points"]),
        vehicles=tuple(params["vehicles"]),
        scenarios_per_shard=params["scenarios_per_shard"],
        parked=params["parked"],
        workers=workers,
    )
    wall = time.perf_counter() - t0
    record = {
        "params": params,
        "shards": [p.name for p in shards],
        "wall_s": wall,
        "workers": workers,
        "per_scene_ms": 1e3 * wall / params["num_scenarios"],
        "bytes": _folder_bytes(folder, "synthetic.tfrecord-*"),
    }
    marker.write_text(json.dumps(record, indent=2))
    return {**record, "folder": str(folder), "reused": False}


def convert(work: Path, corpus: dict[str, Any], params: dict[str, Any], workers: int) -> dict[str, Any]:
    """Convert the corpus (``scenefactory convert``), or reuse the conversion of the same parameters."""
    from scenefactory.scenes.womd.batch import convert_files
    from scenefactory.tasks.driving import road_cache

    folder = work / f"converted-{_key(params)}"
    marker = folder / "conversion.json"
    done = _read_marker(marker, params)
    if done is not None and (folder / "index.json").is_file():
        return {**done, "folder": str(folder), "reused": True}
    shutil.rmtree(folder, ignore_errors=True)
    shards = [Path(corpus["folder"]) / name for name in corpus["shards"]]
    t0 = time.perf_counter()
    summary = convert_files(
        shards,
        folder,
        workers=workers,
        eval_fraction=params["eval_fraction"],
        prepare_scene=road_cache.warm,
    )
    wall = time.perf_counter() - t0
    record = {
        "params": params,
        "wall_s": wall,
        "workers": workers,
        "per_scene_ms": 1e3 * wall / max(summary["converted"], 1),
        "converted": summary["converted"],
        "errors": len(summary["errors"]),
        "skipped": len(summary["skipped"]),
        "splits": summary["splits"],
        "controlled_agents": summary["agents"]["controlled"],
        "replayed_objects": summary["agents"]["replayed"],
        "json_bytes": _folder_bytes(folder / "json", "*.json"),
    }
    marker.write_text(json.dumps(record, indent=2))
    return {**record, "folder": str(folder), "reused": False}


def _tensor_bytes(obj: Any, seen: set[tuple[str, int]]) -> int:
    """Bytes of the torch tensors reachable from ``obj`` through dataclass fields, attributes and
    containers (scenes are not followed; a storage shared by views counts once)."""
    import torch

    from scenefactory.scenes.scene import Scene

    if isinstance(obj, torch.Tensor):
        storage = ("storage", obj.untyped_storage().data_ptr())
        if storage in seen:
            return 0
        seen.add(storage)
        return int(obj.untyped_storage().nbytes())
    if isinstance(obj, Scene) or ("object", id(obj)) in seen:
        return 0
    seen.add(("object", id(obj)))
    if isinstance(obj, list | tuple):
        return sum(_tensor_bytes(x, seen) for x in obj)
    if isinstance(obj, dict):
        return sum(_tensor_bytes(x, seen) for x in obj.values())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sum(_tensor_bytes(getattr(obj, f.name), seen) for f in dataclasses.fields(obj))
    if hasattr(obj, "__dict__") and type(obj).__module__.startswith("scenefactory"):
        return sum(_tensor_bytes(x, seen) for x in vars(obj).values())
    return 0


def _rss_mb() -> float:
    """Peak resident set size so far, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _rss_now_mb() -> float:
    """Resident set size now, MB (Linux; NaN elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def load(scenes_dir: Path, split: str, agents: int, spacing_m: float, limit: int = 0) -> dict[str, Any]:
    """Phase 3, in this (fresh) process: read the split's scenes (the first ``limit`` when > 0) and
    build the training pool."""
    import torch

    from scenefactory.scenes.library import load_scene_dir
    from scenefactory.tasks.driving.pool import build_pool, road_points

    rss_start, now_start = _rss_mb(), _rss_now_mb()
    t0 = time.perf_counter()
    scenes = load_scene_dir(scenes_dir, split, limit if limit > 0 else None)
    read_s = time.perf_counter() - t0
    rss_read, now_read = _rss_mb(), _rss_now_mb()
    t0 = time.perf_counter()
    pool = build_pool(scenes, agents, spacing_m, torch.device("cpu"))
    pool_s = time.perf_counter() - t0
    rss_pool, now_pool = _rss_mb(), _rss_now_mb()
    n = len(scenes)
    sample = scenes[:: max(1, n // 100)]
    points = [len(road_points(sc, spacing_m)[0]) for sc in sample]
    tensor_bytes = _tensor_bytes(pool, set())
    return {
        "split": split,
        "scenes": n,
        "agents_per_world": agents,
        "road_point_spacing_m": spacing_m,
        "torch_threads": torch.get_num_threads(),
        "read_s": read_s,
        "pool_s": pool_s,
        "read_per_scene_ms": 1e3 * read_s / n,
        "pool_per_scene_ms": 1e3 * pool_s / n,
        "peak_rss_mb": {"after_imports": rss_start, "after_read": rss_read, "after_pool": rss_pool},
        "rss_mb": {"after_imports": now_start, "after_read": now_read, "after_pool": now_pool},
        "scenes_rss_per_scene_kb": 1024.0 * (now_read - now_start) / n,
        "rss_per_scene_kb": 1024.0 * (now_pool - now_start) / n,
        "pool_tensor_bytes": tensor_bytes,
        "pool_tensor_bytes_per_scene": tensor_bytes / n,
        "road_points_per_scene_mean": sum(points) / len(points),
        "road_points_sampled_scenes": len(points),
        "controlled_agents_per_scene_mean": sum(sc.num_agents for sc in scenes) / n,
    }


def train(scenes_dir: Path, work: Path, iterations: int, seed: int) -> dict[str, Any]:
    """Phase 4: train on the train split in a fresh process (``--agents auto``); wall time, setup,
    per-iteration seconds and peak RSS (of that child alone: run it before any other child)."""
    out = work / "train"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "scenefactory", "train", "drive", "--scenes", str(scenes_dir)]
    cmd += ["--scene-split", "train", "--agents", "auto", "--worlds", "256", "--train-scenes", "0"]
    cmd += ["--iterations", str(iterations), "--seed", str(seed), "--out", str(out)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    history = json.loads((out / "history.json").read_text())
    rows = history["history"] if isinstance(history, dict) else history
    config = json.loads((out / "config.json").read_text())
    iteration_s = [r["collect_s"] + r["learn_s"] for r in rows]
    return {
        "command": " ".join(["scenefactory", *cmd[3:]]),
        "iterations": len(rows),
        "agents_per_world": config.get("task", {}).get("agents_per_world"),
        "wall_s": wall,
        "setup_s": wall - sum(iteration_s),
        "iteration_s": iteration_s,
        "steps_per_s": [r["steps_per_s"] for r in rows],
        "peak_rss_mb": peak_mb,
        "torch_threads_default": True,
    }


def main() -> None:
    """Generate, convert, then load in a subprocess; write one JSON file."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenes", type=int, default=10_000, help="scenarios in the corpus")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", type=Path, default=DEFAULT_WORK, help="corpus and conversion folder (kept)")
    p.add_argument("--road-points", type=int, nargs=2, default=(2000, 8000), metavar=("LO", "HI"))
    p.add_argument("--vehicles", type=int, nargs=2, default=(3, 32), metavar=("LO", "HI"))
    p.add_argument("--parked", type=int, default=4)
    p.add_argument("--scenarios-per-shard", type=int, default=100)
    p.add_argument("--eval-fraction", type=float, default=0.1)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--agents", type=int, default=16, help="agents per world of the pool")
    p.add_argument("--split", default="train", choices=("all", "train", "eval"))
    p.add_argument("--cold-scenes", type=int, default=200, help="scenes loaded with an empty road cache")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--load-only", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--limit", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--train-iterations", type=int, default=2, help="PPO iterations of phase 4 (0: skip)")
    p.add_argument("--train-only", action="store_true", help="run phase 4 alone on an existing conversion")
    a = p.parse_args()
    if a.load_only is not None:  # the fresh process of phase 3
        print(json.dumps(load(a.load_only, a.split, a.agents, 3.0, a.limit)))
        return
    from scenefactory.evaluation.bench import machine_info
    from scenefactory.io import write_json

    corpus_params = {
        "num_scenarios": a.scenes,
        "seed": a.seed,
        "road_points": list(a.road_points),
        "vehicles": list(a.vehicles),
        "parked": a.parked,
        "scenarios_per_shard": a.scenarios_per_shard,
    }
    a.work.mkdir(parents=True, exist_ok=True)
    from scenefactory.tasks.driving.road_cache import CACHE_VERSION, RoadParams

    convert_params = {
        "corpus": _key(corpus_params),
        "eval_fraction": a.eval_fraction,
        "max_agents": 32,
        "road_cache": {"version": CACHE_VERSION, **dataclasses.asdict(RoadParams())},
    }
    cache = a.work / f"road-cache-{_key(convert_params)}"
    os.environ["SCENEFACTORY_CACHE_DIR"] = str(cache)  # the converter's workers fill this cache
    corpus = generate(a.work, corpus_params, a.workers)
    print(
        f"generated {a.scenes} scenarios: {corpus['per_scene_ms']:.1f} ms each (reused: {corpus['reused']})"
    )
    if a.train_only:
        folder = a.work / f"converted-{_key(convert_params)}"
        if _read_marker(folder / "conversion.json", convert_params) is None:
            raise SystemExit(f"--train-only: no finished conversion of these parameters in {folder}")
        result = json.loads(a.out.read_text())
        if result.get("corpus") != corpus_params:
            raise SystemExit(f"--train-only: {a.out} holds another corpus than these parameters")
        result["training"] = got = train(folder / "json", a.work, a.train_iterations, a.seed)
        write_json(a.out, result)
        print(
            f"trained {got['iterations']} iterations: setup {got['setup_s']:.0f} s,"
            f" peak RSS {got['peak_rss_mb']:.0f} MB"
        )
        return
    conversion = convert(a.work, corpus, convert_params, a.workers)
    print(
        f"converted {conversion['converted']}: {conversion['per_scene_ms']:.1f} ms each with"
        f" {conversion['workers']} workers, {conversion['errors']} errors (reused: {conversion['reused']})"
    )
    scenes_dir = Path(conversion["folder"]) / "json"
    cmd = [
        sys.executable,
        __file__,
        "--load-only",
        str(scenes_dir),
        "--split",
        a.split,
        "--agents",
        str(a.agents),
    ]
    loading: dict[str, Any] = {}
    cold_cache = a.work / "road-cache-cold"
    runs = (("warm", cache, []), ("cold", cold_cache, ["--limit", str(a.cold_scenes)]))
    for run, folder, extra in runs:
        shutil.rmtree(cold_cache, ignore_errors=True)
        env = {**os.environ, "SCENEFACTORY_CACHE_DIR": str(folder)}
        done = subprocess.run(cmd + extra, check=True, capture_output=True, text=True, env=env)
        got = loading[run] = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"loaded {got['scenes']} {a.split} scenes ({run} road cache): read"
            f" {got['read_per_scene_ms']:.1f} ms, pool {got['pool_per_scene_ms']:.1f} ms per scene; peak"
            f" RSS {got['peak_rss_mb']['after_pool']:.0f} MB; pool tensors"
            f" {got['pool_tensor_bytes'] / 2**20:.1f} MB"
        )
    shutil.rmtree(cold_cache, ignore_errors=True)
    loading["road_cache_bytes"] = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
    cold, warm = loading["cold"], loading["warm"]
    result = {
        "seed": a.seed,
        "corpus": corpus_params,
        "eval_fraction": a.eval_fraction,
        "generation": {k: v for k, v in corpus.items() if k not in ("params", "shards")},
        "conversion": {k: v for k, v in conversion.items() if k != "params"},
        "loading": loading,
        "per_scene_means": {
            "generate_ms": corpus["per_scene_ms"],
            "convert_ms": conversion["per_scene_ms"],
            "read_json_ms": warm["read_per_scene_ms"],
            "build_pool_cold_ms": cold["pool_per_scene_ms"],
            "build_pool_warm_ms": warm["pool_per_scene_ms"],
            "shard_bytes": corpus["bytes"] / a.scenes,
            "json_bytes": conversion["json_bytes"] / max(conversion["converted"], 1),
            "road_cache_bytes": loading["road_cache_bytes"] / max(warm["scenes"], 1),
            "pool_tensor_bytes": warm["pool_tensor_bytes_per_scene"],
            "scenes_rss_kb": warm["scenes_rss_per_scene_kb"],
            "rss_kb": warm["rss_per_scene_kb"],
            "road_points": warm["road_points_per_scene_mean"],
            "road_points_target": sum(a.road_points) / 2,
        },
        "machine": machine_info(),
    }
    if a.train_iterations > 0:  # a fresh process, so that its peak RSS is its own
        write_json(a.out, result)
        subprocess.run([sys.executable, *sys.argv, "--train-only"], check=True)
        result = json.loads(a.out.read_text())
    write_json(a.out, result)
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
