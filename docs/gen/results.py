"""Results pages of the docs site, made from the result files, never typed by hand.

Every ``*.json`` under ``benchmarks/results/`` (subfolders too) becomes one section of a results page,
with the command that wrote it, its seed and the machine beside its figures:

- a file the benchmarks wrote (``benchmarks/*.py``, ``scenefactory bench``) goes to
  ``results/benchmarks.md``; files this module knows (:data:`KNOWN`) get a table made for them, any
  other file a generic table of every number it holds, so that a new benchmark's JSON appears without
  a code change;
- a *result record* (a file with ``"schema": "scenefactory.result/1"``: title, command, seed,
  machine, date, source, tables) goes to ``results/experiments.md``, or to a model card page when it
  names a shipped ``policy``.

Where a file does not say its command, :data:`KNOWN` gives the command that writes it (the benchmark
scripts' defaults); where nothing says it, the page says "not recorded". Pure functions of the files:
``pages(repo_root)`` returns ``{page path: markdown}``; the MkDocs hook (``docs/hooks/generate.py``)
adds them to the site at build time.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS_DIR = Path("benchmarks/results")
RECORD_SCHEMA = "scenefactory.result/1"
POLICIES_DIR = Path("src/scenefactory/go1/policies")


class ResultFileError(ValueError):
    """A result file the generator cannot read: names the file and what is wrong."""


# ---------------------------------------------------------------------------------------------------
# formatting


def fmt(value: Any) -> str:
    """A number as a page shows it: integers with thousands separators, floats to 3-4 significant
    digits (large ones rounded to integers), everything else as text."""
    if isinstance(value, bool) or value is None:
        return str(value).lower() if isinstance(value, bool) else "—"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        if value == 0 or abs(value) >= 0.01:
            return f"{value:.3f}"
        return f"{value:.2e}"
    return str(value)


def table(header: list[str], rows: Iterable[Iterable[Any]]) -> str:
    """A Markdown table; cells go through :func:`fmt` unless they are already text."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [c if isinstance(c, str) else fmt(c) for c in row]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def flatten(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf of nested dicts and lists as ``(dotted.path, value)``, in file order."""
    if isinstance(data, dict):
        out: list[tuple[str, Any]] = []
        for k, v in data.items():
            out += flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(data, list) and data and any(isinstance(v, dict | list) for v in data):
        out = []
        for i, v in enumerate(data):
            out += flatten(v, f"{prefix}[{i}]")
        return out
    if isinstance(data, list):
        return [(prefix, ", ".join(fmt(v) for v in data))]
    return [(prefix, data)]


def machine_line(machine: Any) -> str:
    """One line describing the machine a file says it ran on."""
    if not isinstance(machine, dict) or not machine:
        return str(machine) if machine else "not recorded"
    parts = []
    if "cpu_count" in machine:
        parts.append(f"{machine['cpu_count']} CPU cores")
    for key in ("device", "gpu", "processor"):
        if machine.get(key):
            parts.append(str(machine[key]))
    if "torch" in machine:
        parts.append(f"torch {machine['torch']}")
    if "torch_threads" in machine:
        parts.append(f"{machine['torch_threads']} torch threads")
    if "python" in machine:
        parts.append(f"Python {machine['python']}")
    rest = [
        f"{k} {v}"
        for k, v in machine.items()
        if v not in ("", None)
        and k
        not in {"cpu_count", "device", "gpu", "processor", "torch", "torch_threads", "python", "platform"}
    ]
    return ", ".join(parts + rest) or json.dumps(machine)


def find_seed(data: Any) -> Any:
    """The file's top-level ``seed``, else the first ``seed`` found inside it, else None."""
    if isinstance(data, dict):
        if "seed" in data and not isinstance(data["seed"], dict | list):
            return data["seed"]
        for v in data.values():
            s = find_seed(v)
            if s is not None:
                return s
    return None


# ---------------------------------------------------------------------------------------------------
# known benchmark files: a command when the file has none, and a table made for them


def _casps_table(d: dict[str, Any]) -> str:
    casps = d["casps"]
    rows = [[k.replace("_", " "), v] for k, v in casps.items()]
    rows += [[f"ratio: {k.replace('_', ' ')}", f"{v:.2f}×"] for k, v in d.get("ratios", {}).items()]
    out = table(["measure", "controlled-agent steps/s (CASPS)"], rows)
    train = d.get("training")
    if train:
        out += "\n\nOne PPO iteration at the demo's size:\n\n" + table(
            ["threads", "collection (s)", "learning (s)", "agent steps/s"],
            [
                [k.replace("threads_", ""), v["collect_s"], v["learn_s"], v["steps_per_s"]]
                for k, v in train.items()
            ],
        )
    return out


