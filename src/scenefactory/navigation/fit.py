"""Fitting the grounding methods of :mod:`.grounded` on Go1 transitions recorded through φ.

The grounding package's fitting code does the work: the transitions (a dict in the
:mod:`~scenefactory.grounding.dataset` layout: ``state`` (N, 6), ``action`` (N, 3) — the velocity
command —, ``next_state``, ``friction`` (the floor's μ), ``episode``, ``step``) are sorted and given
their histories by :func:`~scenefactory.grounding.fit.build_histories`; whole episodes are held out
by :func:`~scenefactory.grounding.fit.holdout_mask`; the budget is the first ``budget`` training
transitions in a seeded episode order (:func:`~scenefactory.grounding.ground.select_budget`); the
networks train with the package's Adam loop (minibatches with replacement, ``train_steps``); the
held-out metrics are :func:`~scenefactory.grounding.fit.evaluate`'s (one-step errors and the final
position error of 10- and 20-step open-loop rollouts under the recorded commands; ``speed_err_mps``
is the error of the forward velocity ``vx_b``), for the grounded model and for the point mass.

Per method: ``sysid`` fits the gains and responses (Adam on their logarithms / logits) for each
delay 0 … ``sysid_max_delay_steps`` on the multi-step error of ``sysid_horizon``-step open-loop
rollouts from every window of the budget (:func:`~scenefactory.grounding.sysid.fit_windows`), each
field's error divided by the spread of its one-step change, and keeps the best delay; ``markov``
and ``gat``'s forward model fit the scaled MSE of the heading-frame deltas; ``history`` fits the
deltas plus ``latent_weight`` × the self-predictive error of the next latent (target: the encoder's
latent one step later in the same segment, not back-propagated). ``none`` and ``dr`` use no data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from scenefactory.dynamics.bicycle import wrap_angle
from scenefactory.dynamics.correctors import Method
from scenefactory.dynamics.models import body_deltas
from scenefactory.errors import UserError
from scenefactory.grounding.fit import Histories, build_histories, evaluate, holdout_mask
from scenefactory.grounding.ground import select_budget, train_minibatches
from scenefactory.grounding.sysid import field_scale, fit_windows
from scenefactory.navigation.engine import DELAY, CommandLimits, UnicycleKnobs, delayed_command, unicycle_step
from scenefactory.navigation.grounded import (
    ActionTransformed,
    HistoryUnicycle,
    IdentifiedUnicycle,
    NavDomainRanges,
    NavModel,
    NominalUnicycle,
    RandomizedUnicycle,
    ResidualUnicycle,
    nav_features,
)


@dataclass(frozen=True)
class NavFitConfig:
    """Settings of one fit (module docstring); ``budget`` in transitions (``None``: all training ones).

    The fields :func:`~scenefactory.grounding.ground.train_minibatches` reads (``train_steps``,
    ``batch_size``, ``lr``, ``seed``: ``MinibatchSettings``) have ``GroundConfig``'s names."""

    method: Method = Method.HISTORY
    budget: int | None = None
    seed: int = 0
    holdout_frac: float = 0.2
    hidden_size: int = 64
    num_layers: int = 2
    history_len: int = 8
    train_steps: int = 1500
    batch_size: int = 256
    lr: float = 1e-3
    gat_alpha: float = 0.5
    latent_weight: float = 0.1
    sysid_iterations: int = 150
    sysid_horizon: int = 10
    sysid_max_delay_steps: int = 2
    sysid_windows: int = 1024
    dr_ranges: NavDomainRanges = field(default_factory=NavDomainRanges)

    def __post_init__(self) -> None:
        """Reject impossible settings, naming the field."""
        if self.budget is not None and self.budget < 1:
            raise UserError(
                f"NavFitConfig.budget must be a positive number of transitions, got {self.budget}"
            )
        for name in ("train_steps", "batch_size", "history_len", "sysid_iterations", "sysid_horizon"):
            if getattr(self, name) < 1:
                raise UserError(f"NavFitConfig.{name} must be at least 1, got {getattr(self, name)}")


HISTORY_STEPS = 8
"""History rebuilt for every fit and evaluation (the longest any model reads)."""


def histories(data: dict[str, np.ndarray], cfg: NavFitConfig) -> Histories:
    """The transitions' histories, as long as every method needs."""
    need = max(
        HISTORY_STEPS, cfg.history_len, cfg.sysid_max_delay_steps + 1, cfg.dr_ranges.delay_steps[1] + 1
    )
    return build_histories(data, need)


