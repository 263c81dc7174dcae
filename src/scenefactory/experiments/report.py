"""The report folder of an experiment: ``report.md`` (what ran, the exact command, seeds, sizes and
config, tables with 95 % CIs, the plots), ``results.json`` (every number, written atomically: the
typed :class:`ResultsFile`) and PNG plots (Agg canvas, written atomically through
``evaluation.plots.save_png``)."""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from scenefactory.errors import UserError
from scenefactory.evaluation.plots import save_png
from scenefactory.experiments.base import ExperimentArgs, Sizes
from scenefactory.experiments.results import (
    RESULTS_VERSION,
    Cell,
    ExperimentResults,
    Reader,
    ResultsFieldError,
    check_version,
)
from scenefactory.experiments.seed_level import (
    EXPLAINED,
    SeedLevel,
    cells_markdown,
    differences_markdown,
    seed_level,
)
from scenefactory.experiments.tables import METRIC_LABELS
from scenefactory.io import atomic_write_text, show_value, write_json

R = TypeVar("R", bound=ExperimentResults)


def _read_sizes(r: Reader) -> Sizes:
    values = {f.name: r.integer(f.name) for f in fields(Sizes) if f.name != "eval_worlds"}
    try:
        return Sizes(**values, eval_worlds=r.integer("eval_worlds"))
    except UserError as exc:
        raise ResultsFieldError(f"field '{r.where}': {exc}") from None


def _read_seeds(r: Reader) -> dict[str, list[int] | str]:
    """Kind → the training seeds used, or a note (``given checkpoints``)."""
    out: dict[str, list[int] | str] = {}
    for kind, value in r.data.items():
        out[kind] = value if isinstance(value, str) else list(r.integers(kind))
    return out