def _bench_table(d: dict[str, Any]) -> str:
    keys = [
        "engine",
        "worlds",
        "agents_per_world",
        "physics_hz",
        "policy_hz",
        "baseline",
        "steps",
        "casps",
        "active_casps",
        "active_fraction",
    ]
    return table(["field", "value"], [[k, d[k]] for k in keys if k in d])


def _engines_vs_table(d: dict[str, Any]) -> str:
    rows = []
    for engine, points in d["results"].items():
        for worlds, p in points.items():
            rows.append(
                [
                    engine,
                    worlds,
                    d.get("agents_per_world"),
                    p["casps"],
                    p.get("active_slot_fraction"),
                    p.get("memory", {}).get("bytes_per_world"),
                ]
            )
    return table(["engine", "worlds", "agents", "CASPS", "active slot fraction", "bytes per world"], rows)


def _go1_table(d: dict[str, Any]) -> str:
    if "env_steps_per_s" in d:
        rows = [
            [
                t,
                d["env_steps_per_s"][t],
                d["ppo_iteration"][t]["collect_s"],
                d["ppo_iteration"][t]["learn_s"],
                d["ppo_iteration"][t]["steps_per_s"],
            ]
            for t in d["env_steps_per_s"]
        ]
        head = f"{d['envs']:,} robots" + (f", {d['task']}" if "task" in d else ", flat ground")
        return (
            head
            + "\n\n"
            + table(
                [
                    "threads",
                    "env steps/s",
                    "PPO iteration: collection (s)",
                    "learning (s)",
                    "steps/s with learning",
                ],
                rows,
            )
        )
    rows = [[n, p["env_steps_per_s"], p["physics_only_policy_steps_per_s"]] for n, p in d["points"].items()]
    return table(["robots", "env steps/s", "physics only, policy steps/s"], rows)


def _learned_table(d: dict[str, Any]) -> str:
    rows = [
        [k, v["casps"], f"{v['over_mujoco']:.1f}×" if "over_mujoco" in v else "1×", v.get("model", "—")]
        for k, v in d["engines"].items()
    ]
    return f"{d['worlds']} worlds × {d['agents_per_world']} agents, full environment step\n\n" + table(
        ["engine", "CASPS", "over mujoco", "model file"], rows
    )


def _real_scenes_table(d: dict[str, Any]) -> str:
    out = []
    if "map_size" in d:
        rows = [
            [
                k,
                v.get("road_points_per_scene", {}).get("mean"),
                v.get("road_points_per_scene", {}).get("max"),
                v["casps"],
                v.get("active_slot_fraction"),
            ]
            for k, v in d["map_size"].items()
        ]
        out.append(
            table(["scenes", "road points per scene (mean)", "max", "CASPS", "active slot fraction"], rows)
        )
    for key, v in d.items():
        if key in {"map_size", "machine"} or not isinstance(v, dict):
            continue
        rows = [[k, fmt(x)] for k, x in flatten(v) if isinstance(x, int | float) and not isinstance(x, bool)]
        if rows:
            out.append(f"**{key}**\n\n" + table(["field", "value"], rows[:40]))
    return "\n\n".join(out)


def _scene_loading_table(d: dict[str, Any]) -> str:
    m = d["per_scene_means"]
    rows = [[k.replace("_", " "), v] for k, v in m.items()]
    out = f"{d['corpus']['num_scenarios']:,} synthetic real-format scenarios, per scene:\n\n"
    out += table(["phase or size", "per scene"], rows)
    tr = d.get("training")
    if tr:
        out += "\n\nTraining on the loaded pool: " + ", ".join(
            f"{k.replace('_', ' ')} {fmt(v)}" for k, v in tr.items() if isinstance(v, int | float)
        )
    return out


def _validation_table(d: dict[str, Any]) -> str:
    rows = [
        [
            f"{name} ({c['surface'].replace('_', ' ')}, {c['water_film_mm']:g} mm water)",
            c["mu"],
            f"{c['braking_distance_m']:.1f} m",
            f"{c['braking_predicted_m']:.1f} m",
            f"{c['max_lateral_accel_mps2']:.2f} m/s²",
            f"{c['lateral_over_mu_g']:.2f}",
            "pass" if all(c["checks"].values()) else "FAIL",
        ]
        for name, c in d["conditions"].items()
    ]
    out = table(["road", "μ", "braking from 20 m/s", "v²/(2μg)", "max lateral accel", "÷ μg", "checks"], rows)
    verdict = "passed" if d["passed"] else "FAILED"
    return out + (
        f"\n\nThe mujoco tier's car at {d['physics_hz']:g} Hz physics: braking must be within ±20 % of "
        f"v²/(2μg) and the lateral limit must scale with μ (within ±25 %); verdict: **{verdict}**."
    )


