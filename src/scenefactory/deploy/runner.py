"""A torch-free runner for exported Go1 policies: onnxruntime at 50 Hz on any robot interface.

The robot interface (:class:`RobotInterface`) is the seam where hardware plugs in. A real Go1
implements it over Unitree's low-level SDK (``unitree_legged_sdk`` LowCmd/LowState over UDP):
``read`` fills the IMU gyro and quaternion and the 12 motor angles and velocities — re-ordered
into the sidecar's joint order (FR, FL, RR, RL × hip, thigh, calf) —, ``command_pd`` writes
``q``, ``Kp``, ``Kd`` (and ``dq = 0``, ``tau = 0``) per motor so the motor drivers close the PD loop
at their own rate, and ``wait_for_tick`` sleeps to the next 20 ms tick. The simulated robots of
``deploy.robot`` implement the same three calls, so what runs in the sim-to-sim check is exactly
what would run on hardware.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnxruntime as ort

from scenefactory.robots.frames import gravity_in_body

SIDECAR_FORMAT = "scenefactory.go1_policy/1"


@dataclass(frozen=True)
class SensorReading:
    """What a Go1 measures, in the sidecar's joint order."""

    gyro_radps: np.ndarray
    """(3,) trunk angular velocity, body frame."""
    quat_wxyz: np.ndarray
    """(4,) trunk orientation (IMU), world ← body."""
    joint_pos_rad: np.ndarray
    """(12,)"""
    joint_vel_radps: np.ndarray
    """(12,)"""


class RobotInterface(Protocol):
    """What the runner needs from a robot (simulated or real)."""

    def read(self) -> SensorReading:
        """Latest sensor values."""
        ...

    def command_pd(self, joint_targets: np.ndarray, kp: float, kd: float) -> None:
        """Hand (12,) position targets and gains to the joint-level PD controllers."""
        ...

    def wait_for_tick(self) -> None:
        """Block until the next control tick (a simulator advances its physics to it)."""
        ...


class OnnxPolicyRunner:
    """Loads ``go1_policy.onnx`` + ``go1_policy.json`` and turns readings into PD targets."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        """Read and check the sidecar; open the ONNX model on the CPU."""
        root = Path(folder)
        side = root / "go1_policy.json"
        if not side.is_file():
            raise FileNotFoundError(
                f"{side}: no policy sidecar (expected a folder written by 'scenefactory export go1')"
            )
        try:
            meta: dict[str, Any] = json.loads(side.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{side}: not valid JSON ({exc})") from exc
        if meta.get("format") != SIDECAR_FORMAT:
            raise ValueError(f"{side}: field 'format' is {meta.get('format')!r}, expected '{SIDECAR_FORMAT}'")
        onnx_path = root / meta["onnx"]
        if not onnx_path.is_file():
            raise FileNotFoundError(f"{onnx_path}: the ONNX file named by {side} is missing")
        self.meta = meta
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        try:
            obs = meta["observation"]
            self.history = int(obs["history"])
            self.frame_dim = int(obs["frame_dim"])
            self.home = np.asarray(meta["default_joint_pos_rad"], dtype=np.float64)
            self.kp, self.kd = float(meta["kp"]), float(meta["kd"])
            self.control_hz = float(meta["control_hz"])
            self._state_spec = [
                (str(e["input"]), str(e["output"]), tuple(int(d) for d in e["shape"]))
                for e in meta.get("recurrent_state", [])
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{side}: missing or malformed field ({exc!r})") from exc
        if self.home.shape != (12,):
            raise ValueError(f"{side}: default_joint_pos_rad has shape {self.home.shape}, expected (12,)")
        self._frames = np.zeros((self.history, self.frame_dim), dtype=np.float32)
        self._last_action = np.zeros(12, dtype=np.float32)
        self._fresh = True
        self._outputs = ["action", "joint_targets", *(o for _, o, _ in self._state_spec)]
        self._check_graph(side, onnx_path)
        self._state: dict[str, np.ndarray] = {}
        self.reset()

    def _check_graph(self, side: Path, onnx_path: Path) -> None:
        """The ONNX graph has the inputs and outputs the sidecar describes, with matching widths
        (dimensions the graph leaves symbolic, like the batch, are not checked)."""
        inputs = {i.name: i.shape for i in self.session.get_inputs()}
        outputs = {o.name: o.shape for o in self.session.get_outputs()}

        def fits(shape: Any, expected: tuple[int, ...]) -> bool:
            dims = list(shape)
            return len(dims) == len(expected) and all(
                not isinstance(d, int) or d == e for d, e in zip(dims, expected, strict=True)
            )

        width = self.history * self.frame_dim
        if "obs" not in inputs:
            raise ValueError(f"{onnx_path}: no input 'obs' (inputs: {sorted(inputs)})")
        if not fits(inputs["obs"], (1, width)):
            raise ValueError(
                f"{onnx_path}: input 'obs' has shape {inputs['obs']}, but {side} describes "
                f"history {self.history} × frame_dim {self.frame_dim} = {width}"
            )
        for name in ("action", "joint_targets"):
            if name not in outputs or not fits(outputs[name], (1, 12)):
                raise ValueError(
                    f"{onnx_path}: expected an output '{name}' of shape (batch, 12), got {outputs.get(name)}"
                )
        for i, o, shape in self._state_spec:
            if i not in inputs:
                raise ValueError(f"{side}: recurrent state input '{i}' is not an input of {onnx_path}")
            if o not in outputs:
                raise ValueError(f"{side}: recurrent state output '{o}' is not an output of {onnx_path}")
            if not fits(inputs[i], shape):
                raise ValueError(
                    f"{side}: recurrent state '{i}' has shape {list(shape)}, the graph takes {inputs[i]}"
                )

    @property
    def recurrent(self) -> bool:
        """Whether the policy carries a hidden state from tick to tick."""
        return bool(self._state_spec)

    def reset(self) -> None:
        """Forget the history, the last action and any recurrent state (call when the robot is
        (re)started)."""
        self._last_action[:] = 0.0
        self._fresh = True
        self._state = {i: np.zeros(shape, dtype=np.float32) for i, _, shape in self._state_spec}

    def frame(self, r: SensorReading, command: np.ndarray) -> np.ndarray:
        """(45,) one observation frame in the sidecar's layout."""
        return np.concatenate(
            [
                r.gyro_radps,
                gravity_in_body(r.quat_wxyz),
                np.asarray(command, dtype=np.float64),
                r.joint_pos_rad - self.home,
                r.joint_vel_radps,
                self._last_action,
            ]
        ).astype(np.float32)

    def act(self, r: SensorReading, command: np.ndarray) -> np.ndarray:
        """(12,) joint targets [rad] for the reading and the (vx, vy, yaw rate) command."""
        f = self.frame(r, command)
        if self._fresh:
            self._frames[:] = f
            self._fresh = False
        else:
            self._frames = np.roll(self._frames, 1, axis=0)
            self._frames[0] = f
        action, targets, *state = self.session.run(
            self._outputs, {"obs": self._frames.reshape(1, -1), **self._state}
        )
        for (i, _, _), value in zip(self._state_spec, state, strict=True):
            self._state[i] = value
        self._last_action = action[0].astype(np.float32)
        return targets[0].astype(np.float64)

    def step(self, robot: RobotInterface, command: np.ndarray) -> SensorReading:
        """One control tick: read, infer, command the PD targets, wait; returns the reading used."""
        r = robot.read()
        robot.command_pd(self.act(r, command), self.kp, self.kd)
        robot.wait_for_tick()
        return r
