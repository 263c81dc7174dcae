"""Export a Go1 policy: ``go1_policy.onnx`` with normalization and action scaling inside, plus a
JSON sidecar ``go1_policy.json`` that says everything a robot-side runner needs.

The ONNX graph maps ``obs`` (B, history·45) float32 — the actor's stacked frames, newest first,
raw units (layout in the sidecar) — to ``action`` (B, 12), the clipped policy output that the next
frame's "last action" slot needs, and ``joint_targets`` (B, 12) [rad] = home + scale · action, in
the sidecar's joint order, for the robot's PD loop with the sidecar's gains. A recurrent policy
also takes its state (``h_in``, and ``c_in`` for an LSTM; (layers, B, hidden), zeros after a
reset) and returns the next one (``h_out``, ``c_out``); the sidecar's ``recurrent_state`` lists
them (empty for a feed-forward policy). A policy with whole-body commands reads 48-value frames
whose command slice is (vx, vy, yaw rate, height, pitch, roll); the sidecar's
``observation.whole_body_commands`` names them, with their ranges and nominal values (``null``
for a velocity-only policy).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from scenefactory.go1 import robot as go1
from scenefactory.go1.config import WholeBodyConfig
from scenefactory.go1.observations import WHOLE_BODY_COMMANDS, command_names, frame_dim, frame_layout
from scenefactory.go1.train import Go1Policy
from scenefactory.io import atomic_write_bytes, write_json

SIDECAR_FORMAT = "scenefactory.go1_policy/1"
ONNX_NAME = "go1_policy.onnx"
SIDECAR_NAME = "go1_policy.json"


class DeployPolicy(nn.Module):
    """Observation normalization → [recurrent layer] → actor MLP (mean action) → clip → joint targets."""

    def __init__(self, policy: Go1Policy) -> None:
        """Wrap the actor of ``policy`` with the task's action clip, scale and home pose."""
        super().__init__()
        actor = policy.actor
        self.normalizer = actor.obs_normalizer
        self.rnn: nn.Module | None = actor.rnn.rnn if policy.recurrent else None
        self.mlp = actor.mlp
        self.distribution = actor.distribution
        cfg = policy.task_cfg
        self.clip = float(cfg.action_clip)
        self.scale = float(cfg.action_scale)
        self.register_buffer("home", torch.tensor(go1.default_joint_pos(), dtype=torch.float32))

    def state_shapes(self) -> list[tuple[int, int, int]]:
        """(layers, 1, hidden) per recurrent state tensor: [h] for a GRU, [h, c] for an LSTM."""
        if not isinstance(self.rnn, nn.RNNBase):
            return []
        shape = (self.rnn.num_layers, 1, self.rnn.hidden_size)
        return [shape, shape] if isinstance(self.rnn, nn.LSTM) else [shape]

    def forward(self, obs: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(action, joint_targets, *next_state): actions (B, 12), states (layers, B, hidden)."""
        x = self.normalizer(obs)
        new_state: tuple[torch.Tensor, ...] = ()
        if self.rnn is not None:
            if isinstance(self.rnn, nn.LSTM):
                y, (h, c) = self.rnn(x.unsqueeze(0), (state[0], state[1]))
                new_state = (h, c)
            else:
                y, h = self.rnn(x.unsqueeze(0), state[0])
                new_state = (h,)
            x = y.squeeze(0)
        out = self.mlp(x)
        mean = self.distribution.deterministic_output(out) if self.distribution is not None else out
        action = mean.clamp(-self.clip, self.clip)
        return (action, self.home + self.scale * action, *new_state)


STATE_NAMES = (("h_in", "h_out"), ("c_in", "c_out"))
"""ONNX names of the recurrent state tensors (input, output), in :meth:`DeployPolicy.state_shapes` order."""


def whole_body_sidecar(wb: WholeBodyConfig) -> dict[str, Any] | None:
    """The sidecar's ``observation.whole_body_commands``: names, order, ranges, nominal values and
    conventions of the whole-body commands (``None`` when the policy has none)."""
    if not wb.enabled:
        return None
    return {
        "names": list(WHOLE_BODY_COMMANDS),
        "order": "in the frame's command slice after vx_mps, vy_mps, yaw_radps",
        "ranges": {
            "height_m": list(wb.height_m),
            "pitch_rad": list(wb.pitch_rad),
            "roll_rad": list(wb.roll_rad),
        },
        "nominal": [wb.nominal_height_m, 0.0, 0.0],
        "conventions": (
            "height_m: trunk origin above the floor; pitch_rad, roll_rad: Z-Y-X Euler angles of the trunk "
            "from projected gravity g: pitch = atan2(g_x, hypot(g_y, g_z)), positive nose down; "
            "roll = atan2(-g_y, -g_z), positive right side down"
        ),
    }


def sidecar(policy: Go1Policy, onnx_sha256: str) -> dict[str, Any]:
    """The JSON sidecar: joint order, home pose, gains, observation layout and scales, rates."""
    cfg = policy.task_cfg
    wb = cfg.whole_body
    return {
        "format": SIDECAR_FORMAT,
        "robot": "go1",
        "onnx": ONNX_NAME,
        "onnx_sha256": onnx_sha256,
        "control_hz": cfg.policy_hz,
        "joint_names": list(go1.JOINT_NAMES),
        "default_joint_pos_rad": go1.default_joint_pos().tolist(),
        "kp": cfg.kp,
        "kd": cfg.kd,
        "torque_limits_nm": go1.torque_limits().tolist(),
        "action_scale": cfg.action_scale,
        "action_clip": cfg.action_clip,
        "observation": {
            "history": cfg.history,
            "frame_dim": frame_dim(wb.enabled),
            "order": "newest frame first; frames start as copies of the first frame after a reset",
            "frame_layout": [{"name": n, "start": a, "stop": b} for n, a, b in frame_layout(wb.enabled)],
            "command_names": list(command_names(wb.enabled)),
            "scales": "none: raw SI units (rad, rad/s); normalization is inside the ONNX graph",
            "projected_gravity": "unit vector of world gravity (0, 0, -1) in the trunk frame",
            "command_ranges": {
                "vx_mps": list(cfg.commands.vx_mps),
                "vy_mps": list(cfg.commands.vy_mps),
                "yaw_radps": list(cfg.commands.yaw_radps),
                **(whole_body_sidecar(wb) or {}).get("ranges", {}),
            },
            "whole_body_commands": whole_body_sidecar(wb),
        },
        "outputs": {
            "action": "clipped policy output (B, 12); feed back as the next frame's last action",
            "joint_targets": "PD position targets [rad] (B, 12) = default_joint_pos + action_scale * action",
        },
        "recurrent_state": [
            {"input": i, "output": o, "shape": list(shape)}
            for (i, o), shape in zip(STATE_NAMES, DeployPolicy(policy).state_shapes(), strict=False)
        ],
        "recurrent_state_usage": (
            "feed each output back as its input at the next tick (batch on axis 1); "
            "zeros at start and after every reset; empty list: a feed-forward policy"
        ),
        "checkpoint": dict(policy.meta),
    }


def _export(model: DeployPolicy, obs: torch.Tensor, path: Path) -> None:
    names = STATE_NAMES[: len(model.state_shapes())]
    state = tuple(torch.zeros(shape) for shape in model.state_shapes())
    axes = {"obs": {0: "batch"}, "action": {0: "batch"}, "joint_targets": {0: "batch"}}
    axes.update({name: {1: "batch"} for pair in names for name in pair})
    torch.onnx.export(
        model,
        (obs, *state),
        str(path),
        input_names=["obs", *(i for i, _ in names)],
        output_names=["action", "joint_targets", *(o for _, o in names)],
        dynamic_axes=axes,
        dynamo=False,
    )


def export_go1(policy: Go1Policy, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``go1_policy.onnx`` and ``go1_policy.json`` into ``out_dir`` (atomically)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = DeployPolicy(policy).eval()
    obs = torch.zeros(1, policy.task_cfg.history * frame_dim(policy.task_cfg.whole_body.enabled))
    tmp = out / f".{ONNX_NAME}.tmp"
    with warnings.catch_warnings():  # the TorchScript exporter is deprecated upstream; torch is pinned
        warnings.simplefilter("ignore", DeprecationWarning)
        # tracing an RNN warns about shape checks and batch sizes; the state is an input, batch dynamic
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Exporting a model to ONNX with a batch_size")
        _export(model, obs, tmp)
    data = tmp.read_bytes()
    tmp.unlink()
    onnx_path = out / ONNX_NAME
    atomic_write_bytes(onnx_path, data)
    side = out / SIDECAR_NAME
    write_json(side, sidecar(policy, hashlib.sha256(data).hexdigest()))
    return {"onnx": onnx_path, "sidecar": side}
