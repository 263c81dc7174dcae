"""Bulk conversion of WOMD scenario shards (TFRecord of ``Scenario`` or flat ``tf.train.Example``
records — the flavour is read off the first record — or GPUDrive/Nocturne ``*.json`` files) into
scene files, one worker process per input file.

Each shard is read record by record (never whole). Every scenario that converts is written
atomically as ``<out>/json/<scenario_id>.json`` (plus ``mjcf/*.xml`` and ``usd/*.usda`` when those
formats are asked for). A scenario that cannot become a scene (no drivable lanes, …) is skipped with
its reason; a corrupt record (bad CRC, truncation, unparsable protobuf) stops that shard and is
reported with file, record index and byte offset — what was converted before it stays written.
``index.json`` lists every scene file written (merged with an existing index), and
``summary.json`` what was read, converted and skipped, and why.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from scenefactory.errors import SceneFormatError, UserError
from scenefactory.io import write_json
from scenefactory.scenes.scene import Scene
from scenefactory.scenes.scene_json import save_scene
from scenefactory.scenes.womd.convert import ScenarioConversionError, scenario_to_scene
from scenefactory.scenes.womd.gpudrive_json import iter_json_scenarios
from scenefactory.scenes.womd.tf_example import iter_womd_scenarios
from scenefactory.scenes.womd.tfrecord import CorruptRecordError

FORMATS = ("json", "mjcf", "usd")


def expand_inputs(patterns: Sequence[str]) -> list[Path]:
    """Files named or matched by ``patterns`` (globs allowed), sorted, duplicates removed."""
    files: set[Path] = set()
    for pattern in patterns:
        matches = glob.glob(pattern, recursive=True) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise UserError(f"no input file matches '{pattern}'")
        for m in matches:
            p = Path(m)
            if not p.is_file():
                raise UserError(
                    f"input {m!r} is not a file (expected WOMD TFRecord shards or GPUDrive JSON scenarios)"
                )
            files.add(p)
    return sorted(files)


def parse_formats(text: str) -> tuple[str, ...]:
    """``"json,mjcf"`` → ``("json", "mjcf")``; unknown names are a user error."""
    formats = tuple(f.strip() for f in text.split(",") if f.strip())
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise UserError(f"--format {text!r}: expected a comma-separated subset of {', '.join(FORMATS)}")
    return formats


def _write(scene: Scene, out: Path, formats: Sequence[str]) -> list[str]:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in scene.name)
    written = []
    if "json" in formats:
        save_scene(scene, out / "json" / f"{safe}.json")
        written.append(f"json/{safe}.json")
    if "mjcf" in formats:
        from scenefactory.scenes.export_mjcf import save_mjcf

        save_mjcf(scene, out / "mjcf" / f"{safe}.xml")
        written.append(f"mjcf/{safe}.xml")
    if "usd" in formats:
        from scenefactory.scenes.export_usd import scene_to_usd

        scene_to_usd(scene, out / "usd" / f"{safe}.usda")
        written.append(f"usd/{safe}.usda")
    return written


def convert_shard(path: str, out: str, formats: Sequence[str], max_agents: int) -> dict[str, Any]:
    """Convert every scenario of one shard (runs in a worker process); returns its report."""
    report: dict[str, Any] = {"file": path, "read": 0, "converted": [], "skipped": [], "corrupt": None}
    read = iter_json_scenarios if path.lower().endswith(".json") else iter_womd_scenarios
    try:
        for index, offset, scenario in read(path):
            report["read"] += 1
            try:
                scene, conv = scenario_to_scene(scenario, max_agents=max_agents)
            except ScenarioConversionError as exc:
                report["skipped"].append({"record": index, "offset": offset, "reason": str(exc)})
                continue
            files = _write(scene, Path(out), formats)
            report["converted"].append(
                {"scenario_id": scene.name, "record": index, "files": files, "report": asdict(conv)}
            )
    except (CorruptRecordError, SceneFormatError) as exc:
        report["corrupt"] = str(exc)
    return report


def _convert_on_ray(
    args: list[tuple[str, str, tuple[str, ...], int]],
    address: str,
    on_shard: Callable[[dict[str, Any]], None] | None,
) -> list[dict[str, Any]]:
    """One Ray task per shard on the cluster at ``address``; reports in completion order."""
    try:
        import ray
    except ImportError as exc:
        raise UserError("--ray needs the ray package: pip install 'scenefactory[ray]'") from exc
    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UserError(f"--ray {address!r}: cannot connect to a Ray cluster there ({exc})") from exc
    task = ray.remote(convert_shard)
    pending = [task.remote(*a) for a in args]
    reports: list[dict[str, Any]] = []
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        reports.append(ray.get(done[0]))
        if on_shard is not None:
            on_shard(reports[-1])
    return reports


def convert_files(
    inputs: Sequence[str],
    out: Path,
    formats: Sequence[str] = ("json",),
    workers: int = 1,
    max_agents: int = 32,
    on_shard: Callable[[dict[str, Any]], None] | None = None,
    ray_address: str | None = None,
) -> dict[str, Any]:
    """Convert shards in parallel — local worker processes, or the tasks of an existing Ray cluster
    at ``ray_address`` (inputs and ``out`` must then be on a filesystem every node sees); writes
    ``index.json`` and ``summary.json``; returns the summary."""
    files = expand_inputs(inputs)
    out.mkdir(parents=True, exist_ok=True)
    reports: list[dict[str, Any]] = []
    args = [(str(f.resolve()), str(out.resolve()), tuple(formats), max_agents) for f in files]
    if ray_address is not None:
        reports = _convert_on_ray(args, ray_address, on_shard)
    elif workers <= 1 or len(files) == 1:
        for a in args:
            reports.append(convert_shard(*a))
            if on_shard is not None:
                on_shard(reports[-1])
    else:
        with ProcessPoolExecutor(max_workers=min(workers, len(files), os.cpu_count() or 1)) as pool:
            for rep in pool.map(convert_shard, *zip(*args, strict=True)):
                reports.append(rep)
                if on_shard is not None:
                    on_shard(rep)
    index_path = out / "index.json"
    index: dict[str, Any] = json.loads(index_path.read_text()) if index_path.is_file() else {"scenes": {}}
    for rep in reports:
        for c in rep["converted"]:
            index["scenes"][c["scenario_id"]] = {
                "source": rep["file"],
                "record": c["record"],
                "files": c["files"],
            }
    write_json(index_path, index)
    summary = {
        "files": len(files),
        "scenarios_read": sum(r["read"] for r in reports),
        "converted": sum(len(r["converted"]) for r in reports),
        "skipped": [dict(s, file=r["file"]) for r in reports for s in r["skipped"]],
        "corrupt": [r["corrupt"] for r in reports if r["corrupt"]],
        "formats": list(formats),
        "out": str(out),
    }
    write_json(out / "summary.json", summary)
    return summary
