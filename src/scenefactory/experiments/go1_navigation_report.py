"""The figures and the report folder of ``go1-navigation``: per method and budget, success on the
Go1 (pooled Wilson 95 % and the seeds' mean with a Student-t 95 % interval), time to goal,
collisions and falls, per task; the history − none comparison; the curve over the data budget."""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from matplotlib.figure import Figure

from scenefactory.evaluation.plots import save_png
from scenefactory.experiments.base import ExperimentArgs
from scenefactory.experiments.report import ResultsFile
from scenefactory.io import atomic_write_text, write_json
from scenefactory.stats import Z95, mean_interval, t_interval, wilson_interval


def _rate(flags: Sequence[bool]) -> dict[str, Any]:
    k, n = int(sum(flags)), len(flags)
    lo, hi = wilson_interval(k, n)
    return {"rate": k / n if n else math.nan, "ci": [lo, hi], "count": k, "episodes": n}


def _cell(rows: list[dict[str, Any]], tasks: Sequence[str]) -> dict[str, Any]:
    """Figures of the policies ``rows`` (one method and budget, several seeds)."""
    go1 = {
        k: [v for r in rows for v in r["go1"][k]] for k in ("task", "success", "time_s", "collided", "fell")
    }
    seed_rates = [sum(r["go1"]["success"]) / len(r["go1"]["success"]) for r in rows]
    times = torch.tensor([t for t in go1["time_s"] if t is not None], dtype=torch.float64)
    t_mean, t_lo, t_hi = mean_interval(times)
    m, lo, hi = t_interval(seed_rates, 0.0, 1.0)
    err = [r["fit"]["heldout"]["grounded"]["rollout10_pos_err_m"] for r in rows]
    return {
        "method": rows[0]["method"],
        "budget_minutes": rows[0]["budget_minutes"],
        "seeds": [r["seed"] for r in rows],
        "go1_success": _rate(go1["success"]),
        "go1_success_seed_rates": seed_rates,
        "go1_success_seed_mean": {"mean": m, "ci": [lo, hi]},
        "go1_time_to_goal_s": {"mean": t_mean, "ci": [t_lo, t_hi], "episodes": int(times.numel())},
        "go1_collision": _rate(go1["collided"]),
        "go1_fall": _rate(go1["fell"]),
        "go1_success_by_task": {
            t: _rate([s for s, n in zip(go1["success"], go1["task"], strict=True) if n == t]) for t in tasks
        },
        "abstract_success": _rate([v for r in rows for v in r["abstract"]["success"]]),
        "heldout_rollout10_pos_err_m": sum(err) / len(err),
        "point_mass_rollout10_pos_err_m": rows[0]["fit"]["heldout"]["point_mass"]["rollout10_pos_err_m"],
    }


def _difference(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """a − b in Go1 success: pooled (Wald 95 %) and over seeds paired by seed (Student-t 95 %)."""
    pa, pb = a["go1_success"], b["go1_success"]
    d = pa["rate"] - pb["rate"]
    se = math.sqrt(
        pa["rate"] * (1 - pa["rate"]) / pa["episodes"] + pb["rate"] * (1 - pb["rate"]) / pb["episodes"]
    )
    by_seed = dict(zip(b["seeds"], b["go1_success_seed_rates"], strict=True))
    paired = [
        ra - by_seed[s] for s, ra in zip(a["seeds"], a["go1_success_seed_rates"], strict=True) if s in by_seed
    ]
    m, lo, hi = t_interval(paired, -1.0, 1.0)
    verdict = "not resolved (the interval holds 0)"
    if lo > 0 and d - Z95 * se > 0:
        verdict = "better"
    elif hi < 0 and d + Z95 * se < 0:
        verdict = "worse"
    return {
        "pooled": {"difference": d, "ci": [d - Z95 * se, d + Z95 * se]},
        "paired_by_seed": {"mean": m, "ci": [lo, hi], "seeds": len(paired)},
        "verdict": verdict,
    }


def summarize(
    rows: list[dict[str, Any]], main_minutes: float, tasks: Sequence[str]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per (method, budget) cells, and the comparison of every method with ``none`` at the main budget."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["method"], r["budget_minutes"]), []).append(r)
    cells = [_cell(g, tasks) for g in groups.values()]
    main = {c["method"]: c for c in cells if c["budget_minutes"] in (0.0, main_minutes)}
    comparison = {m: _difference(c, main["none"]) for m, c in main.items() if m != "none"}
    return cells, comparison


def _pct(rate: dict[str, Any]) -> str:
    lo, hi = rate["ci"]
    return f"{100 * rate['rate']:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"


def _curve_plot(cells: list[dict[str, Any]], out: Path) -> Path:
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    for method in ("sysid", "markov", "gat", "history"):
        pts = sorted((c["budget_minutes"], c) for c in cells if c["method"] == method)
        if not pts:
            continue
        x = [p[0] for p in pts]
        y = [p[1]["go1_success"]["rate"] for p in pts]
        err = [
            [v - p[1]["go1_success"]["ci"][0] for v, p in zip(y, pts, strict=True)],
            [p[1]["go1_success"]["ci"][1] - v for v, p in zip(y, pts, strict=True)],
        ]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=method)
    for method, style in (("none", "--"), ("dr", ":")):
        for c in cells:
            if c["method"] == method:
                ax.axhline(
                    c["go1_success"]["rate"], linestyle=style, color="grey", label=f"{method} (no data)"
                )
    ax.set_xlabel("Go1 data budget [min of robot time]")
    ax.set_ylabel("success rate on the Go1")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=8)
    return save_png(fig, out, dpi=110)