def step_fn(model: NavModel, generator: torch.Generator | None = None) -> Any:
    """``model`` as the grounding package's ``StepFn`` (the last ``history_len`` steps are read; each
    batch size gets one draw of knobs, kept across calls, as ``grounded_step_fn`` does)."""
    drawn: dict[int, torch.Tensor] = {}
    h = model.history_len

    def step(states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor) -> torch.Tensor:
        b = states.shape[0]
        if b not in drawn:
            drawn[b] = model.physics(b, generator)
        return model.predict_next(states[:, -h:], actions[:, -h:], drawn[b])

    return step


def _rollout_loss(
    h: Histories, starts: torch.Tensor, knobs: torch.Tensor, horizon: int, scale: torch.Tensor, dt_s: float
) -> torch.Tensor:
    state, actions = h.states[starts, -1], h.actions[starts]
    total = torch.zeros(())
    for k in range(horizon):
        state = unicycle_step(state, delayed_command(actions, knobs[:, DELAY]), knobs, dt_s)
        err = state - h.next_state[starts + k]
        err = torch.cat((err[:, :2], wrap_angle(err[:, 2:3]), err[:, 3:]), dim=-1)
        total = total + ((err / scale) ** 2).mean()
        if k + 1 < horizon:
            actions = torch.cat((actions[:, 1:], h.actions[starts + k + 1][:, -1:]), dim=1)
    return total / horizon


