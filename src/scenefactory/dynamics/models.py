"""Learned dynamics models: the next abstract state from a short history of states and actions.

Every model maps a history of ``H`` steps of (abstract state, normalized action, friction) to the
state one policy step later. The abstract state is :data:`~scenefactory.grounding.dataset.STATE_FIELDS`
= (x [m], y [m], yaw [rad], speed [m/s], yaw rate [rad/s], road-wheel angle [rad]).

Frame invariance is built in: inputs are expressed relative to the current pose and outputs are
deltas in the current body frame, so translating or rotating a whole history leaves the prediction
(in the body frame) unchanged. Per history step the ``F = 10`` input features are
(:data:`FEATURES`)::

    dx_b, dy_b      past position relative to the current one, in the current body frame [m]
    cos Δψ, sin Δψ  past heading relative to the current one
    v, r, δ         speed [m/s], yaw rate [rad/s], road-wheel angle [rad], as they are
    a_steer, a_acc  the normalized action applied at that step, in [-1, 1]
    μ               road friction

and the 6 outputs (:data:`DELTAS`) are ``(dx_b [m], dy_b [m], dψ [rad], dv [m/s], dr [rad/s],
dδ [rad])`` over one step: the next position in the current body frame, and the changes of the
other fields (dψ wrapped to [-π, π)). History index ``H - 1`` is the current step, ``0`` the oldest.

Inputs and outputs are normalized with statistics fitted on the training set
(:meth:`DynamicsModel.fit_normalization`) and stored as buffers, so a saved state dict is complete.
The residual model adds a learned correction to the kinematic bicycle
(:func:`~scenefactory.engines.kinematic.bicycle_step`) rather than predicting the deltas from scratch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import torch
from torch import nn

from scenefactory.dynamics.bicycle import bicycle_step, wrap_angle
from scenefactory.errors import UserError
from scenefactory.vehicles.params import VehicleParams, actions_to_controls

FEATURES = (
    "dx_b_m",
    "dy_b_m",
    "cos_dyaw",
    "sin_dyaw",
    "speed_mps",
    "yaw_rate_radps",
    "steer_rad",
    "action_steer",
    "action_accel",
    "friction",
)
DELTAS = ("dx_b_m", "dy_b_m", "dyaw_rad", "dspeed_mps", "dyaw_rate_radps", "dsteer_rad")
NUM_FEATURES = len(FEATURES)
NUM_DELTAS = len(DELTAS)
_SPEED, _YAW_RATE, _STEER, _ACTION = 4, 5, 6, slice(7, 9)
# Features whose training std is below this are centred but not scaled (e.g. the current step's
# relative position, always 0), so float noise on them is never amplified.
_MIN_INPUT_STD = 1e-3
# Output scales are floored here: a residual that is (almost) exactly zero must not divide by ~0.
_MIN_OUTPUT_STD = 1e-4


class ModelKind(StrEnum):
    """The learned dynamics model families."""

    MLP = "mlp"
    GRU = "gru"
    TRANSFORMER = "transformer"
    RESIDUAL = "residual"


def model_kind(name: str) -> ModelKind:
    """Parse a model kind name; a :class:`UserError` listing the choices if it is unknown."""
    try:
        return ModelKind(name)
    except ValueError:
        choices = ", ".join(k.value for k in ModelKind)
        raise UserError(f"unknown dynamics model kind {name!r}; choose one of: {choices}") from None


_DEFAULT_HISTORY = {ModelKind.MLP: 1, ModelKind.RESIDUAL: 1, ModelKind.GRU: 8, ModelKind.TRANSFORMER: 8}


@dataclass(frozen=True)
class DynamicsModelConfig:
    """Architecture of a learned dynamics model.

    - ``kind``: the family (:class:`ModelKind`).
    - ``history_len``: history steps ``H``; ``None`` → 1 for mlp/residual, 8 for gru/transformer
      (see :attr:`history_steps`). The MLP is Markov (``H = 1`` only); the residual model flattens
      its history into its correction network.
    - ``hidden_size``, ``num_layers``: width and depth of the MLP / GRU / Transformer encoder.
    - ``num_heads``: attention heads of the Transformer (must divide ``hidden_size``).
    - ``dt_s``: policy step [s]; ``vehicle``: the car's limits. Both are needed by the residual
      model's bicycle prior and are recorded for every kind; ``None`` means "take them from the
      dataset" (:func:`scenefactory.grounding.fit.fit_dynamics` fills them in).
    """

    kind: ModelKind = ModelKind.MLP
    history_len: int | None = None
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    dt_s: float | None = None
    vehicle: VehicleParams | None = field(default=None)

    def __post_init__(self) -> None:
        """Reject inconsistent architectures at construction."""
        if not isinstance(self.kind, ModelKind):
            raise UserError(f"DynamicsModelConfig.kind must be a ModelKind, got {self.kind!r}")
        if self.history_len is not None and self.history_len < 1:
            raise UserError(f"history_len must be at least 1, got {self.history_len}")
        if self.kind is ModelKind.MLP and self.history_steps != 1:
            raise UserError(f"the mlp model is Markov (history_len 1), got history_len {self.history_len}")
        if self.hidden_size < 1 or self.num_layers < 1:
            raise UserError(
                f"hidden_size and num_layers must be positive, got {self.hidden_size}, {self.num_layers}"
            )
        if self.kind is ModelKind.TRANSFORMER and (self.num_heads < 1 or self.hidden_size % self.num_heads):
            raise UserError(f"num_heads {self.num_heads} must divide hidden_size {self.hidden_size}")
        if self.dt_s is not None and not self.dt_s > 0.0:
            raise UserError(f"dt_s must be positive, got {self.dt_s}")

    @property
    def history_steps(self) -> int:
        """The history length ``H`` actually used."""
        return self.history_len if self.history_len is not None else _DEFAULT_HISTORY[self.kind]


# ---------------------------------------------------------------------------------------------------
# Frames: features, deltas and their inverse
# ---------------------------------------------------------------------------------------------------


def _rotate(xy: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``xy`` (..., 2) by ``angle`` (...) counter-clockwise."""
    c, s = torch.cos(angle), torch.sin(angle)
    return torch.stack((c * xy[..., 0] - s * xy[..., 1], s * xy[..., 0] + c * xy[..., 1]), dim=-1)


