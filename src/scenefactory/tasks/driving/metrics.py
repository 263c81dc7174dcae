"""Safety and success metrics over finished agent-episodes, with 95 % confidence intervals.

Rates (goal reach, collision, off-road, time-out, high DRAC, near miss) are fractions of
agent-episodes with Wilson score intervals; means (peak DRAC, minimum TTC, route progress) carry a
normal-approximation interval (mean ± 1.96·s/√n).

- peak DRAC of an agent-episode: the largest DRAC [m/s²] it met against any other agent at any step
  (see ``tasks.driving.geometry.pairwise_drac``); ``high_drac_rate`` counts peaks above 3.4 m/s².
- minimum TTC: the smallest time-to-collision [s] it had with any agent; ``near_miss_rate`` counts
  episodes whose minimum TTC fell below 2 s (a collision counts as TTC 0).
- log divergence: mean distance [m] between the simulated and the logged position over the steps
  the agent's log covers (scenes from driving logs only; ``episodes_with_log`` counts them).
- ``red_light_violation_rate``: agent-episodes that crossed a signal's stop point on red at least
  once; ``stop_sign_violation_rate``: that crossed a stop sign's stop line without having stopped
  (rules in :mod:`scenefactory.tasks.driving.signals`). Both are fractions of all agent-episodes;
  ``episodes_crossing_signals`` / ``episodes_crossing_stop_signs`` count the agent-episodes that
  crossed at least one such stop line (the ones that could violate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from scenefactory.stats import mean_interval, wilson_interval
from scenefactory.tasks.driving.env import SIGNAL_COUNTS, FinishedEpisodes
from scenefactory.tasks.driving.status import AgentStatus

HIGH_DRAC_MPS2 = 3.4
NEAR_MISS_TTC_S = 2.0


@dataclass
class EpisodeLog:
    """Accumulates :class:`FinishedEpisodes` records (CPU tensors) across steps."""

    parts: list[FinishedEpisodes] = field(default_factory=list)

    def add(self, finished: FinishedEpisodes, keep: torch.Tensor | None = None) -> None:
        """Append records; ``keep`` (n,) bool selects a subset (e.g. first-pass scenes in evaluation)."""
        if finished.outcome.numel() == 0:
            return
        if keep is not None:
            finished = FinishedEpisodes(**{k: v[keep] for k, v in vars(finished).items()})
        self.parts.append(FinishedEpisodes(**{k: v.detach().cpu() for k, v in vars(finished).items()}))

    def cat(self) -> FinishedEpisodes:
        """All records as one :class:`FinishedEpisodes`."""
        if not self.parts:
            longs = {"outcome", "steps", "world", "agent", "serial", "scene_id", *SIGNAL_COUNTS}
            names = FinishedEpisodes.__dataclass_fields__
            return FinishedEpisodes(
                **{n: torch.zeros(0, dtype=torch.long if n in longs else None) for n in names}
            )
        return FinishedEpisodes(
            **{k: torch.cat([getattr(p, k) for p in self.parts]) for k in vars(self.parts[0])}
        )

    def __len__(self) -> int:
        """Number of agent-episodes recorded."""
        return sum(int(p.outcome.numel()) for p in self.parts)

    def clear(self) -> None:
        """Forget every record."""
        self.parts.clear()


def summarize(records: FinishedEpisodes) -> dict[str, Any]:
    """The metrics dictionary (keys as in ``metrics.json``), with ``*_ci95`` pairs for every figure."""
    n = int(records.outcome.numel())
    out: dict[str, Any] = {"episodes": n}

    def rate(name: str, mask: torch.Tensor) -> None:
        k = int(mask.sum())
        out[name] = k / n if n else math.nan
        out[f"{name}_ci95"] = list(wilson_interval(k, n))

    def mean(name: str, values: torch.Tensor) -> None:
        m, lo, hi = mean_interval(values)
        out[name] = m
        out[f"{name}_ci95"] = [lo, hi]

    o = records.outcome
    rate("goal_reach_rate", o == int(AgentStatus.GOAL))
    rate("collision_rate", o == int(AgentStatus.COLLISION))
    rate("offroad_rate", o == int(AgentStatus.OFFROAD))
    rate("timeout_rate", o == int(AgentStatus.TIMEOUT))
    mean("mean_peak_drac_mps2", records.peak_drac_mps2)
    rate("high_drac_rate", records.peak_drac_mps2 > HIGH_DRAC_MPS2)
    ttc = torch.where(o == int(AgentStatus.COLLISION), torch.zeros_like(records.min_ttc_s), records.min_ttc_s)
    finite = ttc[torch.isfinite(ttc)]
    out["min_ttc_s"] = float(finite.min()) if finite.numel() else math.inf
    mean("mean_min_ttc_s", finite)
    out["episodes_with_ttc"] = int(finite.numel())
    rate("near_miss_rate", ttc < NEAR_MISS_TTC_S)
    mean("route_progress", records.progress_frac)
    div = records.log_divergence_m[torch.isfinite(records.log_divergence_m)]
    mean("log_divergence_m", div)
    out["episodes_with_log"] = int(div.numel())
    mean("episode_length_steps", records.steps.float())
    rate("red_light_violation_rate", records.red_light_violations > 0)
    rate("stop_sign_violation_rate", records.stop_sign_violations > 0)
    out["episodes_crossing_signals"] = int((records.signals_crossed > 0).sum())
    out["episodes_crossing_stop_signs"] = int((records.stop_signs_crossed > 0).sum())
    return out