def _validation_headline(d: dict[str, Any]) -> list[dict[str, str]]:
    c = d["conditions"]
    return [
        {
            "what": "mujoco car, braking distance from 20 m/s on dry asphalt / ice, against v²/(2μg)",
            "value": f"{c['dry']['braking_distance_m']:.1f} m / {c['ice']['braking_distance_m']:.1f} m "
            f"({c['dry']['braking_predicted_m']:.1f} / {c['ice']['braking_predicted_m']:.1f})",
        }
    ]


def _ci(v: float, ci: list[float]) -> str:
    return f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def _go1_eval_table(d: dict[str, Any]) -> str:
    """``eval go1``'s metrics.json: the tracking and push tables it writes into report.md."""
    out = []
    if d.get("tracking"):
        rows = [
            [
                f"({r['command']['vx_mps']:g}, {r['command']['vy_mps']:g}, {r['command']['yaw_radps']:g})",
                r["episodes"],
                _ci(r["lin_vel_error_mps"], r["lin_vel_error_ci95"]),
                _ci(r["yaw_rate_error_radps"], r["yaw_rate_error_ci95"]),
                f"{r['achieved_vx_mps']:.2f} / {r['achieved_vy_mps']:.2f} / {r['achieved_yaw_radps']:.2f}",
                f"{r['falls']}/{r['episodes']}",
            ]
            for r in d["tracking"]
        ]
        out.append(
            "**Velocity tracking** (varied episodes; errors averaged after the first 2 s)\n\n"
            + table(
                [
                    "command (vx, vy, yaw)",
                    "episodes",
                    "lin. error m/s [95 % CI]",
                    "yaw error rad/s [95 % CI]",
                    "achieved vx / vy / yaw",
                    "falls",
                ],
                rows,
            )
        )
    if d.get("push_recovery"):
        rows = [
            [
                f"{r['push_mps']:g}",
                r["trials"],
                r["recovered"],
                _ci(r["recovery_rate"], r["recovery_rate_ci95"]),
            ]
            for r in d["push_recovery"]
        ]
        out.append(
            "**Push recovery** (walking at 0.5 m/s, kicked at 2 s; recovered = not fallen 3 s later)\n\n"
            + table(["push m/s", "trials", "recovered", "recovery rate [95 % CI]"], rows)
        )
    if d.get("terrain"):
        rows = [
            [
                r["kind"],
                r["level"],
                f"{r['parameter']} {r['parameter_value']:.3g}",
                f"{r['speed_mps']:g}",
                r["episodes"],
                _ci(r["success_rate"], r["success_rate_ci95"]),
                _ci(r["fall_rate"], r["fall_rate_ci95"]),
                _ci(r["stall_rate"], r["stall_rate_ci95"]),
                _ci(r["lin_vel_error_mps"], r["lin_vel_error_ci95"]),
            ]
            for r in d["terrain"]
        ]
        out.append(
            f"**Terrain traversal** (each robot starts at its tile's centre, commanded forward; success = "
            f"{d['terrain'][0]['traverse_m']:g} m along before falling; stalled = not moving)\n\n"
            + table(
                [
                    "kind",
                    "level",
                    "parameter",
                    "speed m/s",
                    "episodes",
                    "success [95 % CI]",
                    "falls [95 % CI]",
                    "stalls [95 % CI]",
                    "lin. error m/s [95 % CI]",
                ],
                rows,
            )
        )
    return "\n\n".join(out)


TERRAIN_TARGET_CELLS = (("stairs_up", 3), ("random", 4), ("slope_up", 7), ("slope_down", 7))
"""The cells of the blind terrain targets (10 cm stairs up, ±5 cm ground, 20° slopes; the experiments
page's "Go1 blind rough-terrain targets"): an ``eval go1`` terrain table's headline."""


def _terrain_cell(kind: str, r: dict[str, Any]) -> str:
    """``10 cm stairs up`` / ``±5 cm random ground`` / ``20° slope up`` from a terrain row."""
    value, name = r["parameter_value"], kind.replace("_", " ")
    if r["parameter"] == "slope_deg":
        return f"{value:g}° {name}"
    sign = "±" if kind == "random" else ""
    return f"{sign}{100 * value:g} cm {name}" + (" ground" if kind == "random" else "")