def history_features(states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor) -> torch.Tensor:
    """Frame-invariant model inputs (B, H, F) from a world-frame history.

    ``states`` (B, H, 6) abstract states (oldest first, last = current), ``actions`` (B, H, 2)
    normalized actions applied at each step, ``friction`` (B,) road μ. See the module docstring
    for the feature list.
    """
    if states.dim() != 3 or states.shape[-1] != 6:
        raise ValueError(f"states must be (B, H, 6), got {tuple(states.shape)}")
    if tuple(actions.shape) != (*states.shape[:2], 2) or tuple(friction.shape) != states.shape[:1]:
        raise ValueError(
            f"actions must be {(*states.shape[:2], 2)} and friction {tuple(states.shape[:1])}, "
            f"got {tuple(actions.shape)} and {tuple(friction.shape)}"
        )
    cur = states[:, -1:, :]
    rel_xy = _rotate(states[..., :2] - cur[..., :2], -cur[..., 2])
    dyaw = states[..., 2] - cur[..., 2]
    mu = friction[:, None, None].expand(-1, states.shape[1], 1)
    return torch.cat(
        (rel_xy, torch.cos(dyaw)[..., None], torch.sin(dyaw)[..., None], states[..., 3:6], actions, mu),
        dim=-1,
    )


def body_deltas(state: torch.Tensor, next_state: torch.Tensor) -> torch.Tensor:
    """One-step deltas (B, 6) in the body frame of ``state`` (B, 6) that lead to ``next_state`` (B, 6)."""
    dxy = _rotate(next_state[:, :2] - state[:, :2], -state[:, 2])
    dyaw = wrap_angle(next_state[:, 2] - state[:, 2])
    return torch.cat((dxy, dyaw[:, None], next_state[:, 3:6] - state[:, 3:6]), dim=-1)


def apply_deltas(state: torch.Tensor, deltas: torch.Tensor) -> torch.Tensor:
    """The world-frame next state (B, 6) from ``state`` (B, 6) and body-frame ``deltas`` (B, 6).

    Inverse of :func:`body_deltas`; no clipping (a model that predicts a negative speed shows it).
    """
    xy = state[:, :2] + _rotate(deltas[:, :2], state[:, 2])
    yaw = wrap_angle(state[:, 2] + deltas[:, 2])
    return torch.cat((xy, yaw[:, None], state[:, 3:6] + deltas[:, 3:6]), dim=-1)


