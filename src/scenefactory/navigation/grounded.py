"""The abstract engine corrected toward the Go1: one model per grounding method.

Every model maps a history of ``H = history_len`` abstract states (B, H, 6), commands (B, H, 3)
(oldest first; the last is the command being applied now) and knobs (B, NUM_KNOBS) to the next
abstract state (B, 6) (:meth:`NavModel.predict_next`); :meth:`NavModel.physics` gives the knobs of
worlds being reset. The methods are those of :class:`~scenefactory.dynamics.correctors.Method`,
carried over from the bicycle to the unicycle of :mod:`.engine`:

- ``none`` (:class:`NominalUnicycle`): the ideal point mass — direct transfer;
- ``dr`` (:class:`RandomizedUnicycle`): knobs drawn per world at reset from :class:`NavDomainRanges`;
- ``sysid`` (:class:`IdentifiedUnicycle`): gains, responses and delay fitted to Go1 data (:mod:`.fit`);
- ``markov`` (:class:`ResidualUnicycle`): the point mass's deltas plus an MLP correction of the
  current (state, command) — neural-augmented simulation;
- ``gat`` (:class:`ActionTransformed`): a forward model of the Go1 (a Markov residual) predicts
  the next state, and the point mass executes ã = clip((1 − α)·a + α·g(s, a)), where g is the
  point mass's inverse: with unit gains and responses it reaches the commanded velocity in one
  step, so the command that reaches the predicted velocity is that velocity (exact, not learned);
- ``history`` (:class:`HistoryUnicycle`): ASTRA-style — a GRU over the last H states and past
  commands (the current command blanked) gives a latent from which heads predict the correction
  of the point mass's deltas and the next latent (self-predictive objective).

Learned corrections read frame-invariant features (:func:`nav_features`: per step the position and
heading relative to the current pose in the current heading frame, the velocities and the command)
and predict heading-frame deltas (:func:`~scenefactory.dynamics.models.body_deltas`), normalized
by statistics fitted on the training transitions; their last layer starts at zero, so an untrained
correction is the point mass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from scenefactory.dynamics.correctors import Method
from scenefactory.dynamics.models import _mlp, apply_deltas
from scenefactory.errors import UserError
from scenefactory.navigation.engine import (
    DELAY,
    NUM_ACTION,
    NUM_KNOBS,
    NUM_STATE,
    CommandLimits,
    UnicycleKnobs,
    delayed_command,
    rotate,
    unicycle_deltas,
    unicycle_step,
)

NAV_FEATURES = (
    "dx_m",
    "dy_m",
    "cos_dyaw",
    "sin_dyaw",
    "vx_b_mps",
    "vy_b_mps",
    "yaw_rate_radps",
    "cmd_vx",
    "cmd_vy",
    "cmd_yaw",
)
NUM_FEATURES = len(NAV_FEATURES)
_COMMAND = slice(7, 10)
_MIN_STD = 1e-3


def nav_features(states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Frame-invariant inputs (B, H, 10) from states (B, H, 6) and commands (B, H, 3) (module docstring)."""
    if states.dim() != 3 or states.shape[-1] != NUM_STATE or actions.shape != (*states.shape[:2], NUM_ACTION):
        raise ValueError(
            "states must be (B, H, 6) and commands (B, H, 3), "
            f"got {tuple(states.shape)}, {tuple(actions.shape)}"
        )
    cur = states[:, -1:, :]
    rel = rotate(states[..., :2] - cur[..., :2], -cur[..., 2])
    dyaw = states[..., 2] - cur[..., 2]
    return torch.cat(
        (rel, torch.cos(dyaw)[..., None], torch.sin(dyaw)[..., None], states[..., 3:6], actions), dim=-1
    )