def _go1_terrain_headline(d: dict[str, Any]) -> list[dict[str, str]]:
    """An ``eval go1`` terrain table's success in the target cells (:data:`TERRAIN_TARGET_CELLS`) at
    each speed: one row, none when the table has none of them."""
    rows = d.get("terrain") or []
    parts, speeds, episodes = [], "", 0
    for kind, level in TERRAIN_TARGET_CELLS:
        cell = [r for r in rows if r["kind"] == kind and r["level"] == level]
        if cell:
            speeds = " / ".join(f"{r['speed_mps']:g}" for r in cell)
            episodes = cell[0]["episodes"]
            parts.append(
                f"{_terrain_cell(kind, cell[0])} " + " / ".join(f"{r['success_rate']:.3f}" for r in cell)
            )
    if not parts:
        return []
    name = Path(str(d.get("checkpoint", "")).split(" ")[0]).name
    what = f"Go1 `{name}`: terrain traversal success at {speeds} m/s ({episodes} episodes each)"
    return [{"what": what, "value": "; ".join(parts)}]


def _sim2sim_table(d: dict[str, Any]) -> str:
    """``deploy go1``'s sim2sim.json: per command, the error on the training simulator and on the
    differently configured one, what the rule allows, and the verdict."""
    rows = [
        [
            f"({r['command']['vx_mps']:g}, {r['command']['vy_mps']:g}, {r['command']['yaw_radps']:g})",
            r["metric"].replace("_", " "),
            r["training_sim"],
            r["sim2sim"],
            f"{r['ratio']:.2f}",
            r["allowed"],
            r["sim2sim_falls"],
            "pass" if r["passed"] else "FAIL",
        ]
        for r in d["comparison"]
    ]
    s = d["summary"]
    verdict = "passed" if s["passed"] else f"FAILED ({', '.join(map(str, s['failed_commands']))})"
    return (
        f"{s['episodes_per_command']} runs per command; a command passes with no falls and a sim-to-sim "
        "error of at most max(1.5 × the training simulator's, 0.10).\n\n"
        + table(
            ["command", "error", "training sim", "sim-to-sim", "ratio", "allowed", "falls", "verdict"], rows
        )
        + f"\n\nVerdict: **{verdict}**."
    )


def _wosac_headline(d: dict[str, Any]) -> list[dict[str, str]]:
    metas = ", ".join(
        f"{name.replace('_', ' ')} {p['buckets']['realism_meta_metric']:.3f}"
        for name, p in d["policies"].items()
    )
    return [
        {
            "what": f"WOSAC realism meta-metric of simple sim agents ({d['rollouts']} rollouts per scene)",
            "value": metas,
        }
    ]


@dataclass(frozen=True)
class Known:
    """A result file this module recognizes by name (a glob on its path under benchmarks/results)."""

    pattern: str
    title: str
    command: str
    render: Callable[[dict[str, Any]], str] | None = None
    seed: str | None = None  # when the script fixes the seed and the file does not say it
    headline: Callable[[dict[str, Any]], list[dict[str, str]]] | None = None  # rows for the overview


def _casps_headline(d: dict[str, Any]) -> list[dict[str, str]]:
    hz = (
        f"{d['physics_hz']:.0f} Hz physics / {d['policy_hz']:.0f} Hz policy"
        if d["engine"] != "kinematic"
        else ""
    )
    what = f"driving throughput, {d['engine']} tier, {d['worlds']} worlds × {d['agents_per_world']} agents"
    best = max(v for k, v in d["casps"].items() if k != "baseline")
    ratio = d.get("ratios", {}).get("vectorized_over_baseline")
    value = f"{best:,.0f} controlled-agent steps/s" + (
        f" ({ratio:.1f}× the per-world Python loop)" if ratio else ""
    )
    return [{"what": what + (f", {hz}" if hz else ""), "value": value}]


def _go1_headline(d: dict[str, Any]) -> list[dict[str, str]]:
    best = max(d["ppo_iteration"].values(), key=lambda v: v["steps_per_s"])
    return [
        {
            "what": f"Go1 PPO training throughput, {d['envs']:,} robots"
            + (", height-scan task" if "task" in d else ", flat ground"),
            "value": f"{best['steps_per_s']:,.0f} steps/s with learning "
            f"({best['collect_s']:.2f} s collection + {best['learn_s']:.2f} s learning an iteration)",
        }
    ]


