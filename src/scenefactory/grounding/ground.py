"""Fitting a grounding method on target transitions (``scenefactory ground``).

Steps, in order:

1. load the target dataset (any :mod:`~scenefactory.grounding.dataset` folder: simulator data or
   driving logs) and rebuild histories long enough for the method
   (:func:`~scenefactory.grounding.fit.build_histories`);
2. hold out ``holdout_frac`` of the episodes (:func:`~scenefactory.grounding.fit.holdout_mask`);
3. the data budget: the first ``budget`` transitions of the remaining episodes taken whole, in a
   seeded episode order, the last one cut (:func:`select_budget`); ``None`` takes them all. ``none``
   and ``dr`` use no target data (budget 0);
4. fit the method (see :mod:`~scenefactory.dynamics.correctors`): ``sysid`` by
   :func:`~scenefactory.grounding.sysid.identify`; ``markov`` and ``gat``'s forward model by the
   scaled MSE of the body-frame deltas; ``gat``'s inverse model on transitions of the plain bicycle
   started from the budget's states under their logged actions and uniform random ones
   (``gat_sim_transitions``, no target data), labelled with the unsaturated action that reproduces
   each transition (:func:`canonical_action`); ``history`` on the deltas plus ``reward_weight`` ×
   the reward error (when the dataset records rewards) plus ``latent_weight`` × the
   self-predictive error of the next latent (target: the encoder's latent one step later, not
   back-propagated). Networks train for ``train_steps`` Adam steps on minibatches drawn with
   replacement from the budget;
5. evaluate on the held-out episodes the grounded model and the plain bicycle with the same
   metrics as ``fit-dynamics`` (:func:`~scenefactory.grounding.fit.evaluate`: one-step errors and
   the final position error of 10- and 20-step open-loop rollouts); domain randomization is scored
   with one draw of its knobs per transition or rollout window;
6. write the artifact (:func:`~scenefactory.dynamics.artifact.save_grounding`) and ``metrics.json``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from scenefactory.dynamics.artifact import save_grounding
from scenefactory.dynamics.correctors import (
    ActionTransformation,
    GroundedModel,
    HistoryCorrection,
    IdentifiedBicycle,
    InverseModel,
    MarkovCorrection,
    Method,
    PhysicalBicycle,
    RandomizedBicycle,
)
from scenefactory.dynamics.models import DynamicsModel, body_deltas, history_features
from scenefactory.dynamics.physics import BicycleCorrection, DomainRanges, corrected_bicycle_step
from scenefactory.errors import UserError
from scenefactory.grounding.dataset import engine_spec, load_transitions
from scenefactory.grounding.fit import (
    Histories,
    StepFn,
    bicycle_step_fn,
    build_histories,
    evaluate,
    holdout_mask,
)
from scenefactory.grounding.sysid import identify
from scenefactory.io import write_json
from scenefactory.vehicles.params import VehicleParams

Progress = Callable[[int, int, str], None]
"""``progress(done, total, info)`` during a fit."""


@dataclass(frozen=True)
class GroundConfig:
    """Settings of one grounding fit (module docstring for their roles); defaults are the CLI's."""

    method: Method = Method.SYSID
    budget: int | None = None
    seed: int = 0
    holdout_frac: float = 0.2
    hidden_size: int = 64
    num_layers: int = 2
    history_len: int = 8
    train_steps: int = 2000
    batch_size: int = 256
    lr: float = 1e-3
    gat_alpha: float = 0.5
    gat_sim_transitions: int = 20_000
    sysid_iterations: int = 200
    sysid_horizon: int = 10
    sysid_max_delay_steps: int = 3
    sysid_windows: int = 2048
    dr_ranges: DomainRanges = field(default_factory=DomainRanges)
    reward_weight: float = 0.1
    latent_weight: float = 0.1

    def __post_init__(self) -> None:
        """Reject impossible settings, naming the field."""
        if not isinstance(self.method, Method):
            raise UserError(f"GroundConfig.method must be a Method, got {self.method!r}")
        if self.budget is not None and self.budget < 1:
            raise UserError(f"--budget must be a positive number of transitions, got {self.budget}")
        for name in (
            "hidden_size",
            "num_layers",
            "history_len",
            "train_steps",
            "batch_size",
            "sysid_iterations",
            "sysid_windows",
        ):
            if getattr(self, name) < 1:
                raise UserError(f"GroundConfig.{name} must be at least 1, got {getattr(self, name)}")
        if self.sysid_horizon < 1 or self.sysid_max_delay_steps < 0 or self.gat_sim_transitions < 1:
            raise UserError("sysid_horizon and gat_sim_transitions must be >= 1, sysid_max_delay_steps >= 0")
        if not 0.0 <= self.gat_alpha <= 1.0:
            raise UserError(f"--alpha must lie in [0, 1], got {self.gat_alpha}")
        if not self.lr > 0.0 or self.reward_weight < 0.0 or self.latent_weight < 0.0:
            raise UserError("lr must be positive and the loss weights non-negative")

    @property
    def uses_target_data(self) -> bool:
        """Whether the method fits anything to target data (``none`` and ``dr`` do not)."""
        return self.method not in (Method.NONE, Method.DR)

    @property
    def history_steps(self) -> int:
        """History length the fit and evaluation need."""
        need = {
            Method.DR: self.dr_ranges.max_delay_steps + 1,
            Method.SYSID: self.sysid_max_delay_steps + 1,
            Method.HISTORY: self.history_len,
        }
        return need.get(self.method, 1)