@dataclass(frozen=True)
class NavDomainRanges:
    """Uniform ranges of the knobs for domain randomization (delay: whole steps, inclusive)."""

    gain: tuple[float, float] = (0.8, 1.2)
    response: tuple[float, float] = (0.3, 1.0)
    delay_steps: tuple[int, int] = (0, 1)

    def __post_init__(self) -> None:
        """Ranges ordered and inside the knobs' domains."""
        if not 0.0 < self.gain[0] <= self.gain[1] or not 0.0 < self.response[0] <= self.response[1] <= 1.0:
            raise UserError(f"NavDomainRanges: gains must be > 0 and responses in (0, 1], got {self}")
        if not 0 <= self.delay_steps[0] <= self.delay_steps[1]:
            raise UserError(f"NavDomainRanges.delay_steps must be 0 <= low <= high, got {self.delay_steps}")

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """(n, NUM_KNOBS) draws."""
        u = torch.rand(n, NUM_KNOBS, generator=generator)
        out = torch.empty(n, NUM_KNOBS)
        out[:, 0:3] = self.gain[0] + (self.gain[1] - self.gain[0]) * u[:, 0:3]
        out[:, 3:5] = self.response[0] + (self.response[1] - self.response[0]) * u[:, 3:5]
        lo, hi = self.delay_steps
        out[:, DELAY] = torch.floor(lo + (hi - lo + 1) * u[:, DELAY]).clamp(max=hi)
        return out


