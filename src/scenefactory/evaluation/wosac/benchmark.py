"""``scenefactory benchmark wosac``: simulate every scenario of a folder of WOMD scenario shards with a
policy, score the rollouts with the WOSAC 2025 metrics, and write ``metrics.json`` and ``report.md``.

A deterministic policy (log replay, constant velocity, IDM) gives R identical rollouts, so its
features are computed once and repeated R times (the histograms are the same as for R copies);
``random`` is simulated and scored rollout by rollout in one batch, and so is ``checkpoint``: a trained
driving policy drives each scenario's controllable vehicles, its actions sampled, every other object
by its log or the IDM (``--others``; :mod:`~scenefactory.evaluation.wosac.driven`).
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.errors import UserError
from scenefactory.evaluation.wosac.config import CHALLENGE_2025, CURRENT_TIME_INDEX, FEATURES, N_ROLLOUTS
from scenefactory.evaluation.wosac.driven import Driver, driven_rollouts
from scenefactory.evaluation.wosac.features import Features, joint_scene_features
from scenefactory.evaluation.wosac.metrics import RATES, aggregate, buckets, scenario_metrics
from scenefactory.evaluation.wosac.rollouts import POLICIES
from scenefactory.evaluation.wosac.scenario import WosacScenario, wosac_scenario
from scenefactory.io import atomic_write_text
from scenefactory.scenes.womd.reader import iter_scenarios

DETERMINISTIC = frozenset({"log", "constant_velocity", "idm"})
"""Policies whose rollouts are all the same."""
CHECKPOINT = "checkpoint"
"""``--policy checkpoint``: a trained driving policy (``evaluation.wosac.driven.Driver``)."""
OTHERS = ("log", "idm")
"""``--others`` with ``--policy checkpoint``: what the objects the policy does not drive do."""

PUBLISHED: tuple[tuple[str, float, str], ...] = (
    (
        "logged oracle",
        0.832,
        "PufferDrive re-implementation, 229 clean WOMD validation scenes (0.833 on 10k)",
    ),
    ("SMART-tiny", 0.805, "PufferDrive re-implementation, 229 clean scenes (0.795 on 10k)"),
    ("SMART-R1", 0.786, "WOSAC 2025 leaderboard (official code, test split)"),
    ("self-play RL (PufferDrive)", 0.737, "PufferDrive re-implementation, 229 clean scenes"),
    ("random", 0.485, "PufferDrive re-implementation, 229 clean scenes (0.497 on 10k)"),
)
"""Realism meta-metrics published for real WOMD (2025 config); PufferDrive's differ from the official
code on some scenes (Emerge-Lab/PufferDrive #236: traffic-light scenes dropped, 2-D road edges)."""


@dataclass(frozen=True)
class WosacJob:
    """What ``benchmark wosac`` runs: the scene folder, policy name, rollouts, seed, scene limit
    (0: all), output folder and whether to save the rollouts (``rollouts.npz``, for the official-code
    comparison in ``benchmarks/wosac_official.py``); with ``policy`` ``checkpoint``, the checkpoint's
    path and what the other objects do (``others``: ``log`` or ``idm``)."""

    scenes: Path
    policy: str
    out: Path
    rollouts: int = N_ROLLOUTS
    seed: int = 0
    max_scenes: int = 0
    save_rollouts: bool = False
    checkpoint: Path | None = None
    others: str = "log"

    def __post_init__(self) -> None:
        """Known policy (a checkpoint with its path), positive rollouts, non-negative limit."""
        if self.policy not in POLICIES and self.policy != CHECKPOINT:
            raise UserError(
                f"benchmark wosac: unknown --policy {self.policy!r}; expected one of"
                f" {sorted([*POLICIES, CHECKPOINT])}"
            )
        if (self.policy == CHECKPOINT) != (self.checkpoint is not None):
            raise UserError(
                "benchmark wosac: --checkpoint PATH goes with --policy checkpoint, and only with it"
            )
        if self.others not in OTHERS or (self.others != "log" and self.policy != CHECKPOINT):
            raise UserError(
                f"benchmark wosac: --others must be one of {', '.join(OTHERS)} and other than log only with"
                f" --policy checkpoint (the other policies simulate every object), got {self.others!r}"
            )
        if self.rollouts < 1 or self.max_scenes < 0:
            raise UserError(
                "benchmark wosac: need --rollouts >= 1 and --max-scenes >= 0, got"
                f" {self.rollouts}, {self.max_scenes}"
            )


def scenario_files(folder: Path) -> list[Path]:
    """The WOMD scenario shards of ``folder`` (files whose name contains ``tfrecord``), sorted."""
    if not folder.is_dir():
        raise UserError(f"benchmark wosac: --scenes {folder} is not a folder")
    files = sorted(p for p in folder.iterdir() if p.is_file() and "tfrecord" in p.name)
    if not files:
        raise UserError(
            f"benchmark wosac: no WOMD scenario shard (a file named *tfrecord*) in {folder}; WOSAC scores the"
            " scenario-format TFRecords (e.g. validation.tfrecord-00000-of-00150), not converted scenes"
        )
    return files


def iter_wosac_scenarios(folder: Path, limit: int = 0) -> Iterator[tuple[Any, WosacScenario]]:
    """(parsed Scenario, :class:`WosacScenario`) for each scenario of the folder's shards, in order."""
    n = 0
    for path in scenario_files(folder):
        for _, _, scenario in iter_scenarios(path):
            yield scenario, wosac_scenario(scenario)
            n += 1
            if limit and n >= limit:
                return


def _repeat(f: Features, r: int) -> Features:
    return Features(**{k: v.expand(r, *v.shape[1:]) for k, v in asdict_shallow(f).items()})


def asdict_shallow(f: Features) -> dict[str, torch.Tensor]:
    """The fields of ``f`` by name (no copy)."""
    return {k: getattr(f, k) for k in f.__dataclass_fields__}


def score_scenario(
    scn: WosacScenario,
    policy: str,
    rollouts: int,
    generator: torch.Generator,
    scenario: Any = None,
    driver: Driver | None = None,
) -> tuple[dict[str, float], torch.Tensor]:
    """One scenario's WOSAC figures under ``policy`` and the simulated future (R, N, 80, 4); the
    ``checkpoint`` policy needs the parsed ``scenario`` and its ``driver``."""
    if policy == CHECKPOINT:
        if driver is None or scenario is None:
            raise ValueError("score_scenario: --policy checkpoint needs the scenario and a Driver")
        future, counts = driven_rollouts(scenario, scn, driver, rollouts)
    else:
        future, counts = POLICIES[policy](scn, rollouts, generator), {}
    future[..., 3] = torch.remainder(future[..., 3] + np.pi, 2 * np.pi) - np.pi
    log_future = scn.traj[None, :, CURRENT_TIME_INDEX + 1 :, :4]
    log = joint_scene_features(scn, log_future, scn.valid[None, :, CURRENT_TIME_INDEX + 1 :])
    one = future[:1] if policy in DETERMINISTIC else future
    sim = joint_scene_features(scn, one, torch.ones(one.shape[:3], dtype=torch.bool))
    if policy in DETERMINISTIC:
        sim = _repeat(sim, rollouts)
    return {**scenario_metrics(log, sim, scn.object_type[: scn.num_eval], CHALLENGE_2025), **counts}, future


def run_wosac(
    job: WosacJob,
    command: str,
    progress: Callable[[str], None] | None = None,
    driver: Driver | None = None,
) -> dict[str, Any]:
    """Run the job; write ``metrics.json`` and ``report.md`` into ``job.out``; return the metrics. A
    ``checkpoint`` job takes the loaded policy as ``driver`` (its actions sampled with torch's global
    generator, seeded here with ``job.seed``)."""
    if (job.policy == CHECKPOINT) != (driver is not None):
        raise ValueError("run_wosac: a Driver goes with --policy checkpoint, and only with it")
    generator = torch.Generator().manual_seed(job.seed)
    torch.manual_seed(job.seed)
    per_scene: list[dict[str, Any]] = []
    saved: dict[str, np.ndarray] = {}
    t0, cpu0 = time.perf_counter(), time.process_time()
    read_s = 0.0
    t_read = time.perf_counter()
    for k, (scenario, scn) in enumerate(iter_wosac_scenarios(job.scenes, job.max_scenes)):
        read_s += time.perf_counter() - t_read
        t = time.perf_counter()
        m, future = score_scenario(scn, job.policy, job.rollouts, generator, scenario, driver)
        entry: dict[str, Any] = {
            "scenario_id": scn.scenario_id,
            "objects": scn.num_objects,
            "evaluated": scn.num_eval,
            "seconds": time.perf_counter() - t,
            **m,
        }
        per_scene.append(entry)
        if job.save_rollouts:
            saved[f"{scn.scenario_id}/object_id"] = scn.object_id.numpy()
            saved[f"{scn.scenario_id}/future"] = future.numpy().astype(np.float32)
        if progress:
            progress(
                f"{k + 1}: {scn.scenario_id} metametric {m['metametric']:.4f} ({entry['seconds']:.2f} s)"
            )
        t_read = time.perf_counter()
    if not per_scene:
        raise UserError(f"benchmark wosac: no scenario in {job.scenes}")
    total_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    counted = ("scenario_id", "agents", "reacting", "converted")
    agg = aggregate([{k: v for k, v in s.items() if k not in counted} for s in per_scene])
    result = {
        "benchmark": "wosac",
        "config": "challenge_2025_sim_agents_config (waymo-open-dataset 1.6.7)",
        "command": command,
        "job": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(job).items()},
        "scenarios": len(per_scene),
        "aggregate": agg,
        "buckets": buckets(agg),
        "per_scene": per_scene,
        **({} if driver is None else {"driven": _driven_record(per_scene, driver)}),
        "published": [{"name": n, "realism_meta_metric": v, "source": s} for n, v, s in PUBLISHED],
        "timing": {
            "total_s": total_s,
            "cpu_s": cpu_s,
            "read_s": read_s,
            "load_average_1min": os.getloadavg()[0],
            "cpus": os.cpu_count(),
            "threads": torch.get_num_threads(),
            "machine": platform.processor() or platform.machine(),
        },
    }
    job.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(job.out / "metrics.json", json.dumps(result, indent=2) + "\n")
    atomic_write_text(job.out / "report.md", report_markdown(result))
    if job.save_rollouts:
        np.savez_compressed(job.out / "rollouts.npz", **saved)  # type: ignore[arg-type]
    return result


