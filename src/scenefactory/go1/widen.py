"""Widening a saved Go1 policy for whole-body commands, so that a fine-tune starts as the old policy.

A frame gains three command columns (height, pitch, roll) after the velocity command
(``observations.frame_layout``): columns 9:12 of each of the actor's ``history`` frames and of the
critic's one clean frame; every later column moves. For each network that reads them (the actor;
the critic when the checkpoint has one) the first layer — the MLP's first weight, or a recurrent
actor's input weight — gets zero weights for the new columns, so its outputs are exactly the old
ones until training moves them; the observation normalizer keeps its statistics for the old
columns and takes the new columns' mean and variance from observations of the new task (the saved
count would otherwise freeze them at mean 0, variance 1). Adam's moments for the two widened
weights gain zero columns, so the optimizer continues as it was for the old inputs.

An actor can also be given more frames of history (:func:`grow_history`): the older frames get
zero weights and the newest frame's normalizer statistics.
"""

from __future__ import annotations

from typing import Any

import torch

from scenefactory.errors import CheckpointError
from scenefactory.go1.observations import COMMAND_START, FRAME_DIM, VELOCITY_COMMANDS, WHOLE_BODY_COMMANDS

FIRST_LAYER_KEYS = ("rnn.rnn.weight_ih_l0", "mlp.0.weight")
"""Where an rsl-rl model's first layer reads its inputs: a recurrent layer's input weight, else the
MLP's first weight."""
NORMALIZER_STATS = ("obs_normalizer._mean", "obs_normalizer._var", "obs_normalizer._std")
INSERT_AT = COMMAND_START + len(VELOCITY_COMMANDS)
"""Frame column where the whole-body commands go."""


def first_layer_key(state: dict[str, torch.Tensor]) -> str:
    """The key of the weight (out, inputs) that reads a model's inputs; CheckpointError if none."""
    for key in FIRST_LAYER_KEYS:
        if key in state:
            return key
    raise CheckpointError(f"a saved network without a first layer to widen (none of {FIRST_LAYER_KEYS})")


def command_columns(old_width: int, frames: int) -> torch.Tensor:
    """(old_width,) int64: where each input column of a velocity-only network goes when each of its
    first ``frames`` frames of 45 values gains the 3 whole-body commands at frame column 9; columns
    after the frames (the critic's privileged values, a teacher's parameters) move by 3 per frame."""
    if old_width < frames * FRAME_DIM:
        raise ValueError(f"{old_width} inputs cannot hold {frames} frames of {FRAME_DIM}")
    added = len(WHOLE_BODY_COMMANDS)
    c = torch.arange(old_width)
    frame = torch.div(c, FRAME_DIM, rounding_mode="floor").clamp(max=frames)
    inside = (frame < frames) & (c - frame * FRAME_DIM >= INSERT_AT)
    return c + frame * added + inside.long() * added


def history_columns(old_width: int, old_frames: int, new_frames: int, frame_width: int) -> torch.Tensor:
    """(old_width,) int64: where each input column of an actor that read ``old_frames`` frames of
    ``frame_width`` (newest first) goes when it reads ``new_frames``: the old frames keep their
    columns, the older frames are added after them, and columns after the frames (the height scan)
    move by the added frames' width."""
    if not 0 < old_frames <= new_frames or old_width < old_frames * frame_width:
        raise ValueError(f"{old_width} inputs of {old_frames} frames cannot grow to {new_frames} frames")
    c = torch.arange(old_width)
    return torch.where(c < old_frames * frame_width, c, c + (new_frames - old_frames) * frame_width)


def grow_history(
    state: dict[str, torch.Tensor], old_frames: int, new_frames: int, frame_width: int
) -> dict[str, torch.Tensor]:
    """An actor's weights for ``new_frames`` frames of ``frame_width`` when it was trained on
    ``old_frames`` (newest first; :func:`history_columns`): the older frames get zero first-layer
    weights, so it acts exactly as before, and the normalizer statistics of its newest frame — an
    older frame is the same signals a few steps late, and observations at a reset (every frame the
    reset frame, joint velocities and last actions zero) would give them a near-zero variance that
    the saved count then freezes. Other entries are kept."""
    w = state[first_layer_key(state)]
    added = new_frames - old_frames
    cols = history_columns(int(w.shape[1]), old_frames, new_frames, frame_width)
    width = int(w.shape[1]) + added * frame_width
    stats = {
        n: torch.cat([state[n][..., :frame_width]] * added, dim=-1) for n in NORMALIZER_STATS if n in state
    }
    return _placed(state, cols, width, stats)