def bicycle_deltas(features: torch.Tensor, params: VehicleParams, dt_s: float) -> torch.Tensor:
    """Body-frame deltas (B, 6) the kinematic bicycle predicts from the last step of ``features`` (B, H, F).

    Runs :func:`~scenefactory.engines.kinematic.bicycle_step` from the origin of the body frame
    with the current speed, road-wheel angle and action; friction is ignored (as by that tier).
    """
    cur = features[:, -1, :]
    speed, steer, yaw_rate = cur[:, _SPEED], cur[:, _STEER], cur[:, _YAW_RATE]
    steer_target, accel_cmd = actions_to_controls(cur[:, _ACTION], params)
    zero = torch.zeros_like(speed)
    pos, yaw, new_speed, new_steer, _, new_yaw_rate, _ = bicycle_step(
        torch.zeros_like(cur[:, :2]), zero, speed, steer, steer_target, accel_cmd, params, dt_s
    )
    return torch.cat(
        (
            pos,
            yaw[:, None],
            (new_speed - speed)[:, None],
            (new_yaw_rate - yaw_rate)[:, None],
            (new_steer - steer)[:, None],
        ),
        dim=-1,
    )


# ---------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------


def _mlp(in_size: int, hidden: int, layers: int, out_size: int) -> nn.Sequential:
    mods: list[nn.Module] = []
    size = in_size
    for _ in range(layers):
        mods += [nn.Linear(size, hidden), nn.SiLU()]
        size = hidden
    mods.append(nn.Linear(size, out_size))
    return nn.Sequential(*mods)


class DynamicsModel(nn.Module):
    """Common interface: normalized history in, physical body-frame deltas out.

    Subclasses implement :meth:`encode` (normalized features (B, H, F) → normalized output (B, 6))
    and may override :meth:`prior` (physical deltas added before the learned part; zero here).
    ``forward(history)`` = ``prior + out_mean + out_std · encode((history − in_mean) / in_std)``.
    """

    in_mean: torch.Tensor
    in_std: torch.Tensor
    out_mean: torch.Tensor
    out_std: torch.Tensor
    loss_scale: torch.Tensor
    fitted: torch.Tensor

    def __init__(self, cfg: DynamicsModelConfig) -> None:
        """Register the normalization buffers (identity until :meth:`fit_normalization`)."""
        super().__init__()
        if cfg.dt_s is None or cfg.vehicle is None:
            raise UserError("DynamicsModelConfig.dt_s and .vehicle must be set to build a model")
        self.cfg = cfg
        self.history_len = cfg.history_steps
        self.register_buffer("in_mean", torch.zeros(NUM_FEATURES))
        self.register_buffer("in_std", torch.ones(NUM_FEATURES))
        self.register_buffer("out_mean", torch.zeros(NUM_DELTAS))
        self.register_buffer("out_std", torch.ones(NUM_DELTAS))
        self.register_buffer("loss_scale", torch.ones(NUM_DELTAS))
        self.register_buffer("fitted", torch.tensor(False))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Normalized features (B, H, F) → normalized learned output (B, 6)."""
        raise NotImplementedError

    def prior(self, features: torch.Tensor) -> torch.Tensor:
        """Physical deltas (B, 6) the learned part corrects; zero for purely learned models."""
        return torch.zeros(features.shape[0], NUM_DELTAS, dtype=features.dtype, device=features.device)

    @torch.no_grad()
    def fit_normalization(self, features: torch.Tensor, deltas: torch.Tensor) -> None:
        """Fit input statistics on ``features`` (N, H, F) and output statistics on what the learned
        part must produce, ``deltas − prior`` (N, 6); ``loss_scale`` is the std of ``deltas``."""
        self._check(features)
        flat = features.reshape(-1, NUM_FEATURES)
        in_std = flat.std(0)
        self.in_mean.copy_(flat.mean(0))
        self.in_std.copy_(torch.where(in_std < _MIN_INPUT_STD, torch.ones_like(in_std), in_std))
        resid = deltas - self.prior(features)
        self.out_mean.copy_(resid.mean(0))
        self.out_std.copy_(resid.std(0).clamp_min(_MIN_OUTPUT_STD))
        self.loss_scale.copy_(deltas.std(0).clamp_min(_MIN_OUTPUT_STD))
        self.fitted.fill_(True)

    def _check(self, history: torch.Tensor) -> None:
        if history.dim() != 3 or history.shape[1:] != (self.history_len, NUM_FEATURES):
            raise ValueError(
                f"history must be (B, {self.history_len}, {NUM_FEATURES}), got {tuple(history.shape)}"
            )

    def forward(self, history: torch.Tensor) -> torch.Tensor:
        """Body-frame deltas (B, 6) [m, m, rad, m/s, rad/s, rad] from features ``history`` (B, H, F)."""
        self._check(history)
        if not bool(self.fitted):
            raise RuntimeError("dynamics model used before fit_normalization (normalization not fitted)")
        x = (history - self.in_mean) / self.in_std
        return self.prior(history) + self.out_mean + self.out_std * self.encode(x)

    def predict_next(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor
    ) -> torch.Tensor:
        """World-frame next state (B, 6) from ``states`` (B, H, 6), ``actions`` (B, H, 2), ``friction`` (B,).

        ``states`` and ``actions`` are oldest first, the last step current (see :func:`history_features`).
        """
        deltas = self(history_features(states, actions, friction))
        return apply_deltas(states[:, -1, :], deltas)


class MarkovMLP(DynamicsModel):
    """A Markov MLP on the current step's features (``H = 1``)."""

    def __init__(self, cfg: DynamicsModelConfig) -> None:
        """Build ``num_layers`` SiLU layers of ``hidden_size``."""
        super().__init__(cfg)
        self.net = _mlp(NUM_FEATURES * self.history_len, cfg.hidden_size, cfg.num_layers, NUM_DELTAS)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, F) → (B, 6)."""
        return self.net(x.flatten(1))


class HistoryGRU(DynamicsModel):
    """A GRU over the ``H`` history steps; an MLP head on its last hidden state."""

    def __init__(self, cfg: DynamicsModelConfig) -> None:
        """GRU of ``num_layers`` × ``hidden_size``, then a one-hidden-layer head."""
        super().__init__(cfg)
        self.gru = nn.GRU(NUM_FEATURES, cfg.hidden_size, cfg.num_layers, batch_first=True)
        self.head = _mlp(cfg.hidden_size, cfg.hidden_size, 1, NUM_DELTAS)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, F) → (B, 6)."""
        out, _ = self.gru(x)
        return self.head(out[:, -1, :])