KNOWN: tuple[Known, ...] = (
    Known(
        "wosac_baselines*.json",
        "WOSAC realism of simple sim agents (log, constant velocity, IDM, random)",
        "",
        None,
        headline=_wosac_headline,
    ),
    Known(
        "go1_*sim2sim*.json",
        "Go1 sim-to-sim check (deploy go1)",
        "scenefactory deploy go1 --out DIR",
        _sim2sim_table,
    ),
    Known(
        "go1_*eval*.json",
        "Go1 policy evaluation (eval go1)",
        "scenefactory eval go1 --out DIR",
        _go1_eval_table,
        headline=_go1_terrain_headline,
    ),
    Known(
        "vehicle_validation.json",
        "Vehicle validation on five road surfaces",
        "scenefactory validate vehicle --surface dry --surface wet --surface heavy_rain --surface snow "
        "--surface ice --out runs/validate",
        _validation_table,
        headline=_validation_headline,
    ),
    Known(
        "drive_throughput_kinematic.json",
        "Driving throughput, kinematic tier (256 worlds × 16 agents)",
        ".venv/bin/python benchmarks/drive_throughput.py --engine kinematic",
        _casps_table,
        headline=_casps_headline,
    ),
    Known(
        "drive_throughput_mujoco_120hz_policy30hz.json",
        "Driving throughput, mujoco tier at 120 Hz physics / 30 Hz policy (256 worlds × 16 agents)",
        ".venv/bin/python benchmarks/drive_throughput.py --engine mujoco --physics-hz 120 --policy-hz 30",
        _casps_table,
        headline=_casps_headline,
    ),
    Known(
        "drive_throughput_mujoco_vs_mujoco-warp*",
        "MuJoCo C against MuJoCo Warp on the CPU",
        ".venv/bin/python benchmarks/drive_throughput.py --engine mujoco mujoco-warp --device cpu "
        "--worlds 16 --agents 4 --policy-hz 30 --steps 60 --warmup 10",
        _engines_vs_table,
    ),
    Known(
        "bench_mujoco_256x16_120hz_policy10hz.json",
        "`bench drive`, mujoco tier at its defaults",
        "scenefactory bench drive --engine mujoco --worlds 256 --agents 16 --out FILE.json",
        _bench_table,
    ),
    Known(
        "bench_mujoco_256x16_120hz_policy10hz_baseline.json",
        "`bench drive --baseline`: worlds stepped one by one in Python",
        "scenefactory bench drive --engine mujoco --worlds 256 --agents 16 --baseline --out FILE.json",
        _bench_table,
    ),
    Known(
        "bench_drive_*.json",
        "`bench drive`",
        "scenefactory bench drive … (see the Makefile's bench target)",
        _bench_table,
    ),
    Known(
        "go1_throughput.json",
        "Go1 throughput, flat ground",
        ".venv/bin/python benchmarks/go1_throughput.py",
        _go1_table,
        seed="0 (fixed in the script)",
        headline=_go1_headline,
    ),
    Known(
        "go1_throughput_scan.json",
        "Go1 throughput, the height-scan recipe's task",
        ".venv/bin/python benchmarks/go1_throughput.py --scan",
        _go1_table,
        "0 (fixed in the script)",
    ),
    Known(
        "go1_throughput_mujoco-warp_*.json",
        "Go1 throughput on MuJoCo Warp",
        ".venv/bin/python benchmarks/go1_throughput.py --engine mujoco-warp --envs 16 --steps 20",
        _go1_table,
    ),
    Known(
        "learned_vs_mujoco.json",
        "Learned dynamics engines against mujoco",
        ".venv/bin/python benchmarks/learned_vs_mujoco.py --dynamics-model runs/fit_mlp/model.pt "
        "--dynamics-model runs/fit_gru/model.pt",
        _learned_table,
    ),
    Known(
        "real_scenes.json",
        "Real-format scenes: map size and busy worlds",
        ".venv/bin/python benchmarks/real_scenes.py",
        _real_scenes_table,
    ),
    Known(
        "scene_loading.json",
        "Loading 10,000 real-format scenes",
        ".venv/bin/python benchmarks/scene_loading.py --scenes 10000 --cold-scenes 100",
        _scene_loading_table,
    ),
)


def known(rel: str) -> Known | None:
    """The first :data:`KNOWN` entry whose pattern matches the file's name."""
    name = rel.rsplit("/", 1)[-1]
    for k in KNOWN:
        if fnmatch.fnmatch(name, k.pattern):
            return k
    return None


# ---------------------------------------------------------------------------------------------------
# sections


@dataclass(frozen=True)
class ResultFile:
    """One JSON file under benchmarks/results: its path relative to the repository and its content."""

    rel: str
    data: Any

    @property
    def is_record(self) -> bool:
        return isinstance(self.data, dict) and self.data.get("schema") == RECORD_SCHEMA


def load(root: Path) -> list[ResultFile]:
    """Every ``*.json`` under ``root/benchmarks/results``, records by their ``order`` (then path), the
    rest by path; a file that is not JSON, or a record missing a required field, is a
    :class:`ResultFileError` naming the file."""
    out = []
    for path in sorted((root / RESULTS_DIR).rglob("*.json")):
        rel = path.relative_to(root).as_posix()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ResultFileError(f"{rel}: not valid JSON ({e})") from e
        rf = ResultFile(rel, data)
        if rf.is_record:
            check_record(rf)
        out.append(rf)
    return sorted(out, key=lambda f: (f.data.get("order", 1000) if f.is_record else 0, f.rel))


