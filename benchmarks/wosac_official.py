"""Check ``scenefactory benchmark wosac`` against the official WOSAC code (not part of ``make test``).

1. Makes its own venv (default ``~/.cache/scenefactory/wosac-official-venv``) with the official
   ``waymo-open-dataset-tf-2-12-0==1.6.7`` wheel (installed ``--no-deps``: its pins pull jax, dask,
   plotly, visu3d and old pillow/matplotlib that the metrics never import) and what its
   ``sim_agents_metrics`` import: tensorflow 2.13.1 (the wheel pins tensorflow 2.13),
   tensorflow-probability 0.21.0, numpy 1.24.3, scikit-learn, matplotlib, immutabledict. It runs on
   Python 3.11 (checked here: 3.11.7).
2. Scores the same rollouts twice: ours (``scenefactory benchmark wosac --save-rollouts``, per
   policy), and the official ``compute_scenario_metrics_for_bundle`` in the venv
   (``wosac_official_child.py``), which first exports them in the official submission format
   (``ScenarioRollouts`` per scenario, checked by ``validate_scenario_rollouts``, written to
   ``rollouts_<policy>.tfrecord``).
3. Writes the per-scenario figures of both and the largest differences per feature to ``--out``
   (targets: meta-metric within 0.002, every feature likelihood within 0.005).

The official code computes each rollout's features one by one in TensorFlow eager mode: about a
minute of CPU a scenario with 32 rollouts, so the default is 2 generated scenarios per policy.

    .venv/bin/python benchmarks/wosac_official.py --out benchmarks/results/wosac_official.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from scenefactory.evaluation.wosac.benchmark import WosacJob, run_wosac
from scenefactory.evaluation.wosac.corpus import write_wosac_corpus

PINS = (
    "tensorflow==2.13.1",
    "tensorflow-probability==0.21.0",
    "numpy==1.24.3",
    "scikit-learn==1.3.2",
    "matplotlib==3.7.5",
    "immutabledict==2.2.0",
)
WAYMO = "waymo-open-dataset-tf-2-12-0==1.6.7"
POLICIES = ("log", "constant_velocity", "idm", "random")
TARGET_META = 0.002
TARGET_FEATURE = 0.005
HERE = Path(__file__).resolve().parent


def ensure_venv(venv: Path) -> Path:
    """The venv's python, made and filled once (a ``.installed`` marker records success)."""
    python = venv / "bin" / "python"
    if (venv / ".installed").exists():
        return python
    subprocess.run(["python3.11", "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, *PINS], check=True)
    subprocess.run([*pip, "--no-deps", WAYMO], check=True)
    subprocess.run(
        [str(python), "-c", "from waymo_open_dataset.wdl_limited.sim_agents_metrics import metrics"],
        check=True,
    )
    (venv / ".installed").write_text(" ".join((*PINS, WAYMO)) + "\n")
    return python


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenes", type=Path, default=None, help="WOMD scenario shards (default: generate)")
    p.add_argument("--generate", type=int, default=2, help="scenarios to generate without --scenes")
    p.add_argument("--max-scenes", type=int, default=2)
    p.add_argument("--rollouts", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--venv", type=Path, default=Path.home() / ".cache/scenefactory/wosac-official-venv")
    p.add_argument("--work", type=Path, default=Path("/tmp/scenefactory-wosac-official"))
    p.add_argument("--out", type=Path, default=HERE / "results" / "wosac_official.json")
    p.add_argument("--merge", action="store_true", help="update these policies in an existing --out")
    args = p.parse_args()
    python = ensure_venv(args.venv)
    scenes = args.scenes
    if scenes is None:
        scenes = args.work / "scenes"
        write_wosac_corpus(scenes, args.generate, args.seed)
    report: dict = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "official": WAYMO + " (" + ", ".join(PINS) + ")",
        "scenes": str(scenes),
        "rollouts": args.rollouts,
        "seed": args.seed,
        "targets": {"metametric": TARGET_META, "feature_likelihood": TARGET_FEATURE},
        "policies": {},
    }
    if args.merge and args.out.exists():
        kept = json.loads(args.out.read_text())["policies"]
        report["policies"] = {k: v for k, v in kept.items() if k not in args.policies.split(",")}
        report["command"] += " (merged into the earlier run's other policies)"
    worst_meta = worst_feat = 0.0
    for policy in args.policies.split(","):
        out = args.work / policy
        job = WosacJob(
            scenes=scenes,
            policy=policy,
            out=out,
            rollouts=args.rollouts,
            seed=args.seed,
            max_scenes=args.max_scenes,
            save_rollouts=True,
        )
        ours = run_wosac(job, f"benchmark wosac --policy {policy}")
        t = time.perf_counter()
        subprocess.run(
            [
                str(python),
                str(HERE / "wosac_official_child.py"),
                str(scenes),
                str(out / "rollouts.npz"),
                str(out / "official.json"),
                str(out / f"rollouts_{policy}.tfrecord"),
            ],
            check=True,
        )
        official = json.loads((out / "official.json").read_text())
        per: dict = {}
        diffs: dict[str, float] = {}
        for scene in ours["per_scene"]:
            sid = scene["scenario_id"]
            theirs = official["metrics"][sid]
            per[sid] = {k: {"ours": scene[k], "official": v, "diff": scene[k] - v} for k, v in theirs.items()}
            for k, v in per[sid].items():
                diffs[k] = max(diffs.get(k, 0.0), abs(v["diff"]))
        meta = diffs["metametric"]
        feat = max(v for k, v in diffs.items() if k.endswith("_likelihood"))
        worst_meta, worst_feat = max(worst_meta, meta), max(worst_feat, feat)
        report["policies"][policy] = {
            "max_abs_diff": diffs,
            "ours_seconds": ours["timing"]["total_s"],
            "official_seconds": time.perf_counter() - t,
            "per_scene": per,
        }
        print(f"{policy}: largest |diff| meta-metric {meta:.2e}, feature likelihood {feat:.2e}")
    for r in report["policies"].values():
        worst_meta = max(worst_meta, r["max_abs_diff"]["metametric"])
        worst_feat = max(worst_feat, *(v for k, v in r["max_abs_diff"].items() if k.endswith("_likelihood")))
    report["largest_abs_diff"] = {"metametric": worst_meta, "feature_likelihood": worst_feat}
    report["meets_targets"] = worst_meta <= TARGET_META and worst_feat <= TARGET_FEATURE
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"meets targets: {report['meets_targets']} -> {args.out}")
    return 0 if report["meets_targets"] else 1


if __name__ == "__main__":
    sys.exit(main())