@dataclass(frozen=True)
class ResultsFile(Generic[R]):
    """``results.json``: what ran (the experiment, the exact command, ``--quick``, the sizes, the
    training seeds by kind or a note such as ``given checkpoints``, the evaluation seed, the
    config), the experiment's typed ``results``, the plots' file names, the wall time, the machine,
    and (where a kind has two or more policies) the seed-level summary of the cells."""

    experiment: str
    command: str
    quick: bool
    sizes: Sizes | None
    seeds: Mapping[str, list[int] | str]
    evaluation_seed: int
    config: Mapping[str, Any]
    results: R
    plots: tuple[str, ...]
    wall_s: float
    machine: Mapping[str, Any]
    seed_level: SeedLevel | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain data, :data:`~.results.RESULTS_VERSION` first."""
        out: dict[str, Any] = {
            "version": RESULTS_VERSION,
            "experiment": self.experiment,
            "command": self.command,
            "quick": self.quick,
            "sizes": asdict(self.sizes) if self.sizes is not None else None,
            "seeds": dict(self.seeds),
            "evaluation_seed": self.evaluation_seed,
            "config": dict(self.config),
            "results": self.results.to_json(),
            "plots": list(self.plots),
            "wall_s": self.wall_s,
            "machine": dict(self.machine),
        }
        if self.seed_level is not None:
            out["seed_level"] = self.seed_level.to_json()
        return out

    @classmethod
    def from_json(cls, data: Any, read_results: Callable[[Reader], R]) -> ResultsFile[R]:
        """Inverse of :meth:`to_json`; ``read_results`` reads the experiment's ``results`` object
        (its class's ``from_json``). A field that is missing or mistyped, or another version, is a
        :class:`~.results.ResultsFieldError` naming it."""
        if not isinstance(data, Mapping):
            raise ResultsFieldError(f"expected a JSON object (an experiment report), got {show_value(data)}")
        r = Reader(data, "")
        check_version(r)
        return cls(
            experiment=r.text("experiment"),
            command=r.text("command"),
            quick=r.flag("quick"),
            sizes=None if r.raw("sizes") is None else _read_sizes(r.obj("sizes")),
            seeds=_read_seeds(r.obj("seeds")),
            evaluation_seed=r.integer("evaluation_seed"),
            config=r.document("config"),
            results=read_results(r.obj("results")),
            plots=r.texts("plots"),
            wall_s=r.number("wall_s"),
            machine=r.document("machine"),
            seed_level=SeedLevel.from_json(r.obj("seed_level")) if r.has("seed_level") else None,
        )


def write_report(
    args: ExperimentArgs,
    name: str,
    title: str,
    intro: str,
    sections: Sequence[str],
    sizes: Sizes | None,
    seeds: Mapping[str, list[int] | str],
    config: Mapping[str, Any],
    results: R,
    plots: Sequence[Path],
    wall_s: float,
    seed_compare: Sequence[tuple[Cell, Cell]] = (),
    seed_paired: bool = False,
) -> ResultsFile[R]:
    """Write ``report.md`` and ``results.json`` into ``args.out``; returns the results file.

    When a cell of ``results.cells`` pools two or more policies, the report gains a seed-level
    section (:mod:`~scenefactory.experiments.seed_level`: the training seed as the unit) with the
    differences A − B of ``seed_compare`` (paired by seed with ``seed_paired``), also in
    ``results.json`` under ``seed_level``."""
    summary: SeedLevel | None = None
    seed_section = ""
    if results.cells:
        found = seed_level(results.cells, seed_compare, seed_paired, strict=False)
        if any(len(c.seeds) > 1 for c in found.cells):
            summary = found
            diffs = differences_markdown(found)
            seed_section = (
                f"## Seed level\n\n{EXPLAINED} The pooled intervals above treat every agent-episode as "
                "independent; these do not.\n\n" + (f"{diffs}\n" if diffs else "") + cells_markdown(found)
            )
    doc = ResultsFile(
        experiment=name,
        command=args.command or f"scenefactory experiment {name} --out {args.out}",
        quick=args.quick,
        sizes=sizes,
        seeds=dict(seeds),
        evaluation_seed=args.seed,
        config=dict(config),
        results=results,
        plots=tuple(p.name for p in plots),
        wall_s=wall_s,
        machine={
            "torch_threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
        },
        seed_level=summary,
    )
    write_json(args.out / "results.json", doc.to_json())
    shown_sizes = asdict(sizes) if sizes is not None else {}
    if seeds and all(isinstance(v, str) for v in seeds.values()):
        shown_sizes.pop("seeds", None)  # every policy was given: no training seeds were used
    size_line = "; sizes: " + ", ".join(f"{k} {v}" for k, v in shown_sizes.items()) if shown_sizes else ""
    shown = {k: v for k, v in config.items() if len(json.dumps(v, default=str)) <= 600}
    omitted = [k for k in config if k not in shown]
    more = f"\n\nIn `results.json` only: {', '.join(f'`{k}`' for k in omitted)}." if omitted else ""
    seed_lines = "\n".join(f"- {k}: {v}" for k, v in seeds.items())
    images = "\n".join(f"![{p.stem}]({p.name})" for p in plots)
    quick = (
        "\n**Quick run** (`--quick`): tiny sizes for a smoke test; the numbers below are not results.\n"
        if args.quick
        else ""
    )
    text = f"""# {title}
{quick}
{intro.strip()}

Command: `{doc.command}`

Wall time {wall_s / 60:.1f} min on {torch.get_num_threads()} torch threads (this invocation: work
reused from an earlier run on the same folder — finished policies, collections, fits — is not
counted; a policy's own time per iteration is in its `history.json`){size_line}.
Evaluation seed {args.seed} (held-out procedural scenes come from the eval seed range, disjoint from
training). Training seeds:
{seed_lines}

{chr(10).join(s.strip() + chr(10) for s in sections)}
{images}

{seed_section}

Rates are over agent-episodes with Wilson 95 % intervals; means carry normal 95 % intervals;
differences carry normal (Wald / Welch) 95 % intervals. Several policies of one kind are pooled
(their agent-episodes together); each policy's own figures are in `results.json`.

## Config

```json
{json.dumps(shown, indent=2, default=str)}
```{more}
"""
    atomic_write_text(args.out / "report.md", text)
    return doc


# ---------------------------------------------------------------------------------------- plots


def plot_grouped_panels(
    path: Path,
    groups: Sequence[str],
    series: Mapping[str, Mapping[str, Mapping[str, Any]]],
    keys: Sequence[str],
    title: str,
) -> Path:
    """One panel per metric key; in each, one group of bars per ``groups`` entry and one bar per
    series (``series[label][group]`` is a metrics dict), with 95 % CI whiskers."""
    colors = ("#1f6fd1", "#e67e22", "#2e9e44", "#8e44ad", "#c0392b", "#17a2b8", "#7f7f7f", "#d4ac0d")
    fig = Figure(figsize=(3.4 * len(keys) + 0.6, 4.0), facecolor="white")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(keys), squeeze=False)[0]
    labels = list(series)
    width = 0.8 / max(1, len(labels))
    x = np.arange(len(groups))
    for ax, key in zip(axes, keys, strict=True):
        rate, top = key.endswith("_rate"), 0.0
        for j, label in enumerate(labels):
            vals, lo, hi = [], [], []
            for g in groups:
                m = series[label].get(g, {})
                v = m.get(key)
                v = float(v) if v is not None and math.isfinite(v) else math.nan
                ci = m.get(f"{key}_ci95") or (v, v)
                vals.append(v)
                lo.append(v - ci[0] if ci[0] is not None and math.isfinite(v) else 0.0)
                hi.append(ci[1] - v if ci[1] is not None and math.isfinite(v) else 0.0)
            xs = x + (j - (len(labels) - 1) / 2) * width
            tops = np.array(vals) + np.array(hi)
            top = max(top, float(np.nanmax(tops)) if np.isfinite(tops).any() else 0.0)
            ax.bar(xs, np.nan_to_num(vals), width, color=colors[j % len(colors)], alpha=0.85, label=label)
            ax.errorbar(
                xs, vals, yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], fmt="none", ecolor="#222", capsize=3
            )
        ax.set_xticks(x, list(groups), fontsize=8)
        ax.set_title(METRIC_LABELS.get(key, key), fontsize=10)
        if rate:
            ax.set_ylim(0.0, 1.05)
        else:  # DRAC, distances: non-negative quantities
            ax.set_ylim(0.0, max(1.0, 1.1 * top))
        ax.grid(axis="y", color="#dddddd", lw=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=9, frameon=False)
    fig.suptitle(title + " (95 % CI)", fontsize=11)
    fig.tight_layout(rect=(0.0, 0.07, 1.0, 1.0))
    return save_png(fig, path, dpi=110)


def plot_intervals(
    path: Path,
    labels: Sequence[str],
    values: Sequence[float],
    cis: Sequence[Sequence[float]],
    title: str,
    ylabel: str,
    highlight: str | None = None,
    reference_lines: Sequence[float] = (),
) -> Path:
    """One bar per label with its 95 % interval as a whisker; the ``highlight`` bar in a second
    colour; dashed horizontal ``reference_lines`` (e.g. 0 and 1 for a fraction of a gap)."""
    fig = Figure(figsize=(1.1 * len(labels) + 2.5, 4.0), facecolor="white")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(labels))
    v = np.array([float(a) if a is not None and math.isfinite(a) else math.nan for a in values])
    lo = np.array([c[0] if c[0] is not None else math.nan for c in cis], dtype=float)
    hi = np.array([c[1] if c[1] is not None else math.nan for c in cis], dtype=float)
    colors = ["#e67e22" if lab == highlight else "#1f6fd1" for lab in labels]
    ax.bar(x, np.nan_to_num(v), 0.6, color=colors, alpha=0.85)
    err = np.nan_to_num(np.stack((np.maximum(v - lo, 0.0), np.maximum(hi - v, 0.0))))
    ax.errorbar(x, v, yerr=err, fmt="none", ecolor="#222", capsize=4)
    for y in reference_lines:
        ax.axhline(y, color="#888888", lw=0.9, ls="--")
    ax.set_xticks(x, list(labels), fontsize=9)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(title + " (95 % CI)", fontsize=10)
    fig.tight_layout()
    return save_png(fig, path, dpi=110)