def report_markdown(result: dict[str, Any]) -> str:
    """The report: our figures beside the published ones, then the per-feature likelihoods."""
    b, agg, job = result["buckets"], result["aggregate"], result["job"]
    lines = [
        f"# WOSAC 2025 realism: policy `{job['policy']}` on {result['scenarios']} scenarios"
        f" ({job['rollouts']} rollouts, seed {job['seed']})",
        "",
        f"Command: `{result['command']}`",
        "",
        "| policy | realism meta-metric | kinematic | interactive | map-based | minADE (m) | source |",
        "|---|---|---|---|---|---|---|",
        f"| **{job['policy']} (this run)** | **{b['realism_meta_metric']:.4f}** |"
        f" {b['kinematic_metrics']:.4f} | {b['interactive_metrics']:.4f} | {b['map_based_metrics']:.4f} |"
        f" {b['min_ade']:.3f} | {job['scenes']} |",
    ]
    lines += [
        f"| {p['name']} | {p['realism_meta_metric']:.3f} | | | | | {p['source']} |"
        for p in result["published"]
    ]
    d = result.get("driven")
    if d is not None:
        lines += [
            "",
            f"Policy `{d['policy']}` on the {d['engine']} engine, actions sampled, drove"
            f" {d['agents']} vehicles; the other objects: `--others {d['others']}`"
            f" ({d['reacting_vehicles']} logged vehicles reacting);"
            f" {d['scenarios_without_agent']} scenarios without a controllable vehicle replayed their logs.",
        ]
    lines += ["", "| feature | likelihood | weight |", "|---|---|---|"]
    lines += [
        f"| {n} | {agg[n + '_likelihood']:.4f} | {CHALLENGE_2025.feature(n).weight:.2f} |" for n in FEATURES
    ]
    lines += ["", "| event rate (simulated) | value |", "|---|---|"]
    lines += [f"| {r} | {agg[r]:.4f} |" for r in RATES]
    t = result["timing"]
    lines += [
        "",
        f"Time: {t['total_s']:.1f} s wall ({t['cpu_s']:.1f} s CPU) for {result['scenarios']} scenarios on"
        f" {t['threads']} torch threads, load average {t['load_average_1min']:.1f} on {t['cpus']} CPUs.",
        "",
    ]
    return "\n".join(lines)


def _driven_record(per_scene: list[dict[str, Any]], driver: Driver) -> dict[str, Any]:
    """What a checkpoint run drove: the policy, its engine, the others' mode, agents driven, logged
    vehicles reacting and scenarios replayed for want of a controllable vehicle."""
    return {
        "policy": driver.name,
        "engine": driver.engine.tier,
        "others": driver.others,
        "sampled": True,
        "agents": sum(int(s["agents"]) for s in per_scene),
        "reacting_vehicles": sum(int(s["reacting"]) for s in per_scene),
        "scenarios_without_agent": sum(1 - int(s["converted"]) for s in per_scene),
    }