@dataclass(frozen=True)
class GroundResult:
    """What :func:`ground` produced: the model, the saved config (with metrics) and the folder."""

    model: GroundedModel
    config: dict[str, Any]
    out_dir: Path


def select_budget(h: Histories, train: np.ndarray, budget: int | None, seed: int) -> np.ndarray:
    """(N,) bool: the first ``budget`` transitions of the ``train`` episodes in a seeded episode
    order, each episode from its start (so every selected transition's history is selected)."""
    idx = np.flatnonzero(train)
    if budget is None:
        return train.copy()
    if budget > len(idx):
        raise UserError(
            f"--budget {budget} exceeds the {len(idx)} target transitions left after holding out episodes"
        )
    episodes = np.unique(h.episode[idx])
    rank = np.empty(len(episodes), dtype=np.int64)
    rank[np.random.default_rng(seed + 1).permutation(len(episodes))] = np.arange(len(episodes))
    ep_rank = rank[np.searchsorted(episodes, h.episode[idx])]
    chosen = idx[np.lexsort((idx, ep_rank))][:budget]
    sel = np.zeros(len(train), dtype=bool)
    sel[chosen] = True
    return sel


def grounded_step_fn(model: GroundedModel, generator: torch.Generator | None = None) -> StepFn:
    """``model`` as a :data:`~scenefactory.grounding.fit.StepFn` over longer histories (the last
    ``history_len`` steps are used); each batch size gets one draw of knobs, kept across calls, so
    a domain-randomized rollout keeps its knobs for the whole window."""
    drawn: dict[int, torch.Tensor] = {}
    h = model.history_len

    def step(states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor) -> torch.Tensor:
        b = states.shape[0]
        if b not in drawn:
            drawn[b] = model.physics(b, generator)
        return model.predict_next(states[:, -h:], actions[:, -h:], friction, drawn[b])

    return step


