"""Grounded dynamics: the kinematic bicycle corrected toward a target, one class per method.

Every grounded model maps a history of ``H = history_len`` abstract states (B, H, 6), actions
(B, H, 2) (oldest first; the last action is the one being applied now), road friction (B,) and the
physical knobs ``phys`` (B, :data:`~scenefactory.dynamics.physics.NUM_PHYS`) to the next abstract
state (B, 6) — :meth:`GroundedModel.predict_next`; :meth:`GroundedModel.predict` adds the reward
estimate where a method has one, making every grounded model a
:class:`~scenefactory.dynamics.history.HistoryModel`. :meth:`GroundedModel.physics` says which knobs a
world gets at reset: constants, or a draw for domain randomization. The methods:

- ``none`` (:class:`PhysicalBicycle` with the kinematic knobs): direct transfer, the baseline row;
- ``dr`` (:class:`RandomizedBicycle`): knobs drawn per world at reset from
  :class:`~scenefactory.dynamics.physics.DomainRanges`; no target data;
- ``sysid`` (:class:`IdentifiedBicycle`): knobs fitted to target data (``grounding.sysid``);
- ``markov`` (:class:`MarkovCorrection`): neural-augmented simulation — the bicycle's next state plus a
  learned correction of (state, action) (:class:`~scenefactory.dynamics.models.ResidualBicycle`, H = 1);
- ``gat`` (:class:`ActionTransformation`): grounded action transformation — a forward model
  fitted on target data predicts the target's next state, an inverse model fitted on bicycle data
  returns the bicycle action that reaches it, and the bicycle executes
  ã = (1 − α)·a + α·g(s, a);
- ``history`` (:class:`HistoryCorrection`): ASTRA-style — a GRU over the last H states and past
  actions gives a latent (an approximate information state) from which heads predict the
  correction of the bicycle's next state, the reward and the next latent.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

import torch
from torch import nn

from scenefactory.dynamics.models import (
    _ACTION,
    NUM_DELTAS,
    NUM_FEATURES,
    DynamicsModel,
    DynamicsModelConfig,
    ModelKind,
    ResidualBicycle,
    _mlp,
    apply_deltas,
    bicycle_deltas,
    body_deltas,
    history_features,
)
from scenefactory.dynamics.physics import (
    DELAY,
    BicycleCorrection,
    DomainRanges,
    corrected_bicycle_step,
    delayed_action,
)
from scenefactory.errors import UserError
from scenefactory.vehicles.params import VehicleParams


class Method(StrEnum):
    """The grounding methods."""

    NONE = "none"
    DR = "dr"
    SYSID = "sysid"
    MARKOV = "markov"
    GAT = "gat"
    HISTORY = "history"


def method_from_name(name: str) -> Method:
    """Parse a method name; a :class:`UserError` listing the choices if it is unknown."""
    try:
        return Method(name)
    except ValueError:
        choices = ", ".join(m.value for m in Method)
        raise UserError(f"unknown grounding method {name!r}; choose one of: {choices}") from None


class GroundedModel(nn.Module):
    """Common interface (see the module docstring). Subclasses set :attr:`method` and implement
    :meth:`predict_next`; :meth:`spec` / :meth:`from_spec` are their JSON form (weights apart)."""

    method: ClassVar[Method]

    def __init__(self, vehicle: VehicleParams, dt_s: float, history_len: int = 1) -> None:
        """A model for ``vehicle`` stepping ``dt_s`` seconds that reads ``history_len`` steps."""
        super().__init__()
        if history_len < 1 or not dt_s > 0.0:
            raise ValueError(f"history_len must be >= 1 and dt_s > 0, got {history_len}, {dt_s}")
        self.vehicle, self.dt_s, self.history_len = vehicle, float(dt_s), int(history_len)

    def physics(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Knobs (n, NUM_PHYS) for ``n`` worlds being reset: the kinematic tier's unless overridden."""
        return BicycleCorrection().to_tensor(self.vehicle).expand(n, -1).clone()

    def predict_next(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor, phys: torch.Tensor
    ) -> torch.Tensor:
        """Next abstract state (B, 6); inputs (B, H, 6), (B, H, 2), (B,), (B, NUM_PHYS)."""
        raise NotImplementedError

    def predict(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor, phys: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(next state (B, 6), reward estimate (B,) or None)``: the
        :class:`~scenefactory.dynamics.history.HistoryModel` step; only ``history`` estimates rewards."""
        return self.predict_next(states, actions, friction, phys), None

    def spec(self) -> dict[str, Any]:
        """Method-specific settings (JSON-ready); the weights travel separately."""
        return {}

    @classmethod
    def from_spec(cls, vehicle: VehicleParams, dt_s: float, spec: dict[str, Any]) -> GroundedModel:
        """Rebuild from :meth:`spec` (weights still to be loaded)."""
        return cls(vehicle, dt_s)

    def _check(self, states: torch.Tensor, actions: torch.Tensor) -> None:
        h = self.history_len
        if states.dim() != 3 or states.shape[1:] != (h, 6) or actions.shape != (*states.shape[:2], 2):
            raise ValueError(
                f"{self.method.value} needs states (B, {h}, 6) and actions (B, {h}, 2), "
                f"got {tuple(states.shape)} and {tuple(actions.shape)}"
            )


class PhysicalBicycle(GroundedModel):
    """The corrected bicycle with the kinematic knobs: direct transfer (method ``none``)."""

    method = Method.NONE

    def predict_next(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor, phys: torch.Tensor
    ) -> torch.Tensor:
        """One :func:`~scenefactory.dynamics.physics.corrected_bicycle_step` under the delayed action."""
        self._check(states, actions)
        act = delayed_action(actions, phys[:, DELAY])
        return corrected_bicycle_step(states[:, -1], act, friction, phys, self.vehicle, self.dt_s)


class RandomizedBicycle(PhysicalBicycle):
    """Domain randomization: every reset world draws its knobs from ``ranges``."""

    method = Method.DR

    def __init__(self, vehicle: VehicleParams, dt_s: float, ranges: DomainRanges | None = None) -> None:
        """History long enough for the longest delay in ``ranges``."""
        ranges = ranges or DomainRanges()
        super().__init__(vehicle, dt_s, history_len=ranges.max_delay_steps + 1)
        self.ranges = ranges

    def physics(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """A fresh draw per world."""
        return self.ranges.sample(n, generator)

    def spec(self) -> dict[str, Any]:
        """The ranges."""
        return {"ranges": self.ranges.to_dict()}

    @classmethod
    def from_spec(cls, vehicle: VehicleParams, dt_s: float, spec: dict[str, Any]) -> RandomizedBicycle:
        """Rebuild from the ranges."""
        return cls(vehicle, dt_s, DomainRanges.from_dict(spec["ranges"]))


class IdentifiedBicycle(PhysicalBicycle):
    """System identification: the knobs fitted to target data, the same for every world."""

    method = Method.SYSID

    def __init__(self, vehicle: VehicleParams, dt_s: float, correction: BicycleCorrection) -> None:
        """History long enough for the fitted delay."""
        super().__init__(vehicle, dt_s, history_len=correction.delay_steps + 1)
        self.correction = correction
        self._phys = correction.to_tensor(vehicle)

    def physics(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """The fitted knobs for every world."""
        return self._phys.expand(n, -1).clone()

    def spec(self) -> dict[str, Any]:
        """The fitted values."""
        return {"physics": vars(self.correction).copy()}

    @classmethod
    def from_spec(cls, vehicle: VehicleParams, dt_s: float, spec: dict[str, Any]) -> IdentifiedBicycle:
        """Rebuild from the fitted values."""
        return cls(vehicle, dt_s, BicycleCorrection(**spec["physics"]))


def _net_config(
    vehicle: VehicleParams, dt_s: float, net: dict[str, Any], kind: ModelKind
) -> DynamicsModelConfig:
    return DynamicsModelConfig(
        kind=kind,
        history_len=int(net.get("history_len", 1)),
        hidden_size=int(net["hidden_size"]),
        num_layers=int(net["num_layers"]),
        dt_s=dt_s,
        vehicle=vehicle,
    )


class MarkovCorrection(GroundedModel):
    """Neural-augmented simulation: bicycle deltas + an MLP correction of the current (state, action)."""

    method = Method.MARKOV

    def __init__(
        self, vehicle: VehicleParams, dt_s: float, hidden_size: int = 64, num_layers: int = 2
    ) -> None:
        """A :class:`~scenefactory.dynamics.models.ResidualBicycle` with H = 1 (zero correction at start)."""
        super().__init__(vehicle, dt_s, history_len=1)
        net = {"hidden_size": hidden_size, "num_layers": num_layers}
        self.net = ResidualBicycle(_net_config(vehicle, dt_s, net, ModelKind.RESIDUAL))

    def predict_next(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor, phys: torch.Tensor
    ) -> torch.Tensor:
        """The corrected next state (the knobs are the kinematic ones and unused)."""
        self._check(states, actions)
        return self.net.predict_next(states, actions, friction)

    def spec(self) -> dict[str, Any]:
        """Network size."""
        return {"network": {"hidden_size": self.net.cfg.hidden_size, "num_layers": self.net.cfg.num_layers}}

    @classmethod
    def from_spec(cls, vehicle: VehicleParams, dt_s: float, spec: dict[str, Any]) -> MarkovCorrection:
        """Rebuild the network."""
        return cls(vehicle, dt_s, **spec["network"])


# --------------------------------------------------------------------------------------------- GAT

INVERSE_FEATURES = 10
"""Inverse-model inputs: speed, yaw rate, road-wheel angle, μ, and the 6 body-frame deltas to reach."""


class InverseModel(nn.Module):
    """f_sim⁻¹: the normalized action (B, 2) that takes the bicycle from ``state`` to ``next_state``.

    Inputs (:data:`INVERSE_FEATURES`): the current speed, yaw rate and road-wheel angle, the road
    friction, and :func:`~scenefactory.dynamics.models.body_deltas` to the wanted next state,
    normalized by statistics fitted on the bicycle data; output squashed to [-1, 1] by tanh.
    """

    in_mean: torch.Tensor
    in_std: torch.Tensor

    def __init__(self, hidden_size: int = 64, num_layers: int = 2) -> None:
        """An MLP of ``num_layers`` × ``hidden_size``."""
        super().__init__()
        self.hidden_size, self.num_layers = hidden_size, num_layers
        self.net = _mlp(INVERSE_FEATURES, hidden_size, num_layers, 2)
        self.register_buffer("in_mean", torch.zeros(INVERSE_FEATURES))
        self.register_buffer("in_std", torch.ones(INVERSE_FEATURES))

    @staticmethod
    def features(state: torch.Tensor, next_state: torch.Tensor, friction: torch.Tensor) -> torch.Tensor:
        """(B, INVERSE_FEATURES) from ``state`` (B, 6), ``next_state`` (B, 6), ``friction`` (B,)."""
        return torch.cat((state[:, 3:6], friction[:, None], body_deltas(state, next_state)), dim=-1)

    @torch.no_grad()
    def fit_normalization(self, features: torch.Tensor) -> None:
        """Input statistics from training ``features`` (N, INVERSE_FEATURES)."""
        self.in_mean.copy_(features.mean(0))
        self.in_std.copy_(features.std(0).clamp_min(1e-3))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Normalized action (B, 2) in [-1, 1]."""
        return torch.tanh(self.net((features - self.in_mean) / self.in_std))


class ActionTransformation(GroundedModel):
    """GAT: the bicycle executes ã = clip((1 − α)·a + α·f_sim⁻¹(s, f_target(s, a)), −1, 1)."""

    method = Method.GAT

    def __init__(
        self,
        vehicle: VehicleParams,
        dt_s: float,
        alpha: float = 0.5,
        hidden_size: int = 64,
        num_layers: int = 2,
    ) -> None:
        """Forward model: a residual bicycle (H = 1) for the target; inverse: :class:`InverseModel`."""
        super().__init__(vehicle, dt_s, history_len=1)
        if not 0.0 <= alpha <= 1.0:
            raise UserError(f"the GAT smoothing alpha must lie in [0, 1], got {alpha}")
        self.alpha = float(alpha)
        net = {"hidden_size": hidden_size, "num_layers": num_layers}
        self.forward_model = ResidualBicycle(_net_config(vehicle, dt_s, net, ModelKind.RESIDUAL))
        self.inverse_model = InverseModel(hidden_size, num_layers)

    def transformed_action(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor
    ) -> torch.Tensor:
        """ã (B, 2) for the current state and action (the last history step)."""
        target_next = self.forward_model.predict_next(states, actions, friction)
        grounded = self.inverse_model(InverseModel.features(states[:, -1], target_next, friction))
        a = actions[:, -1].clamp(-1.0, 1.0)
        return ((1.0 - self.alpha) * a + self.alpha * grounded).clamp(-1.0, 1.0)

    def predict_next(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor, phys: torch.Tensor
    ) -> torch.Tensor:
        """The plain bicycle under the transformed action."""
        self._check(states, actions)
        a_t = self.transformed_action(states, actions, friction)
        return corrected_bicycle_step(states[:, -1], a_t, friction, phys, self.vehicle, self.dt_s)

    def spec(self) -> dict[str, Any]:
        """α and network sizes."""
        cfg = self.forward_model.cfg
        return {
            "alpha": self.alpha,
            "network": {"hidden_size": cfg.hidden_size, "num_layers": cfg.num_layers},
        }

    @classmethod
    def from_spec(cls, vehicle: VehicleParams, dt_s: float, spec: dict[str, Any]) -> ActionTransformation:
        """Rebuild the two networks."""
        return cls(vehicle, dt_s, alpha=float(spec["alpha"]), **spec["network"])


# ------------------------------------------------------------------------------------- history


class InformationStateModel(DynamicsModel):
    """Bicycle prior + corrections from an approximate information state (ASTRA-style).

    A GRU reads the normalized history features (B, H, F) with the *current* action blanked (the
    history up to the decision: past states and past actions), giving the latent z_t (B, d). Heads
    on (z_t, a_t): the normalized correction of the bicycle's body-frame deltas (zero-initialized,
    so an untrained model is the bicycle), the reward r̂_t (normalized by :attr:`rew_mean` /
    :attr:`rew_std`) and the next latent ẑ_{t+1} (the self-predictive objective).
    """

    rew_mean: torch.Tensor
    rew_std: torch.Tensor

    def __init__(self, cfg: DynamicsModelConfig) -> None:
        """GRU of ``num_layers`` × ``hidden_size`` and three one-hidden-layer heads."""
        super().__init__(cfg)
        d = cfg.hidden_size
        self.gru = nn.GRU(NUM_FEATURES, d, cfg.num_layers, batch_first=True)
        self.state_head = _mlp(d + 2, d, 1, NUM_DELTAS)
        last = self.state_head[-1]
        assert isinstance(last, nn.Linear)
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
        self.reward_head = _mlp(d + 2, d, 1, 1)
        self.latent_head = _mlp(d + 2, d, 1, d)
        self.register_buffer("rew_mean", torch.zeros(()))
        self.register_buffer("rew_std", torch.ones(()))

    def prior(self, features: torch.Tensor) -> torch.Tensor:
        """The kinematic bicycle's deltas (B, 6)."""
        assert self.cfg.vehicle is not None and self.cfg.dt_s is not None
        return bicycle_deltas(features, self.cfg.vehicle, self.cfg.dt_s)

    def latent(self, x: torch.Tensor) -> torch.Tensor:
        """z_t (B, d) from normalized features (B, H, F) (the current action is blanked here)."""
        x = x.clone()
        x[:, -1, _ACTION] = 0.0
        out, _ = self.gru(x)
        return out[:, -1]

    def _heads_input(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.latent(x)
        return z, torch.cat((z, x[:, -1, _ACTION]), dim=-1)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Normalized correction (B, 6)."""
        return self.state_head(self._heads_input(x)[1])

    def heads(self, history: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """From features (B, H, F): ``(deltas (B, 6) physical, reward (B,) physical, z_t, ẑ_{t+1})``."""
        self._check(history)
        x = (history - self.in_mean) / self.in_std
        z, inp = self._heads_input(x)
        deltas = self.prior(history) + self.out_mean + self.out_std * self.state_head(inp)
        reward = self.rew_mean + self.rew_std * self.reward_head(inp).squeeze(-1)
        return deltas, reward, z, self.latent_head(inp)

    def normalized_latent(self, history: torch.Tensor) -> torch.Tensor:
        """z_t (B, d) from physical features (B, H, F)."""
        return self.latent((history - self.in_mean) / self.in_std)


class HistoryCorrection(GroundedModel):
    """The ASTRA-style history-conditioned correction (:class:`InformationStateModel`)."""

    method = Method.HISTORY

    def __init__(
        self,
        vehicle: VehicleParams,
        dt_s: float,
        history_len: int = 8,
        hidden_size: int = 64,
        num_layers: int = 1,
    ) -> None:
        """A GRU over ``history_len`` steps."""
        super().__init__(vehicle, dt_s, history_len=history_len)
        net = {"history_len": history_len, "hidden_size": hidden_size, "num_layers": num_layers}
        self.net = InformationStateModel(_net_config(vehicle, dt_s, net, ModelKind.GRU))

    def predict_next(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor, phys: torch.Tensor
    ) -> torch.Tensor:
        """The corrected next state."""
        self._check(states, actions)
        return self.net.predict_next(states, actions, friction)

    def predict_reward(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor
    ) -> torch.Tensor:
        """The reward head's r̂ (B,) for the current step."""
        self._check(states, actions)
        return self.net.heads(history_features(states, actions, friction))[1]

    def predict_with_reward(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(next state (B, 6), reward (B,))`` from one pass of the encoder."""
        self._check(states, actions)
        deltas, reward, _, _ = self.net.heads(history_features(states, actions, friction))
        return apply_deltas(states[:, -1], deltas), reward

    def predict(
        self, states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor, phys: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`predict_with_reward` (the method reads no knobs)."""
        return self.predict_with_reward(states, actions, friction)

    def spec(self) -> dict[str, Any]:
        """Network size and history length."""
        cfg = self.net.cfg
        return {
            "network": {
                "history_len": self.history_len,
                "hidden_size": cfg.hidden_size,
                "num_layers": cfg.num_layers,
            }
        }

    @classmethod
    def from_spec(cls, vehicle: VehicleParams, dt_s: float, spec: dict[str, Any]) -> HistoryCorrection:
        """Rebuild the network."""
        return cls(vehicle, dt_s, **spec["network"])


MODEL_CLASSES: dict[Method, type[GroundedModel]] = {
    Method.NONE: PhysicalBicycle,
    Method.DR: RandomizedBicycle,
    Method.SYSID: IdentifiedBicycle,
    Method.MARKOV: MarkovCorrection,
    Method.GAT: ActionTransformation,
    Method.HISTORY: HistoryCorrection,
}