def _markdown(results: dict[str, Any], main_minutes: float) -> str:
    cells, comp = results["summary"], results["comparison"]
    main = [c for c in cells if c["budget_minutes"] in (0.0, main_minutes)]
    tasks = list(main[0]["go1_success_by_task"]) if main else []
    lines = [
        "| method | data [min] | Go1 success (pooled) | seeds' mean [t 95 %] | time to goal [s] "
        "| collisions | falls | abstract success | held-out 10-step error [m] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in main:
        s, t = c["go1_success_seed_mean"], c["go1_time_to_goal_s"]
        lines.append(
            f"| {c['method']} | {c['budget_minutes']:g} | {_pct(c['go1_success'])} | {100 * s['mean']:.0f} % "
            f"[{100 * s['ci'][0]:.0f}, {100 * s['ci'][1]:.0f}] | {t['mean']:.1f} "
            f"[{t['ci'][0]:.1f}, {t['ci'][1]:.1f}] (n {t['episodes']}) | {_pct(c['go1_collision'])} | "
            f"{_pct(c['go1_fall'])} | {_pct(c['abstract_success'])} | "
            f"{c['heldout_rollout10_pos_err_m']:.3f} |"
        )
    lines += [
        "",
        "Go1 success by task (pooled over seeds):",
        "",
        "| method | " + " | ".join(tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    for c in main:
        lines.append(
            f"| {c['method']} | " + " | ".join(_pct(c["go1_success_by_task"][t]) for t in tasks) + " |"
        )
    lines += [
        "",
        "Difference in Go1 success from `none` (direct transfer):",
        "",
        "| method | pooled (Wald 95 %) | paired by seed (t 95 %) | verdict |",
        "|---|---|---|---|",
    ]
    for m, d in comp.items():
        p, q = d["pooled"], d["paired_by_seed"]
        lines.append(
            f"| {m} | {100 * p['difference']:+.0f} pts [{100 * p['ci'][0]:+.0f}, {100 * p['ci'][1]:+.0f}] | "
            f"{100 * q['mean']:+.0f} pts [{100 * q['ci'][0]:+.0f}, {100 * q['ci'][1]:+.0f}] "
            f"({q['seeds']} seeds) | {d['verdict']} |"
        )
    curve = sorted((c["method"], c["budget_minutes"], c) for c in cells if c not in main)
    if curve:
        lines += [
            "",
            "Smaller data budgets (the curve):",
            "",
            "| method | data [min] | Go1 success (pooled) | held-out 10-step error [m] |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {m} | {b:g} | {_pct(c['go1_success'])} | {c['heldout_rollout10_pos_err_m']:.3f} |"
            for m, b, c in curve
        ]
    return "\n".join(lines)


def write_nav_report(
    args: ExperimentArgs, name: str, results: Any, config: dict[str, Any], seeds: list[int], wall_s: float
) -> ResultsFile[Any]:
    """``report.md``, ``results.json`` and ``budget_curve.png`` into ``args.out``."""
    figures = results.figures
    main_minutes = config["sizes"]["budget_minutes"]
    plot = _curve_plot(figures["summary"], args.out / "budget_curve.png")
    doc = ResultsFile(
        experiment=name,
        command=args.command or f"scenefactory experiment {name} --out {args.out}",
        quick=args.quick,
        sizes=None,
        seeds={"every method": seeds},
        evaluation_seed=args.seed,
        config=config,
        results=results,
        plots=(plot.name,),
        wall_s=wall_s,
        machine={
            "torch_threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
        },
    )
    write_json(args.out / "results.json", doc.to_json())
    d = figures["data"]
    comp = figures["comparison"].get("history")
    answer = (
        f"History correction vs direct transfer on the Go1: **{comp['verdict']}** "
        f"({100 * comp['pooled']['difference']:+.0f} points of success, pooled 95 % "
        f"[{100 * comp['pooled']['ci'][0]:+.0f}, {100 * comp['pooled']['ci'][1]:+.0f}]; paired by seed "
        f"[{100 * comp['paired_by_seed']['ci'][0]:+.0f}, {100 * comp['paired_by_seed']['ci'][1]:+.0f}])."
        if comp
        else ""
    )
    quick = (
        "\n**Quick run** (`--quick`): tiny sizes for a smoke test; the numbers below are not results.\n"
        if args.quick
        else ""
    )
    text = f"""# Go1 navigation: abstract sim-to-real on legs
{quick}
Navigation policies trained in a point-mass (unicycle) simulator, grounded with Go1 rollouts, and
evaluated on the MuJoCo Go1 walking the shipped locomotion policy (see
`scenefactory.experiments.go1_navigation` for the protocol).

Command: `{doc.command}`

Wall time {wall_s / 60:.1f} min on {torch.get_num_threads()} torch threads. Training seeds (every
method): {seeds}; evaluation seed {args.seed}. Go1 data: {d["minutes"]:.1f} min of robot time
({d["transitions"]} transitions of {d["nav_dt_s"]} s, {d["falls"]} falls), {100 * d["heldout_frac"]:.0f} %
of the episodes held out of every fit; main budget {main_minutes:g} min.

{answer}

{_markdown(figures, main_minutes)}

![budget curve]({plot.name})

Rates over episodes with Wilson 95 % intervals; "seeds' mean" is the mean of the training seeds'
success rates with a Student-t 95 % interval (a point with one seed); time to goal over the
successful episodes with a normal 95 % interval; the held-out error is the final position error of
10-step open-loop predictions of the grounded model on held-out Go1 episodes (the point mass's
in `results.json`).

## Config

```json
{json.dumps(config["sizes"], indent=2, default=str)}
```
"""
    atomic_write_text(args.out / "report.md", text)
    return doc