RECORD_FIELDS = ("title", "command", "seed", "machine", "date", "source", "tables")


def check_record(rf: ResultFile) -> None:
    """A result record must say what ran, where, when and where its figures come from."""
    missing = [f for f in RECORD_FIELDS if f not in rf.data]
    if missing:
        raise ResultFileError(
            f"{rf.rel}: result record without {', '.join(missing)} (expected {RECORD_FIELDS})"
        )
    for i, t in enumerate(rf.data["tables"]):
        if not isinstance(t, dict) or "columns" not in t or "rows" not in t:
            raise ResultFileError(f"{rf.rel}: tables[{i}] needs 'columns' and 'rows'")
        for j, row in enumerate(t["rows"]):
            if len(row) != len(t["columns"]):
                raise ResultFileError(
                    f"{rf.rel}: tables[{i}].rows[{j}] has {len(row)} cells, expected {len(t['columns'])}"
                )


def provenance(
    command: str, seed: Any, machine: str, source: str, extra: Iterable[tuple[str, str]] = ()
) -> str:
    """The block beside each result: command, seed, machine, file."""
    lines = [
        f"- **Command**: `{command}`" if command else "- **Command**: not recorded in the file",
        f"- **Seed**: {fmt(seed) if seed is not None else 'not recorded'}",
        f"- **Machine**: {machine}",
    ]
    lines += [f"- **{k}**: {v}" for k, v in extra]
    lines.append(f"- **From**: {source}")
    return "\n".join(lines)


def anchor(rel: str) -> str:
    """A stable heading id for a result file."""
    return (
        rel.removeprefix(str(RESULTS_DIR) + "/")
        .removesuffix(".json")
        .replace("/", "-")
        .replace("_", "-")
        .replace(".", "-")
        .lower()
    )


SKIP_KEYS = frozenset({"machine", "command", "argv", "seed"})
"""Keys the provenance block above a table already shows."""


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, bool | int | float) or (isinstance(v, str) and len(v) <= 40)


def keyed_table(key: str, value: Any, max_columns: int = 12) -> str:
    """A dict of runs (``{"kinematic_real": {"casps": ..., ...}, ...}``) as one table, a row per run:
    the columns are the fields that differ between runs (at most ``max_columns``), and the fields
    every run shares are listed under it. Empty when ``value`` is not such a dict."""
    if not isinstance(value, dict) or len(value) < 2 or not all(isinstance(v, dict) for v in value.values()):
        return ""
    rows = list(value.values())
    fields = [k for k in rows[0] if all(k in r and _scalar(r[k]) for r in rows)]
    if not fields:  # {policy: {"buckets": {...}, "timing": {...}}}: a table per common part
        parts = [k for k in rows[0] if all(isinstance(r.get(k), dict) for r in rows)]
        made = [
            keyed_table(f"{key} — {part}", {n: r[part] for n, r in value.items()}, max_columns)
            for part in parts
        ]
        return "\n\n".join(t for t in made if t)
    varying = [k for k in fields if len({json.dumps(r[k]) for r in rows}) > 1][:max_columns]
    shared = [k for k in fields if k not in varying and len({json.dumps(r[k]) for r in rows}) == 1]
    out = f"**{key}**\n\n" + table(
        ["", *varying], [[name, *(r[k] for k in varying)] for name, r in value.items()]
    )
    if shared:
        out += "\n\nIn every row: " + ", ".join(f"{k} {fmt(rows[0][k])}" for k in shared) + "."
    return out


def _records_table(key: str, value: Any) -> str:
    """A list of records with the same scalar fields as one table; empty otherwise."""
    if not (isinstance(value, list) and value and all(isinstance(v, dict) for v in value)):
        return ""
    if len({tuple(v) for v in value}) != 1 or not all(_scalar(x) for v in value for x in v.values()):
        return ""
    cols = list(value[0])
    return f"**{key}**\n\n" + table(cols, [[v[c] for c in cols] for v in value])


def _walk(key: str, value: Any, scalars: list[list[Any]], tables: list[str]) -> None:
    """Sort every leaf of ``value`` into a ``field | value`` row or a table of its own."""
    made = keyed_table(key, value) or _records_table(key, value)
    if made:
        tables.append(made)
    elif isinstance(value, dict) and value:
        for k, v in value.items():
            _walk(f"{key}.{k}" if key else str(k), v, scalars, tables)
    elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        for i, v in enumerate(value):
            _walk(f"{key}[{i}]", v, scalars, tables)
    else:
        scalars.append([key, ", ".join(fmt(v) for v in value) if isinstance(value, list) else value])


