"""What the learned and the grounded tiers run: a model that steps an abstract state from its history.

A :class:`HistoryModel` maps the last ``H = history_len`` abstract states (N, H, 6) and the actions
applied at them (N, H, 2) (oldest first; the last action is the one being applied now), the road
friction (N,) and per-agent physical knobs (N, P) to the state one step of ``dt_s`` later (N, 6),
and may estimate the step's reward. The knobs are drawn per world when it resets
(:meth:`HistoryModel.physics`); a model without knobs returns P = 0 columns.
:class:`~scenefactory.engines.history.HistoryEngine` keeps the histories and runs the model in batch.

- every grounded model (:class:`~scenefactory.dynamics.correctors.GroundedModel`) is one: its knobs
  are :data:`~scenefactory.dynamics.physics.PHYS_FIELDS`, and the ``history`` method's reward head
  gives the reward estimate;
- a learned dynamics model (:class:`~scenefactory.dynamics.models.DynamicsModel`) is one through
  :class:`LearnedHistoryModel`: no knobs, no reward.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from scenefactory.dynamics.models import DynamicsModel


@runtime_checkable
class HistoryModel(Protocol):
    """A next-state model over a short history (module docstring)."""

    history_len: int
    """``H``: the states and actions each prediction reads."""
    dt_s: float
    """The step the model predicts [s]."""

    def physics(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Knobs (n, P) for ``n`` worlds being reset (a draw from ``generator``, or constants)."""
        ...

    def predict(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor, phys: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(next state (N, 6), reward estimate (N,) or None)`` from ``states`` (N, H, 6),
        ``actions`` (N, H, 2), ``friction`` (N,) and knobs ``phys`` (N, P)."""
        ...


class LearnedHistoryModel:
    """A fitted :class:`~scenefactory.dynamics.models.DynamicsModel` as a :class:`HistoryModel`."""

    def __init__(self, model: DynamicsModel) -> None:
        """Wrap ``model``; its config must record its step ``dt_s`` (every fitted model's does)."""
        if model.cfg.dt_s is None:
            raise ValueError("the dynamics model's config has no dt_s: it cannot run as an engine")
        self.model = model
        self.history_len = model.history_len
        self.dt_s = float(model.cfg.dt_s)

    def physics(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """No knobs: (n, 0)."""
        return torch.zeros(n, 0)

    def predict(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor, phys: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        """:meth:`DynamicsModel.predict_next` (the model reads no knobs and estimates no reward)."""
        return self.model.predict_next(states, actions, friction), None
