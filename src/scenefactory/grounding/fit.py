"""Fitting learned dynamics models on a transition dataset (``scenefactory fit-dynamics``).

Steps, in order:

1. load the dataset (:func:`~scenefactory.grounding.dataset.load_transitions`), sort by
   (episode, step) and cut it into contiguous segments (same episode, consecutive steps);
2. rebuild each transition's ``H``-step history inside its segment; the first steps of a segment
   are padded by repeating its first state with a zero action;
3. hold out whole episodes: ``round(holdout_frac · episodes)`` (at least one) chosen by a seeded
   permutation of the sorted episode ids;
4. fit the model's normalization on the training transitions and train with Adam on the MSE of
   the deltas divided by their training std (``loss_scale``);
5. evaluate on held-out transitions, for the model and for the plain kinematic bicycle (no
   learning, the baseline every model must beat): one-step mean errors (position [m], |yaw| [rad],
   |speed| [m/s]) and open-loop rollouts of 10 and 20 steps under the logged actions, started at
   every held-out segment start and every 10 / 20 steps after it (non-overlapping windows), scored
   by the mean final position error [m];
6. save ``model.pt`` (state dict, config, metrics) and ``metrics.json``, both atomically.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scenefactory.dynamics.bicycle import bicycle_step, wrap_angle
from scenefactory.dynamics.model_file import MODEL_FORMAT, model_config_to_dict
from scenefactory.dynamics.models import (
    DynamicsModel,
    DynamicsModelConfig,
    body_deltas,
    history_features,
    make_model,
)
from scenefactory.errors import UserError
from scenefactory.grounding.dataset import load_transitions
from scenefactory.io import atomic_write_bytes, write_json
from scenefactory.vehicles.params import VehicleParams, actions_to_controls

ROLLOUT_STEPS = (10, 20)

# (states (B, H, 6), actions (B, H, 2), friction (B,)) -> next state (B, 6), world frame
StepFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Histories:
    """Transitions sorted by (episode, step) with their padded histories (N transitions, H steps).

    - ``states`` (N, H, 6), ``actions`` (N, H, 2): history ending at each transition (last = current);
    - ``next_state`` (N, 6), ``friction`` (N,), ``episode`` (N,);
    - ``segment`` (N,) id of the contiguous segment, ``pos_in_segment`` (N,) index inside it.
    """

    states: torch.Tensor
    actions: torch.Tensor
    next_state: torch.Tensor
    friction: torch.Tensor
    episode: np.ndarray
    segment: np.ndarray
    pos_in_segment: np.ndarray


@dataclass(frozen=True)
class FitResult:
    """What :func:`fit_dynamics` produced: the trained model, its metrics and where they were saved."""

    model: DynamicsModel
    metrics: dict[str, Any]
    model_path: Path
    metrics_path: Path


def build_histories(data: dict[str, np.ndarray], history_len: int) -> Histories:
    """Sort ``data`` (a :func:`load_transitions` dict) and rebuild ``history_len``-step histories."""
    if history_len < 1:
        raise ValueError(f"history_len must be at least 1, got {history_len}")
    order = np.lexsort((data["step"], data["episode"]))
    ep, step = data["episode"][order], data["step"][order].astype(np.int64)
    n = len(order)
    new_seg = np.ones(n, dtype=bool)
    new_seg[1:] = (ep[1:] != ep[:-1]) | (step[1:] != step[:-1] + 1)
    segment = np.cumsum(new_seg) - 1
    seg_start = np.flatnonzero(new_seg)[segment]
    idx = np.arange(n)
    lags = np.arange(history_len - 1, -1, -1)  # oldest first
    src = idx[:, None] - lags[None, :]
    pad = src < seg_start[:, None]
    src = np.where(pad, seg_start[:, None], src)
    state = torch.from_numpy(data["state"][order].astype(np.float32))
    action = torch.from_numpy(data["action"][order].astype(np.float32))
    src_t, pad_t = torch.from_numpy(src), torch.from_numpy(pad)
    return Histories(
        states=state[src_t],
        actions=torch.where(pad_t[..., None], 0.0, action[src_t]),
        next_state=torch.from_numpy(data["next_state"][order].astype(np.float32)),
        friction=torch.from_numpy(data["friction"][order].astype(np.float32)),
        episode=ep,
        segment=segment,
        pos_in_segment=idx - seg_start,
    )


def holdout_mask(episode: np.ndarray, frac: float, seed: int) -> np.ndarray:
    """(N,) bool: transitions of the held-out episodes (a seeded choice of ``round(frac · E)``, ≥ 1)."""
    if not 0.0 < frac < 1.0:
        raise UserError(f"the held-out fraction must lie in (0, 1), got {frac}")
    episodes = np.unique(episode)
    if len(episodes) < 2:
        raise UserError(f"need at least 2 episodes to hold some out, the dataset has {len(episodes)}")
    k = min(max(1, round(frac * len(episodes))), len(episodes) - 1)
    held = np.random.default_rng(seed).permutation(episodes)[:k]
    return np.isin(episode, held)


def bicycle_step_fn(params: VehicleParams, dt_s: float) -> StepFn:
    """The plain kinematic bicycle as a :data:`StepFn` (uses only the current state and action)."""

    def step(states: torch.Tensor, actions: torch.Tensor, friction: torch.Tensor) -> torch.Tensor:
        cur, act = states[:, -1, :], actions[:, -1, :]
        steer_target, accel_cmd = actions_to_controls(act, params)
        pos, yaw, speed, steer, _, yaw_rate, _ = bicycle_step(
            cur[:, :2], cur[:, 2], cur[:, 3], cur[:, 5], steer_target, accel_cmd, params, dt_s
        )
        return torch.cat((pos, yaw[:, None], speed[:, None], yaw_rate[:, None], steer[:, None]), dim=-1)

    return step


def one_step_errors(step: StepFn, h: Histories, sel: np.ndarray) -> dict[str, float]:
    """Mean one-step errors of ``step`` on transitions ``sel``: position [m], |yaw| [rad], |speed| [m/s]."""
    i = torch.from_numpy(np.flatnonzero(sel))
    with torch.no_grad():
        pred = step(h.states[i], h.actions[i], h.friction[i])
    true = h.next_state[i]
    return {
        "pos_err_m": float((pred[:, :2] - true[:, :2]).norm(dim=-1).mean()),
        "yaw_err_rad": float(wrap_angle(pred[:, 2] - true[:, 2]).abs().mean()),
        "speed_err_mps": float((pred[:, 3] - true[:, 3]).abs().mean()),
    }


def rollout_error(step: StepFn, h: Histories, sel: np.ndarray, horizon: int) -> tuple[float, int]:
    """Mean final position error [m] of open-loop ``horizon``-step rollouts, and how many windows.

    Windows start at positions 0, horizon, 2·horizon, … of every segment among ``sel`` and must lie
    wholly inside it; the model's own predictions feed its history, the actions are the logged ones.
    Returns ``(nan, 0)`` when no segment is long enough.
    """
    n = len(h.segment)
    start = np.flatnonzero(sel & (h.pos_in_segment % horizon == 0))
    end = start + horizon - 1
    ok = end < n
    start, end = start[ok], end[ok]
    start = start[h.segment[end] == h.segment[start]]
    if len(start) == 0:
        return math.nan, 0
    s = torch.from_numpy(start)
    states, actions, friction = h.states[s].clone(), h.actions[s].clone(), h.friction[s]
    with torch.no_grad():
        for k in range(horizon):
            nxt = step(states, actions, friction)
            if k + 1 < horizon:
                states = torch.cat((states[:, 1:], nxt[:, None]), dim=1)
                actions = torch.cat((actions[:, 1:], h.actions[s + k + 1][:, -1:]), dim=1)
    err = (nxt[:, :2] - h.next_state[s + horizon - 1][:, :2]).norm(dim=-1)
    return float(err.mean()), len(start)


def evaluate(step: StepFn, h: Histories, sel: np.ndarray) -> dict[str, float | int]:
    """One-step and open-loop (:data:`ROLLOUT_STEPS`) metrics of ``step`` on transitions ``sel``."""
    out: dict[str, float | int] = dict(one_step_errors(step, h, sel))
    for horizon in ROLLOUT_STEPS:
        err, count = rollout_error(step, h, sel, horizon)
        out[f"rollout{horizon}_pos_err_m"] = err
        out[f"rollout{horizon}_windows"] = count
    return out


def _resolve_config(cfg: DynamicsModelConfig, meta: dict[str, Any]) -> DynamicsModelConfig:
    """Fill ``dt_s``/``vehicle`` from the dataset; refuse values that contradict it."""
    dt_s = float(meta["policy_dt_s"])
    vehicle = VehicleParams(**meta["vehicle"])
    if cfg.dt_s is not None and not math.isclose(cfg.dt_s, dt_s):
        raise UserError(f"config dt_s {cfg.dt_s} differs from the dataset's policy_dt_s {dt_s}")
    if cfg.vehicle is not None and cfg.vehicle != vehicle:
        raise UserError(f"config vehicle {cfg.vehicle} differs from the dataset's {vehicle}")
    return replace(cfg, dt_s=dt_s, vehicle=vehicle)


def fit_dynamics(
    data_dir: Path,
    cfg: DynamicsModelConfig,
    out_dir: Path,
    epochs: int = 10,
    seed: int = 0,
    batch_size: int = 256,
    lr: float = 1e-3,
    holdout_frac: float = 0.2,
    progress: Callable[[int, int, float], None] | None = None,
    dataset: tuple[dict[str, np.ndarray], dict[str, Any]] | None = None,
) -> FitResult:
    """Train ``cfg``'s model on the dataset in ``data_dir``; write ``model.pt`` and ``metrics.json``.

    ``epochs`` passes over the training transitions with minibatches of ``batch_size`` (Adam,
    learning rate ``lr``); ``holdout_frac`` of the episodes are held out for the metrics;
    ``progress(epoch, epochs, mean_loss)`` is called after each epoch. Runs on the CPU.
    ``dataset``: the folder's :func:`load_transitions` ``(data, meta)`` (with ``min_episodes=2``)
    when the caller has read and checked it already (the CLI does, before its progress bar);
    otherwise it is read here. See the module docstring for the procedure and the metrics.
    """
    if epochs < 1 or batch_size < 1 or not lr > 0.0:
        raise UserError(f"epochs, batch size and lr must be positive, got {epochs}, {batch_size}, {lr}")
    data, meta = dataset if dataset is not None else load_transitions(data_dir, min_episodes=2)
    cfg = _resolve_config(cfg, meta)
    h = build_histories(data, cfg.history_steps)
    held = holdout_mask(h.episode, holdout_frac, seed)
    train_idx = torch.from_numpy(np.flatnonzero(~held))

    torch.manual_seed(seed)
    model = make_model(cfg)
    features = history_features(h.states, h.actions, h.friction)
    deltas = body_deltas(h.states[:, -1, :], h.next_state)
    model.fit_normalization(features[train_idx], deltas[train_idx])
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    t0 = time.perf_counter()
    model.train()
    for epoch in range(epochs):
        perm = train_idx[torch.randperm(len(train_idx), generator=gen)]
        total, batches = 0.0, 0
        for b in perm.split(batch_size):
            loss = (((model(features[b]) - deltas[b]) / model.loss_scale) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, batches = total + float(loss.detach()), batches + 1
        losses.append(total / batches)
        if progress is not None:
            progress(epoch + 1, epochs, losses[-1])
    train_s = time.perf_counter() - t0
    model.eval()

    assert cfg.vehicle is not None and cfg.dt_s is not None
    metrics: dict[str, Any] = {
        "model": evaluate(model.predict_next, h, held),
        "kinematic_bicycle": evaluate(bicycle_step_fn(cfg.vehicle, cfg.dt_s), h, held),
        "train": {
            "epochs": epochs,
            "final_loss": losses[-1],
            "losses": losses,
            "train_seconds": train_s,
            "train_transitions": len(train_idx),
            "heldout_transitions": int(held.sum()),
            "heldout_episodes": len(np.unique(h.episode[held])),
            "train_episodes": len(np.unique(h.episode[~held])),
        },
        "config": model_config_to_dict(cfg),
        "dataset": {"path": str(data_dir), "engine": meta.get("engine"), "transitions": len(h.episode)},
        "seed": seed,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    model_path, metrics_path = out_dir / "model.pt", out_dir / "metrics.json"
    stream = io.BytesIO()
    torch.save(
        {
            "format": MODEL_FORMAT,
            "config": model_config_to_dict(cfg),
            "state_dict": model.state_dict(),
            "metrics": metrics,
        },
        stream,
    )
    atomic_write_bytes(model_path, stream.getvalue())
    write_json(metrics_path, metrics)
    return FitResult(model=model, metrics=metrics, model_path=model_path, metrics_path=metrics_path)