def generic_tables(d: dict[str, Any]) -> str:
    """Any result file: dicts of runs and lists of records as tables of their own (at any depth),
    every other number or text as ``field | value`` rows (nested keys dotted)."""
    scalars: list[list[Any]] = []
    tables: list[str] = []
    for key, value in d.items():
        if key not in SKIP_KEYS:
            _walk(key, value, scalars, tables)
    out = [table(["field", "value"], scalars)] if scalars else []
    return "\n\n".join(out + tables)


def title_of(rf: ResultFile) -> str:
    """A file's heading: its record title, a known file's title, or its name."""
    if rf.is_record:
        return str(rf.data["title"])
    k = known(rf.rel)
    return k.title if k else rf.rel.rsplit("/", 1)[-1].removesuffix(".json").replace("_", " ")


def benchmark_section(rf: ResultFile, level: int = 2) -> str:
    """One benchmark file: title, provenance and its table (a made-to-measure one or the generic one)."""
    d = rf.data if isinstance(rf.data, dict) else {"values": rf.data}
    k = known(rf.rel)
    title = title_of(rf)
    command = d.get("command") or d.get("argv") or (k.command if k else "")
    if isinstance(command, list):
        command = " ".join(command)
    body = ""
    if k and k.render:
        try:
            body = k.render(d)
        except (KeyError, TypeError, AttributeError):
            body = ""  # the file's layout changed: fall back to every number it holds
    if not body:
        body = generic_tables(d)
    src = f"`{rf.rel}`"
    seed = find_seed(d)
    if seed is None and k is not None:
        seed = k.seed
    return (
        f"{'#' * level} {title} {{#{anchor(rf.rel)}}}\n\n"
        + provenance(str(command), seed, machine_line(d.get("machine")), src)
        + "\n\n"
        + body
        + "\n"
    )


def record_tables(d: dict[str, Any]) -> str:
    """A record's tables, each with its caption and notes."""
    parts = []
    for t in d["tables"]:
        if t.get("caption"):
            parts.append(f"**{t['caption']}**")
        parts.append(table(t["columns"], t["rows"]))
        if t.get("notes"):
            parts.append(t["notes"])
    return "\n\n".join(parts)


def record_section(rf: ResultFile, level: int = 2) -> str:
    """One result record: title, provenance, notes and tables."""
    d = rf.data
    extra = [
        (k.replace("_", " ").capitalize(), str(d[k])) for k in ("date", "episodes", "wall_time") if k in d
    ]
    out = f"{'#' * level} {d['title']} {{#{anchor(rf.rel)}}}\n\n"
    out += provenance(
        d["command"], d["seed"], machine_line(d["machine"]), f"`{rf.rel}`; {d['source']}", extra
    )
    if d.get("summary"):
        out += "\n\n" + d["summary"]
    out += "\n\n" + record_tables(d)
    if d.get("conclusion"):
        out += "\n\n" + d["conclusion"]
    return out + "\n"


# ---------------------------------------------------------------------------------------------------
# pages

GENERATED = (
    "<!-- Generated by docs/gen/results.py from benchmarks/results at build time: edit the JSON files. -->\n"
)


def benchmarks_page(files: list[ResultFile]) -> str:
    bench = [f for f in files if not f.is_record]
    head = (
        GENERATED
        + "# Benchmarks\n\nEvery table below is one file of `benchmarks/results/`, rendered when the "
        "site is built. CASPS = policy steps × controlled agents per wall-clock second of the full "
        "environment step (batched policy inference, engine with its physics substeps, rewards, "
        "terminations, resets, observations); the baseline steps worlds one after another in Python. "
        "A file added there appears here on the next build; `make bench` reruns the main benchmarks. Machine "
        "descriptions come from the files; "
        "timing on a shared machine varies by tens of percent between runs.\n\n"
    )
    toc = "\n".join(f"- [{title_of(f)}](#{anchor(f.rel)})" for f in bench)
    return head + toc + "\n\n" + "\n".join(benchmark_section(f) for f in bench)