class MinibatchSettings(Protocol):
    """What :func:`train_minibatches` reads of a fit's config (:class:`GroundConfig`, the
    navigation fit's ``NavFitConfig``)."""

    @property
    def train_steps(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def lr(self) -> float: ...
    @property
    def seed(self) -> int: ...


def train_minibatches(
    params: list[torch.nn.Parameter],
    loss_fn: Callable[[torch.Tensor], torch.Tensor],
    idx: torch.Tensor,
    cfg: MinibatchSettings,
    label: str,
    progress: Progress | None,
) -> list[float]:
    """Adam for ``cfg.train_steps`` minibatches drawn with replacement from ``idx``; the mean loss
    of every 100 steps is returned."""
    opt = torch.optim.Adam(params, lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    batch = min(cfg.batch_size, len(idx))
    curve, running = [], 0.0
    for s in range(cfg.train_steps):
        b = idx[torch.randint(len(idx), (batch,), generator=gen)]
        loss = loss_fn(b)
        opt.zero_grad()
        loss.backward()
        opt.step()
        running += float(loss.detach())
        if (s + 1) % 100 == 0 or s + 1 == cfg.train_steps:
            curve.append(running / ((s % 100) + 1))
            running = 0.0
            if progress is not None:
                progress(s + 1, cfg.train_steps, f"{label} loss {curve[-1]:.4f}")
    return curve


def _fit_deltas(
    net: DynamicsModel,
    feats: torch.Tensor,
    deltas: torch.Tensor,
    idx: torch.Tensor,
    cfg: GroundConfig,
    label: str,
    progress: Progress | None,
) -> list[float]:
    net.fit_normalization(feats[idx], deltas[idx])
    net.train()

    def loss_fn(b: torch.Tensor) -> torch.Tensor:
        return (((net(feats[b]) - deltas[b]) / net.loss_scale) ** 2).mean()

    curve = train_minibatches(list(net.parameters()), loss_fn, idx, cfg, label, progress)
    net.eval()
    return curve


def _markov_inputs(h: Histories) -> tuple[torch.Tensor, torch.Tensor]:
    feats = history_features(h.states[:, -1:], h.actions[:, -1:], h.friction)
    return feats, body_deltas(h.states[:, -1], h.next_state)


def _fit_markov(
    model: MarkovCorrection, h: Histories, idx: torch.Tensor, cfg: GroundConfig, progress: Progress | None
) -> dict[str, Any]:
    feats, deltas = _markov_inputs(h)
    return {"losses": _fit_deltas(model.net, feats, deltas, idx, cfg, "markov", progress)}


def canonical_action(
    state: torch.Tensor, next_state: torch.Tensor, vehicle: VehicleParams, dt_s: float
) -> torch.Tensor:
    """The unsaturated action (B, 2) that gives the bicycle's transition ``state`` → ``next_state``.

    The bicycle's inverse is many-to-one where the steering rate, the standstill or the top speed
    bind (every steering target beyond the rate limit reaches the same angle); the label is the one
    action that asks for exactly what was reached: steer = δ' / δ_max, accel = (v' − v) / dt over
    the car's acceleration or braking limit.
    """
    steer = next_state[:, 5] / vehicle.max_steer_rad
    accel = (next_state[:, 3] - state[:, 3]) / dt_s
    accel = torch.where(accel >= 0.0, accel / vehicle.max_accel_mps2, accel / vehicle.max_brake_mps2)
    return torch.stack((steer, accel), dim=-1).clamp(-1.0, 1.0)


def _fit_gat(
    model: ActionTransformation, h: Histories, idx: torch.Tensor, cfg: GroundConfig, progress: Progress | None
) -> dict[str, Any]:
    feats, deltas = _markov_inputs(h)
    fwd = _fit_deltas(model.forward_model, feats, deltas, idx, cfg, "gat forward", progress)
    # coarse-simulator data for the inverse model: budget states, logged or uniform random actions
    gen = torch.Generator().manual_seed(cfg.seed + 2)
    n = cfg.gat_sim_transitions
    pick = idx[torch.randint(len(idx), (n,), generator=gen)]
    state, friction = h.states[pick, -1], h.friction[pick]
    random_a = torch.rand(n, 2, generator=gen) * 2.0 - 1.0
    use_logged = torch.rand(n, generator=gen) < 0.5
    action = torch.where(use_logged[:, None], h.actions[pick, -1].clamp(-1.0, 1.0), random_a)
    nominal = BicycleCorrection().to_tensor(model.vehicle).expand(n, -1)
    with torch.no_grad():
        nxt = corrected_bicycle_step(state, action, friction, nominal, model.vehicle, model.dt_s)
    action = canonical_action(state, nxt, model.vehicle, model.dt_s)
    inv_feats = InverseModel.features(state, nxt, friction)
    inv = model.inverse_model
    inv.fit_normalization(inv_feats)
    inv.train()

    def loss_fn(b: torch.Tensor) -> torch.Tensor:
        return ((inv(inv_feats[b]) - action[b]) ** 2).mean()

    params = list(inv.parameters())
    inv_curve = train_minibatches(params, loss_fn, torch.arange(n), cfg, "gat inverse", progress)
    inv.eval()
    return {"forward_losses": fwd, "inverse_losses": inv_curve, "sim_transitions": n, "alpha": model.alpha}


def _fit_history(
    model: HistoryCorrection,
    h: Histories,
    sel: np.ndarray,
    reward: torch.Tensor | None,
    cfg: GroundConfig,
    progress: Progress | None,
) -> dict[str, Any]:
    net, hl = model.net, model.history_len
    feats = history_features(h.states[:, -hl:], h.actions[:, -hl:], h.friction)
    deltas = body_deltas(h.states[:, -1], h.next_state)
    idx = torch.from_numpy(np.flatnonzero(sel))
    net.fit_normalization(feats[idx], deltas[idx])
    n = len(sel)
    nxt = np.minimum(np.arange(n) + 1, n - 1)
    has_next = torch.from_numpy((h.segment[nxt] == h.segment) & sel[nxt] & (np.arange(n) + 1 < n))
    nxt_t = torch.from_numpy(nxt)
    if reward is not None:
        net.rew_mean.fill_(float(reward[idx].mean()))
        net.rew_std.fill_(float(reward[idx].std().clamp_min(1e-3)))
    net.train()

    def loss_fn(b: torch.Tensor) -> torch.Tensor:
        pred, r_hat, _, z_next_hat = net.heads(feats[b])
        loss = (((pred - deltas[b]) / net.loss_scale) ** 2).mean()
        if reward is not None and cfg.reward_weight > 0.0:
            loss = loss + cfg.reward_weight * (((r_hat - reward[b]) / net.rew_std) ** 2).mean()
        follow = has_next[b]
        if cfg.latent_weight > 0.0 and bool(follow.any()):
            with torch.no_grad():
                z_next = net.normalized_latent(feats[nxt_t[b[follow]]])
            loss = loss + cfg.latent_weight * ((z_next_hat[follow] - z_next) ** 2).mean()
        return loss

    curve = train_minibatches(list(net.parameters()), loss_fn, idx, cfg, "history", progress)
    net.eval()
    return {"losses": curve, "reward_head_trained": reward is not None}


def _reward_errors(
    model: HistoryCorrection, h: Histories, reward: torch.Tensor, train: np.ndarray, held: np.ndarray
) -> dict[str, float]:
    i = torch.from_numpy(np.flatnonzero(held))
    hl = model.history_len
    with torch.no_grad():
        r_hat = model.predict_reward(h.states[i, -hl:], h.actions[i, -hl:], h.friction[i])
    mean_train = float(reward[torch.from_numpy(np.flatnonzero(train))].mean())
    return {
        "reward_mae": float((r_hat - reward[i]).abs().mean()),
        "reward_mae_constant_baseline": float((mean_train - reward[i]).abs().mean()),
    }


def build_model(cfg: GroundConfig, vehicle: VehicleParams, dt_s: float) -> GroundedModel:
    """An unfitted model of ``cfg.method`` (the parametric ones need no fit, except sysid)."""
    torch.manual_seed(cfg.seed)
    if cfg.method is Method.NONE:
        return PhysicalBicycle(vehicle, dt_s)
    if cfg.method is Method.DR:
        return RandomizedBicycle(vehicle, dt_s, cfg.dr_ranges)
    if cfg.method is Method.SYSID:
        return IdentifiedBicycle(vehicle, dt_s, BicycleCorrection())
    if cfg.method is Method.MARKOV:
        return MarkovCorrection(vehicle, dt_s, cfg.hidden_size, cfg.num_layers)
    if cfg.method is Method.GAT:
        return ActionTransformation(vehicle, dt_s, cfg.gat_alpha, cfg.hidden_size, cfg.num_layers)
    return HistoryCorrection(vehicle, dt_s, cfg.history_len, cfg.hidden_size, num_layers=1)


def load_target(data_dir: Path, cfg: GroundConfig) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The target dataset of ``data_dir`` (:func:`load_transitions`, at least 2 episodes), checked
    against ``cfg``: a ``budget`` the episodes left after the hold-out cannot fill is refused here,
    before any fitting."""
    data, meta = load_transitions(data_dir, min_episodes=2)
    if cfg.uses_target_data and cfg.budget is not None:
        # the same episodes holdout_mask holds out of the sorted histories: it draws from the unique ids
        available = int((~holdout_mask(data["episode"], cfg.holdout_frac, cfg.seed)).sum())
        if cfg.budget > available:
            raise UserError(
                f"--budget {cfg.budget} exceeds the {available} target transitions left after "
                f"holding out episodes of {data_dir}"
            )
    return data, meta


def ground(
    data_dir: Path,
    cfg: GroundConfig,
    out_dir: Path,
    progress: Progress | None = None,
    dataset: tuple[dict[str, np.ndarray], dict[str, Any]] | None = None,
) -> GroundResult:
    """Fit ``cfg.method`` on the target data in ``data_dir`` and write the artifact to ``out_dir``.

    ``dataset``: :func:`load_target`'s ``(data, meta)`` of ``data_dir`` when the caller has read
    and checked it already (the CLI does, before its progress bar); otherwise it is read here."""
    data, meta = dataset if dataset is not None else load_target(data_dir, cfg)
    dt_s, vehicle = float(meta["policy_dt_s"]), VehicleParams(**meta["vehicle"])
    h = build_histories(data, cfg.history_steps)
    order = np.lexsort((data["step"], data["episode"]))  # the order build_histories sorts into
    reward = torch.from_numpy(data["reward"][order].astype(np.float32)) if "reward" in data else None
    held = holdout_mask(h.episode, cfg.holdout_frac, cfg.seed)
    train = ~held
    sel = select_budget(h, train, cfg.budget, cfg.seed) if cfg.uses_target_data else np.zeros_like(train)
    idx = torch.from_numpy(np.flatnonzero(sel))
    t0 = time.perf_counter()
    model = build_model(cfg, vehicle, dt_s)
    fit: dict[str, Any] = {}
    if cfg.method is Method.SYSID:

        def sysid_progress(done: int, total: int) -> None:
            if progress is not None:
                progress(done, total, "sysid")

        res = identify(
            h,
            sel,
            vehicle,
            dt_s,
            horizon=cfg.sysid_horizon,
            max_delay_steps=cfg.sysid_max_delay_steps,
            iterations=cfg.sysid_iterations,
            max_windows=cfg.sysid_windows,
            seed=cfg.seed,
            progress=sysid_progress,
        )
        model = IdentifiedBicycle(vehicle, dt_s, res.correction)
        fit = {
            "fitted": model.spec()["physics"],
            "loss_by_delay": {str(k): v for k, v in res.loss_by_delay.items()},
            "windows": res.windows,
            "horizon": res.horizon,
        }
    elif isinstance(model, MarkovCorrection):
        fit = _fit_markov(model, h, idx, cfg, progress)
    elif isinstance(model, ActionTransformation):
        fit = _fit_gat(model, h, idx, cfg, progress)
    elif isinstance(model, HistoryCorrection):
        fit = _fit_history(model, h, sel, reward, cfg, progress)
    fit["seconds"] = time.perf_counter() - t0
    model.eval()
    gen = torch.Generator().manual_seed(cfg.seed + 3)
    heldout: dict[str, Any] = {
        "grounded": evaluate(grounded_step_fn(model, gen), h, held),
        "kinematic_bicycle": evaluate(bicycle_step_fn(vehicle, dt_s), h, held),
        "transitions": int(held.sum()),
        "episodes": len(np.unique(h.episode[held])),
    }
    if isinstance(model, HistoryCorrection) and reward is not None:
        heldout.update(_reward_errors(model, h, reward, train, held))
    spec = engine_spec(meta, data_dir / "meta.json")  # what the target data was recorded on, if known
    info = {
        "budget_transitions": int(sel.sum()),
        "budget_requested": cfg.budget,
        "train_transitions_available": int(train.sum()),
        "seed": cfg.seed,
        "data": {
            "path": str(data_dir),
            "engine": meta.get("engine"),
            "engine_spec": None if spec is None else spec.to_dict(),
            "transitions": len(h.episode),
        },
        "fit": fit,
        "heldout": heldout,
    }
    save_grounding(out_dir, model, info)
    write_json(out_dir / "metrics.json", {"method": cfg.method.value, **info})
    return GroundResult(model=model, config=info, out_dir=out_dir)