class HistoryTransformer(DynamicsModel):
    """A small Transformer encoder over the ``H`` steps with a learned positional embedding.

    Each step is embedded linearly to ``hidden_size``, the positional embedding added, and the
    encoder output at the current (last) step feeds an MLP head.
    """

    def __init__(self, cfg: DynamicsModelConfig) -> None:
        """``num_layers`` pre-norm encoder layers, ``num_heads`` heads, feed-forward 2 × ``hidden_size``."""
        super().__init__(cfg)
        d = cfg.hidden_size
        self.embed = nn.Linear(NUM_FEATURES, d)
        self.pos = nn.Parameter(torch.zeros(self.history_len, d))
        nn.init.normal_(self.pos, std=0.02)
        layer = nn.TransformerEncoderLayer(
            d, cfg.num_heads, dim_feedforward=2 * d, dropout=0.0, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, cfg.num_layers, enable_nested_tensor=False)
        self.head = _mlp(d, d, 1, NUM_DELTAS)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, F) → (B, 6)."""
        h = self.encoder(self.embed(x) + self.pos)
        return self.head(h[:, -1, :])


class ResidualBicycle(DynamicsModel):
    """Kinematic bicycle prior (:func:`bicycle_deltas`) plus an MLP correction of the deltas.

    The correction's last layer starts at zero, so an untrained model is exactly the bicycle.
    """

    def __init__(self, cfg: DynamicsModelConfig) -> None:
        """An MLP over the flattened history, like :class:`MarkovMLP`, zero-initialized output."""
        super().__init__(cfg)
        self.net = _mlp(NUM_FEATURES * self.history_len, cfg.hidden_size, cfg.num_layers, NUM_DELTAS)
        last = self.net[-1]
        assert isinstance(last, nn.Linear)
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)

    def prior(self, features: torch.Tensor) -> torch.Tensor:
        """The kinematic bicycle's deltas (B, 6)."""
        assert self.cfg.vehicle is not None and self.cfg.dt_s is not None
        return bicycle_deltas(features, self.cfg.vehicle, self.cfg.dt_s)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, F) → (B, 6)."""
        return self.net(x.flatten(1))


MODEL_CLASSES: dict[ModelKind, type[DynamicsModel]] = {
    ModelKind.MLP: MarkovMLP,
    ModelKind.GRU: HistoryGRU,
    ModelKind.TRANSFORMER: HistoryTransformer,
    ModelKind.RESIDUAL: ResidualBicycle,
}


def make_model(cfg: DynamicsModelConfig) -> DynamicsModel:
    """Build the model ``cfg.kind`` names (normalization still to be fitted)."""
    return MODEL_CLASSES[cfg.kind](cfg)