def experiments_page(files: list[ResultFile]) -> str:
    recs = [f for f in files if f.is_record and not f.data.get("policy")]
    head = (
        GENERATED + "# Experiments\n\nEach section is one result record in `benchmarks/results/` (schema "
        f"`{RECORD_SCHEMA}`): the command that produced it, its seeds, the machine and where the figures "
        "come from. Rates are over agent-episodes with Wilson 95 % intervals unless a table says otherwise. "
        "Rerun the command to re-measure with today's code.\n\n"
    )
    toc = "\n".join(f"- [{f.data['title']}](#{anchor(f.rel)})" for f in recs)
    return head + toc + "\n\n" + "\n".join(record_section(f) for f in recs)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def model_card(rf: ResultFile, root: Path, files: list[ResultFile] = ()) -> str:  # type: ignore[assignment]
    """A shipped policy's page: what it is, the recipe that remakes it, the policy file's size and
    SHA-256 (computed from the file), and its measured tables."""
    d = rf.data
    policy = root / d["policy"]
    if not policy.is_file():
        raise ResultFileError(f"{rf.rel}: policy {d['policy']} does not exist")
    out = GENERATED + f"# Model card: {policy.stem}\n\n{d.get('summary', '')}\n\n"
    facts = [
        ["file", f"`{d['policy']}`"],
        ["size", f"{policy.stat().st_size / 1024:,.0f} KB"],
        ["SHA-256", f"`{sha256(policy)}`"],
    ]
    facts += [[k.replace("_", " "), str(v)] for k, v in d.get("facts", {}).items()]
    out += table(["property", "value"], facts) + "\n\n"
    out += (
        provenance(
            d["command"],
            d["seed"],
            machine_line(d["machine"]),
            f"`{rf.rel}`; {d['source']}",
            [("Date", str(d["date"]))],
        )
        + "\n\n"
    )
    if d.get("recipe"):
        out += "## Recipe\n\n" + d["recipe"] + "\n\n"
    again = [f for f in files if not f.is_record and d["policy"] in str(f.data.get("checkpoint", ""))]
    if again and not d.get("tables"):  # measured only by the result files: they are the card's tables
        out += "## Measured\n\nThe shipped file itself evaluated (each section one result file):\n\n"
        out += "\n".join(benchmark_section(f, level=3) for f in again) + "\n"
    elif not d.get("tables"):
        raise ResultFileError(f"{rf.rel}: no tables, and no result file evaluates {d['policy']}")
    else:
        if again:
            out += "## Re-measured\n\nThe same file evaluated again by a later command (its result file):\n\n"
            out += "\n".join(benchmark_section(f, level=3) for f in again) + "\n"
        out += f"## Measured when it was made ({d['date']})\n\n" + record_tables(d) + "\n"
    if d.get("conclusion"):
        out += "\n## Limits\n\n" + d["conclusion"] + "\n"
    return out


def model_card_path(rf: ResultFile) -> str:
    return f"results/{Path(rf.data['policy']).stem.replace('_', '-')}.md"


def overview_page(files: list[ResultFile]) -> str:
    """The headline figures: each record's ``headline`` rows, linked to their section."""
    rows = []
    for f in files:
        if not isinstance(f.data, dict):
            continue
        k = None if f.is_record else known(f.rel)
        heads = list(f.data.get("headline", []))
        if k is not None and k.headline is not None:
            with contextlib.suppress(KeyError, TypeError, ValueError):  # a changed layout: still on its page
                heads += k.headline(f.data)
        for h in heads:
            page = (
                model_card_path(f)
                if f.is_record and f.data.get("policy")
                else ("results/experiments.md" if f.is_record else "results/benchmarks.md")
            )
            card = f.is_record and f.data.get("policy")
            link = page.removeprefix("results/") + ("" if card else f"#{anchor(f.rel)}")
            rows.append([h["what"], h["value"], f"[{title_of(f)}]({link})"])
    bench = [f for f in files if not f.is_record]
    out = (
        GENERATED + "# Results\n\nWhat the project has measured, each figure with the command that made it. "
        "The pages are generated from the JSON files in `benchmarks/results/` when the site is built:\n\n"
        "- [Benchmarks](benchmarks.md): throughput and loading, one section per file "
        f"({len(bench)} files).\n"
        "- [Experiments](experiments.md): transfer, grounding, weather and the Go1 terrain targets.\n"
    )
    for f in files:
        if f.is_record and f.data.get("policy"):
            page = model_card_path(f).removeprefix("results/")
            out += f"- [Model card: {Path(f.data['policy']).stem}]({page})\n"
    out += "\n## Headline figures\n\n" + table(["what", "value", "from"], rows) + "\n"
    out += (
        "\n## Reference points\n\nThe published figures these are read against (quoted, not measured "
        "here): SceneFactory (arXiv 2605.08528) reports 19,250 controlled-agent steps/s at 256 worlds × 16 "
        "agents on a 96 GB datacenter GPU, physics → kinematic transfer of 99.5 % against 47.3 % the "
        "other way, and friction-aware policies cutting mean peak DRAC on wet roads from 58.7 to "
        "27.8 m/s² at equal goal reach.\n"
    )
    return out


def pages(root: Path) -> dict[str, str]:
    """``{page path under docs/: markdown}`` for every results page."""
    files = load(root)
    out = {
        "results/index.md": overview_page(files),
        "results/benchmarks.md": benchmarks_page(files),
        "results/experiments.md": experiments_page(files),
    }
    for f in files:
        if f.is_record and f.data.get("policy"):
            out[model_card_path(f)] = model_card(f, root, files)
    return out