def widen_state(
    state: dict[str, torch.Tensor], columns: torch.Tensor, inputs: torch.Tensor
) -> dict[str, torch.Tensor]:
    """A model's weights for ``inputs`` (B, W) where its old input column ``k`` is now column
    ``columns[k]``: zero first-layer weights and the statistics of ``inputs`` for the new columns
    (module docstring). Other entries are kept."""
    width = int(inputs.shape[-1])
    w = state[first_layer_key(state)]
    if columns.numel() != w.shape[1] or int(columns.max()) >= width:
        raise ValueError(f"columns {columns.numel()} → {width} do not fit a first layer of {tuple(w.shape)}")
    fresh = torch.ones(width, dtype=torch.bool)
    fresh[columns] = False
    new_inputs = inputs[:, fresh].to(torch.float32)
    var = new_inputs.var(dim=0, unbiased=False)
    stats = dict(zip(NORMALIZER_STATS, (new_inputs.mean(dim=0), var, var.sqrt()), strict=True))
    return _placed(state, columns, width, stats)


def _placed(
    state: dict[str, torch.Tensor], columns: torch.Tensor, width: int, stats: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """``state`` with its first layer and normalizer statistics ``width`` wide: old column ``k`` at
    ``columns[k]``; the other columns get zero weights and, in column order, the values of
    ``stats`` (per statistic the state holds). Other entries are kept."""
    key = first_layer_key(state)
    w = state[key]
    fresh = torch.ones(width, dtype=torch.bool)
    fresh[columns] = False
    out = dict(state)
    for name, value in stats.items():
        if name in state:
            old = state[name]
            new = old.new_empty(*old.shape[:-1], width)
            new[..., columns] = old
            new[..., fresh] = value.to(old.dtype)
            out[name] = new
    wide = w.new_zeros(w.shape[0], width)
    wide[:, columns] = w
    out[key] = wide
    return out


def optimizer_index(optimizer: torch.optim.Optimizer, param: torch.Tensor) -> int:
    """The index of ``param`` in ``optimizer.state_dict()["state"]`` (parameters counted across
    groups, in order)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for i, p in enumerate(params):
        if p is param:
            return i
    raise ValueError("the parameter is not one the optimizer updates")


def widen_optimizer_state(
    opt_state: dict[str, Any], widened: dict[int, tuple[torch.Tensor, int]]
) -> dict[str, Any]:
    """An optimizer state whose per-parameter moments of the parameters ``widened`` (index →
    (columns, new width)) are moved to those columns, zero elsewhere; the rest is kept."""
    state = dict(opt_state["state"])
    for index, (columns, width) in widened.items():
        entry = dict(state.get(index, {}))
        for name, value in entry.items():
            if isinstance(value, torch.Tensor) and value.ndim == 2 and value.shape[1] == columns.numel():
                wide = value.new_zeros(value.shape[0], width)
                wide[:, columns] = value
                entry[name] = wide
        state[index] = entry
    return {**opt_state, "state": state}


def widen_for_whole_body(
    data: dict[str, Any],
    history: int,
    actor_inputs: torch.Tensor,
    critic_inputs: torch.Tensor,
    critic_frames: int,
    alg: Any,
) -> dict[str, Any]:
    """A velocity-only training checkpoint ``data`` made fit for PPO ``alg`` on a whole-body task of
    ``history`` frames: actor, critic (when saved; it reads ``critic_frames`` frames, 1 for the
    privileged critic) and the optimizer's moments widened (module docstring). ``actor_inputs`` and
    ``critic_inputs`` are observations of the new task, (B, W)."""
    out = dict(data)
    actor_state = data["actor_state_dict"]
    a_cols = command_columns(int(actor_state[first_layer_key(actor_state)].shape[1]), history)
    out["actor_state_dict"] = widen_state(actor_state, a_cols, actor_inputs)
    critic_state = data.get("critic_state_dict")
    if critic_state is None:
        return out
    c_cols = command_columns(int(critic_state[first_layer_key(critic_state)].shape[1]), critic_frames)
    out["critic_state_dict"] = widen_state(critic_state, c_cols, critic_inputs)
    opt = data.get("optimizer_state_dict")
    if opt is not None:
        actor, critic = alg.get_policy(), alg.critic
        widened = {}
        for model, cols, inputs in ((actor, a_cols, actor_inputs), (critic, c_cols, critic_inputs)):
            param = dict(model.named_parameters())[first_layer_key(model.state_dict())]
            widened[optimizer_index(alg.optimizer, param)] = (cols, int(inputs.shape[-1]))
        out["optimizer_state_dict"] = widen_optimizer_state(opt, widened)
    return out