def identify(
    h: Histories, sel: np.ndarray, dt_s: float, cfg: NavFitConfig
) -> tuple[UnicycleKnobs, dict[str, Any]]:
    """System identification of the unicycle's knobs (module docstring)."""
    horizon = cfg.sysid_horizon
    starts = fit_windows(h, sel, horizon)
    while len(starts) == 0 and horizon > 1:
        horizon = max(1, horizon // 2)
        starts = fit_windows(h, sel, horizon)
    if len(starts) == 0:
        raise UserError("system identification found no Go1 transitions in the budget")
    if len(starts) > cfg.sysid_windows:
        starts = np.sort(np.random.default_rng(cfg.seed).choice(starts, cfg.sysid_windows, replace=False))
    idx = torch.from_numpy(starts)
    scale = field_scale(h, torch.from_numpy(np.flatnonzero(sel)))
    losses: dict[int, float] = {}
    best: tuple[float, UnicycleKnobs] | None = None
    for delay in range(cfg.sysid_max_delay_steps + 1):
        theta = torch.tensor([0.0, 0.0, 0.0, 2.0, 2.0], requires_grad=True)  # log gains, logit responses
        opt = torch.optim.Adam([theta], lr=0.05)

        def knobs_of(theta: torch.Tensor, delay: int = delay) -> torch.Tensor:
            k = torch.cat((theta[:3].exp(), torch.sigmoid(theta[3:5]), torch.tensor([float(delay)])))
            return k.expand(len(idx), -1)

        for _ in range(cfg.sysid_iterations):
            loss = _rollout_loss(h, idx, knobs_of(theta), horizon, scale, dt_s)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            k = knobs_of(theta)
            final = float(_rollout_loss(h, idx, k, horizon, scale, dt_s))
        losses[delay] = final
        v = k[0].tolist()
        fitted = UnicycleKnobs(v[0], v[1], v[2], min(1.0, v[3]), min(1.0, v[4]), delay)
        if best is None or final < best[0]:
            best = (final, fitted)
    assert best is not None
    return best[1], {
        "loss_by_delay": {str(d): v for d, v in losses.items()},
        "windows": len(starts),
        "horizon": horizon,
    }


def _fit_net(
    net: Any,
    feats: torch.Tensor,
    deltas: torch.Tensor,
    idx: torch.Tensor,
    cfg: NavFitConfig,
    latent: bool,
    h: Histories,
    sel: np.ndarray,
) -> list[float]:
    """Normalization on the budget, then the grounding package's Adam loop on the scaled delta MSE
    (plus, for the history net, the self-predictive latent loss)."""
    net.fit_normalization(feats[idx], deltas[idx])
    net.train()
    n = len(sel)
    nxt = np.minimum(np.arange(n) + 1, n - 1)
    has_next = torch.from_numpy((h.segment[nxt] == h.segment) & sel[nxt] & (np.arange(n) + 1 < n))
    nxt_t = torch.from_numpy(nxt)

    def loss_fn(b: torch.Tensor) -> torch.Tensor:
        if not latent:
            return (((net(feats[b]) - deltas[b]) / net.loss_scale) ** 2).mean()
        pred, _, z_next_hat = net.heads(feats[b])
        loss = (((pred - deltas[b]) / net.loss_scale) ** 2).mean()
        follow = has_next[b]
        if cfg.latent_weight > 0.0 and bool(follow.any()):
            with torch.no_grad():
                z_next = net.latent(net.normalize(feats[nxt_t[b[follow]]]))
            loss = loss + cfg.latent_weight * ((z_next_hat[follow] - z_next) ** 2).mean()
        return loss

    curve = train_minibatches(list(net.parameters()), loss_fn, idx, cfg, "fit", None)
    net.eval()
    return curve


def build(cfg: NavFitConfig, dt_s: float, limits: CommandLimits) -> NavModel:
    """An unfitted model of ``cfg.method``."""
    torch.manual_seed(cfg.seed)
    m = cfg.method
    if m is Method.NONE:
        return NominalUnicycle(dt_s, limits)
    if m is Method.DR:
        return RandomizedUnicycle(dt_s, limits, cfg.dr_ranges)
    if m is Method.SYSID:
        return IdentifiedUnicycle(dt_s, limits, UnicycleKnobs())
    if m is Method.MARKOV:
        return ResidualUnicycle(dt_s, limits, cfg.hidden_size, cfg.num_layers)
    if m is Method.GAT:
        return ActionTransformed(dt_s, limits, cfg.gat_alpha, cfg.hidden_size, cfg.num_layers)
    return HistoryUnicycle(dt_s, limits, cfg.history_len, cfg.hidden_size)


@dataclass(frozen=True)
class NavFit:
    """A fitted model, the transitions it used and its held-out metrics (grounded and point mass)."""

    model: NavModel
    budget_transitions: int
    info: dict[str, Any]


def fit(h: Histories, dt_s: float, limits: CommandLimits, cfg: NavFitConfig) -> NavFit:
    """Fit ``cfg.method`` on the histories ``h`` of Go1 transitions (module docstring)."""
    held = holdout_mask(h.episode, cfg.holdout_frac, cfg.seed)
    uses_data = cfg.method not in (Method.NONE, Method.DR)
    sel = select_budget(h, ~held, cfg.budget, cfg.seed) if uses_data else np.zeros(len(held), dtype=bool)
    idx = torch.from_numpy(np.flatnonzero(sel))
    model = build(cfg, dt_s, limits)
    info: dict[str, Any] = {}
    deltas = body_deltas(h.states[:, -1], h.next_state)
    if cfg.method is Method.SYSID:
        knobs, info = identify(h, sel, dt_s, cfg)
        model = IdentifiedUnicycle(dt_s, limits, knobs)
    elif isinstance(model, ResidualUnicycle | ActionTransformed):
        net = model.net if isinstance(model, ResidualUnicycle) else model.forward_model
        feats = nav_features(h.states[:, -1:], h.actions[:, -1:])
        info["losses"] = _fit_net(net, feats, deltas, idx, cfg, False, h, sel)
    elif isinstance(model, HistoryUnicycle):
        hl = model.history_len
        feats = nav_features(h.states[:, -hl:], h.actions[:, -hl:])
        info["losses"] = _fit_net(model.net, feats, deltas, idx, cfg, True, h, sel)
    model.eval()
    gen = torch.Generator().manual_seed(cfg.seed + 3)
    info["heldout"] = {
        "grounded": evaluate(step_fn(model, gen), h, held),
        "point_mass": evaluate(step_fn(NominalUnicycle(dt_s, limits)), h, held),
        "transitions": int(held.sum()),
    }
    info["spec"] = model.spec()
    return NavFit(model=model, budget_transitions=int(sel.sum()), info=info)


def minutes_of(transitions: int, dt_s: float) -> float:
    """Robot time [min] of ``transitions`` abstract steps of ``dt_s``."""
    return transitions * dt_s / 60.0


def transitions_of(minutes: float, dt_s: float) -> int:
    """Abstract steps of ``dt_s`` in ``minutes`` of robot time (rounded up)."""
    return math.ceil(minutes * 60.0 / dt_s - 1e-9)