class NavModel(nn.Module):
    """Common interface (module docstring); subclasses set :attr:`method` and implement
    :meth:`predict_next`."""

    method: ClassVar[Method]

    def __init__(self, dt_s: float, limits: CommandLimits, history_len: int = 1) -> None:
        """A model stepping ``dt_s`` seconds over ``history_len`` steps, commands within ``limits``."""
        super().__init__()
        if history_len < 1 or not dt_s > 0.0:
            raise ValueError(f"history_len must be >= 1 and dt_s > 0, got {history_len}, {dt_s}")
        self.dt_s, self.limits, self.history_len = float(dt_s), limits, int(history_len)

    def physics(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Knobs (n, NUM_KNOBS) for ``n`` worlds being reset: the ideal point mass unless overridden."""
        return UnicycleKnobs().to_tensor().expand(n, -1).clone()

    def predict_next(self, states: torch.Tensor, actions: torch.Tensor, phys: torch.Tensor) -> torch.Tensor:
        """Next state (B, 6) from states (B, H, 6), commands (B, H, 3), knobs (B, NUM_KNOBS)."""
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        """Method-specific settings (JSON-ready)."""
        return {}

    def _nominal(self, states: torch.Tensor, actions: torch.Tensor, phys: torch.Tensor) -> torch.Tensor:
        cmd = delayed_command(actions, phys[:, DELAY])
        return unicycle_step(states[:, -1], cmd, phys, self.dt_s)


class NominalUnicycle(NavModel):
    """Direct transfer: the ideal point mass (method ``none``)."""

    method = Method.NONE

    def predict_next(self, states: torch.Tensor, actions: torch.Tensor, phys: torch.Tensor) -> torch.Tensor:
        """One :func:`~.engine.unicycle_step` under the (delayed) command."""
        return self._nominal(states, actions, phys)


class RandomizedUnicycle(NominalUnicycle):
    """Domain randomization: every reset world draws its knobs from ``ranges``."""

    method = Method.DR

    def __init__(self, dt_s: float, limits: CommandLimits, ranges: NavDomainRanges | None = None) -> None:
        """History long enough for the longest delay."""
        ranges = ranges or NavDomainRanges()
        super().__init__(dt_s, limits, history_len=ranges.delay_steps[1] + 1)
        self.ranges = ranges

    def physics(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """A fresh draw per world."""
        return self.ranges.sample(n, generator)

    def spec(self) -> dict[str, Any]:
        """The ranges."""
        return {"ranges": asdict(self.ranges)}


class IdentifiedUnicycle(NominalUnicycle):
    """System identification: knobs fitted to Go1 data, the same in every world."""

    method = Method.SYSID

    def __init__(self, dt_s: float, limits: CommandLimits, knobs: UnicycleKnobs) -> None:
        """History long enough for the fitted delay."""
        super().__init__(dt_s, limits, history_len=knobs.delay_steps + 1)
        self.knobs = knobs

    def physics(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """The fitted knobs for every world."""
        return self.knobs.to_tensor().expand(n, -1).clone()

    def spec(self) -> dict[str, Any]:
        """The fitted knobs."""
        return {"knobs": asdict(self.knobs)}


class CorrectionNet(nn.Module):
    """Normalization shared by the learned corrections: ``deltas = prior + out_mean + out_std · f(x)``
    with ``x = (features − in_mean) / in_std``; ``loss_scale``: the std of the deltas (the loss's units)."""

    in_mean: torch.Tensor
    in_std: torch.Tensor
    out_mean: torch.Tensor
    out_std: torch.Tensor
    loss_scale: torch.Tensor

    def __init__(self, dt_s: float) -> None:
        """Identity statistics until :meth:`fit_normalization`."""
        super().__init__()
        self.dt_s = dt_s
        for name, size in (
            ("in_mean", NUM_FEATURES),
            ("in_std", NUM_FEATURES),
            ("out_mean", 6),
            ("out_std", 6),
            ("loss_scale", 6),
        ):
            self.register_buffer(name, torch.zeros(size) if name.endswith("mean") else torch.ones(size))
        self._nominal = UnicycleKnobs().to_tensor()

    def prior(self, features: torch.Tensor) -> torch.Tensor:
        """The ideal point mass's deltas (B, 6) from the current step of ``features`` (B, H, F)."""
        cur = features[:, -1]
        state = torch.cat((torch.zeros_like(cur[:, :3]), cur[:, 4:7]), dim=-1)
        return unicycle_deltas(state, cur[:, _COMMAND], self._nominal.expand(len(cur), -1), self.dt_s)

    @torch.no_grad()
    def fit_normalization(self, features: torch.Tensor, deltas: torch.Tensor) -> None:
        """Statistics from training ``features`` (N, H, F) and ``deltas`` (N, 6)."""
        flat = features.reshape(-1, NUM_FEATURES)
        std = flat.std(0)
        self.in_mean.copy_(flat.mean(0))
        self.in_std.copy_(torch.where(std < _MIN_STD, torch.ones_like(std), std))
        resid = deltas - self.prior(features)
        self.out_mean.copy_(resid.mean(0))
        self.out_std.copy_(resid.std(0).clamp_min(1e-4))
        self.loss_scale.copy_(deltas.std(0).clamp_min(1e-4))

    def normalize(self, features: torch.Tensor) -> torch.Tensor:
        """(B, H, F) normalized."""
        return (features - self.in_mean) / self.in_std

    def deltas(self, features: torch.Tensor, correction: torch.Tensor) -> torch.Tensor:
        """Physical deltas (B, 6) from the normalized ``correction`` (B, 6)."""
        return self.prior(features) + self.out_mean + self.out_std * correction


def _zero_last(net: nn.Sequential) -> nn.Sequential:
    last = net[-1]
    assert isinstance(last, nn.Linear)
    nn.init.zeros_(last.weight)
    nn.init.zeros_(last.bias)
    return net


class MarkovNet(CorrectionNet):
    """An MLP correction of the current step's features (H = 1)."""

    def __init__(self, dt_s: float, hidden_size: int = 64, num_layers: int = 2) -> None:
        """``num_layers`` × ``hidden_size`` SiLU layers, zero-initialized output."""
        super().__init__(dt_s)
        self.net = _zero_last(_mlp(NUM_FEATURES, hidden_size, num_layers, 6))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Physical deltas (B, 6) from features (B, 1, F)."""
        return self.deltas(features, self.net(self.normalize(features)[:, -1]))


class ResidualUnicycle(NavModel):
    """Neural-augmented simulation: point-mass deltas + a Markov MLP correction (method ``markov``)."""

    method = Method.MARKOV

    def __init__(
        self, dt_s: float, limits: CommandLimits, hidden_size: int = 64, num_layers: int = 2
    ) -> None:
        """A :class:`MarkovNet`."""
        super().__init__(dt_s, limits, history_len=1)
        self.net = MarkovNet(dt_s, hidden_size, num_layers)

    def predict_next(self, states: torch.Tensor, actions: torch.Tensor, phys: torch.Tensor) -> torch.Tensor:
        """The corrected next state (the knobs are unused)."""
        return apply_deltas(states[:, -1], self.net(nav_features(states[:, -1:], actions[:, -1:])))


class ActionTransformed(NavModel):
    """GAT: the point mass executes ã = clip((1 − α)·a + α·g(s, a)) (module docstring)."""

    method = Method.GAT

    def __init__(
        self,
        dt_s: float,
        limits: CommandLimits,
        alpha: float = 0.5,
        hidden_size: int = 64,
        num_layers: int = 2,
    ) -> None:
        """Forward model: a :class:`MarkovNet` fitted on Go1 data."""
        super().__init__(dt_s, limits, history_len=1)
        if not 0.0 <= alpha <= 1.0:
            raise UserError(f"the GAT smoothing alpha must lie in [0, 1], got {alpha}")
        self.alpha = float(alpha)
        self.forward_model = MarkovNet(dt_s, hidden_size, num_layers)

    def transformed_command(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """ã (B, 3) for the current state and command."""
        target = apply_deltas(
            states[:, -1], self.forward_model(nav_features(states[:, -1:], actions[:, -1:]))
        )
        a = actions[:, -1]
        return self.limits.clip((1.0 - self.alpha) * a + self.alpha * target[:, 3:6])

    def predict_next(self, states: torch.Tensor, actions: torch.Tensor, phys: torch.Tensor) -> torch.Tensor:
        """The point mass under the transformed command."""
        return unicycle_step(states[:, -1], self.transformed_command(states, actions), phys, self.dt_s)

    def spec(self) -> dict[str, Any]:
        """α."""
        return {"alpha": self.alpha}


class HistoryNet(CorrectionNet):
    """GRU latent over the history (current command blanked); heads on (z_t, a_t): the normalized
    correction (zero-initialized) and the next latent ẑ_{t+1}."""

    def __init__(self, dt_s: float, hidden_size: int = 64, num_layers: int = 1) -> None:
        """A GRU of ``num_layers`` × ``hidden_size`` and two one-hidden-layer heads."""
        super().__init__(dt_s)
        d = hidden_size
        self.gru = nn.GRU(NUM_FEATURES, d, num_layers, batch_first=True)
        self.state_head = _zero_last(_mlp(d + NUM_ACTION, d, 1, 6))
        self.latent_head = _mlp(d + NUM_ACTION, d, 1, d)

    def latent(self, x: torch.Tensor) -> torch.Tensor:
        """z_t (B, d) from normalized features (B, H, F)."""
        x = x.clone()
        x[:, -1, _COMMAND] = 0.0
        out, _ = self.gru(x)
        return out[:, -1]

    def heads(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """From physical features (B, H, F): ``(deltas (B, 6), z_t, ẑ_{t+1})``."""
        x = self.normalize(features)
        z = self.latent(x)
        inp = torch.cat((z, x[:, -1, _COMMAND]), dim=-1)
        return self.deltas(features, self.state_head(inp)), z, self.latent_head(inp)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Physical deltas (B, 6)."""
        return self.heads(features)[0]


class HistoryUnicycle(NavModel):
    """The history-conditioned correction (method ``history``)."""

    method = Method.HISTORY

    def __init__(
        self, dt_s: float, limits: CommandLimits, history_len: int = 8, hidden_size: int = 64
    ) -> None:
        """A :class:`HistoryNet` over ``history_len`` steps."""
        super().__init__(dt_s, limits, history_len=history_len)
        self.net = HistoryNet(dt_s, hidden_size)

    def predict_next(self, states: torch.Tensor, actions: torch.Tensor, phys: torch.Tensor) -> torch.Tensor:
        """The corrected next state."""
        return apply_deltas(states[:, -1], self.net(nav_features(states, actions)))

    def spec(self) -> dict[str, Any]:
        """History length."""
        return {"history_len": self.history_len}
