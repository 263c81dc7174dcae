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

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnxruntime as ort

from scenefactory.go1.frames import gravity_in_body
from scenefactory.io import show_value

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


FRAME_DIM = 45
"""Width of one observation frame: gyro 3, gravity 3, command 3, joint positions, velocities and the
last action 12 each (:meth:`OnnxPolicyRunner.frame`); 3 more for whole-body commands."""
WHOLE_BODY_COMMANDS = ["height_m", "pitch_rad", "roll_rad"]
"""The sidecar's ``observation.whole_body_commands.names`` this runner feeds, after the velocity command."""
NUM_JOINTS = 12
MAX_HISTORY = 1000
MAX_STATE_SIZE = 10_000_000
"""Most numbers a recurrent state tensor may hold (the sidecar sets its shape)."""


class SidecarError(ValueError):
    """A policy folder whose sidecar or ONNX file cannot be used; the message names the file and
    field and says what was expected."""


_show = show_value


class _Sidecar:
    """Typed reads of the sidecar's fields, each refused with a :class:`SidecarError` naming it."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path, self.meta = path, meta

    def fail(self, field: str, expected: str, value: Any) -> SidecarError:
        return SidecarError(f"{self.path}: field '{field}': expected {expected}, got {_show(value)}")

    def get(self, field: str, expected: str) -> Any:
        node: Any = self.meta
        parts = field.split(".")
        for k, part in enumerate(parts):
            if not isinstance(node, dict):
                raise self.fail(".".join(parts[:k]), "an object", node)
            if part not in node:
                raise SidecarError(
                    f"{self.path}: field '{field}': expected {expected}, got nothing (missing)"
                )
            node = node[part]
        return node

    def number(self, field: str, low: float, high: float, low_open: bool = False) -> float:
        opening = "(" if low_open else "["
        expected = f"a finite number in {opening}{low:g}, {high:g}]"
        value = self.get(field, expected)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not (low < value if low_open else low <= value) or not value <= high:
            raise self.fail(field, expected, value)
        return float(value)

    def integer(self, field: str, low: int, high: int) -> int:
        expected = f"an integer in [{low}, {high}]"
        value = self.get(field, expected)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(field, expected, value)
        return value

    def numbers(self, field: str, count: int, low: float, high: float) -> np.ndarray:
        expected = f"a list of {count} finite numbers in [{low:g}, {high:g}]"
        value = self.get(field, expected)
        if not isinstance(value, list) or len(value) != count:
            raise self.fail(field, expected, value)
        for k, v in enumerate(value):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise self.fail(f"{field}[{k}]", "a finite number", v)
            if not low <= v <= high:
                raise self.fail(f"{field}[{k}]", f"a number in [{low:g}, {high:g}]", v)
        return np.asarray(value, dtype=np.float64)

    def text(self, field: str, expected: str = "a non-empty string") -> str:
        value = self.get(field, expected)
        if not isinstance(value, str) or not value:
            raise self.fail(field, expected, value)
        return value


def read_sidecar(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The sidecar ``go1_policy.json`` of an export folder as an object of the right format
    (:class:`FileNotFoundError` if absent, :class:`SidecarError` if not a readable JSON object)."""
    side = Path(folder) / "go1_policy.json"
    if not side.is_file():
        raise FileNotFoundError(
            f"{side}: no policy sidecar (expected a folder written by 'scenefactory export go1')"
        )
    try:
        meta = json.loads(side.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise SidecarError(
            f"{side}: not UTF-8 text (expected the JSON sidecar of an exported policy)"
        ) from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise SidecarError(f"{side}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise SidecarError(f"{side}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(meta, dict):
        raise SidecarError(f"{side}: expected a JSON object (the policy's sidecar), got {_show(meta)}")
    if meta.get("format") != SIDECAR_FORMAT:
        raise SidecarError(f"{side}: field 'format' is {meta.get('format')!r}, expected '{SIDECAR_FORMAT}'")
    return meta


class OnnxPolicyRunner:
    """Loads ``go1_policy.onnx`` + ``go1_policy.json`` and turns readings into PD targets."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        """Read and check the sidecar (every field the runner uses: types, finite numbers, sizes),
        check the ONNX file against its ``onnx_sha256``, and open it on the CPU. Problems raise
        :class:`FileNotFoundError` (a missing file) or :class:`SidecarError` (a ``ValueError``)
        naming the file and field."""
        root = Path(folder)
        side = root / "go1_policy.json"
        meta = read_sidecar(root)
        f = _Sidecar(side, meta)
        if "robot" in meta and meta["robot"] != "go1":
            raise f.fail("robot", '"go1"', meta["robot"])
        name = f.text("onnx", "the ONNX file's name in this folder")
        if Path(name).name != name or name in (".", ".."):
            raise f.fail("onnx", "a file name in this folder (no path)", name)
        digest = f.text("onnx_sha256", "the SHA-256 of the ONNX file (64 hex digits)").lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise f.fail("onnx_sha256", "64 hex digits", meta["onnx_sha256"])
        self.history = f.integer("observation.history", 1, MAX_HISTORY)
        self.body_nominal = self._read_whole_body(f)
        """(3,) nominal height, pitch, roll of a policy with whole-body commands, else ``None``."""
        width = FRAME_DIM + (0 if self.body_nominal is None else len(WHOLE_BODY_COMMANDS))
        self.frame_dim = f.integer("observation.frame_dim", width, width)
        names = f.get("joint_names", f"a list of {NUM_JOINTS} joint names")
        if (
            not isinstance(names, list)
            or len(names) != NUM_JOINTS
            or not all(isinstance(n, str) and n for n in names)
            or len(set(names)) != NUM_JOINTS
        ):
            raise f.fail("joint_names", f"a list of {NUM_JOINTS} distinct joint names", names)
        self.joint_names: list[str] = names
        self.home = f.numbers("default_joint_pos_rad", NUM_JOINTS, -math.pi, math.pi)
        f.numbers("torque_limits_nm", NUM_JOINTS, 0.0, 1e4)
        self.kp = f.number("kp", 0.0, 1e4, low_open=True)
        self.kd = f.number("kd", 0.0, 1e3)
        self.control_hz = f.number("control_hz", 0.0, 1000.0, low_open=True)
        f.number("action_scale", 0.0, 100.0, low_open=True)
        f.number("action_clip", 0.0, 1e3, low_open=True)
        self._state_spec = self._read_state_spec(f)
        onnx_path = root / name
        if not onnx_path.is_file():
            raise FileNotFoundError(f"{onnx_path}: the ONNX file named by {side} is missing")
        try:
            data = onnx_path.read_bytes()
        except OSError as exc:
            raise SidecarError(f"{onnx_path}: cannot be read ({exc.strerror or exc})") from None
        found = hashlib.sha256(data).hexdigest()
        if found != digest:
            raise SidecarError(
                f"{onnx_path}: SHA-256 {found[:12]}… does not match {side} field 'onnx_sha256' "
                f"({digest[:12]}…); expected the ONNX file exported with this sidecar"
            )
        self.meta = meta
        self.sidecar_path = side
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own error types (InvalidProtobuf, Fail, ...)
            msg = " ".join(str(exc).split())[:200]
            raise SidecarError(
                f"{onnx_path}: not a usable ONNX model ({type(exc).__name__}: {msg})"
            ) from None
        self._frames = np.zeros((self.history, self.frame_dim), dtype=np.float32)
        self._last_action = np.zeros(NUM_JOINTS, dtype=np.float32)
        self._fresh = True
        self._outputs = ["action", "joint_targets", *(o for _, o, _ in self._state_spec)]
        self._check_graph(side, onnx_path)
        self._state: dict[str, np.ndarray] = {}
        self.reset()

    @staticmethod
    def _read_whole_body(f: _Sidecar) -> np.ndarray | None:
        """``observation.whole_body_commands``: its nominal values; absent or null: none."""
        obs = f.get("observation", "an object")
        if not isinstance(obs, dict) or obs.get("whole_body_commands") is None:
            return None
        field = "observation.whole_body_commands"
        names = f.get(f"{field}.names", f"the list {WHOLE_BODY_COMMANDS}")
        if names != WHOLE_BODY_COMMANDS:
            raise f.fail(f"{field}.names", f"the list {WHOLE_BODY_COMMANDS}", names)
        return f.numbers(f"{field}.nominal", len(WHOLE_BODY_COMMANDS), -10.0, 10.0)

    @staticmethod
    def _read_state_spec(f: _Sidecar) -> list[tuple[str, str, tuple[int, ...]]]:
        """``recurrent_state``: (input, output, shape) per state tensor; absent: none."""
        entries = f.meta.get("recurrent_state", [])
        if not isinstance(entries, list):
            raise f.fail("recurrent_state", "a list of {input, output, shape} objects", entries)
        spec = []
        for k, e in enumerate(entries):
            where = f"recurrent_state[{k}]"
            if not isinstance(e, dict):
                raise f.fail(where, "an object {input, output, shape}", e)
            names = []
            for key in ("input", "output"):
                value = e.get(key)
                if not isinstance(value, str) or not value:
                    raise f.fail(f"{where}.{key}", "a tensor name", value)
                names.append(value)
            shape = e.get("shape")
            if (
                not isinstance(shape, list)
                or len(shape) != 3
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape)
                or math.prod(shape) > MAX_STATE_SIZE
            ):
                raise f.fail(f"{where}.shape", "[layers, 1, hidden] of positive integers", shape)
            spec.append((names[0], names[1], tuple(shape)))
        return spec

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
        """(45,) one observation frame in the sidecar's layout (48 with whole-body commands)."""
        cmd = np.asarray(command, dtype=np.float64).reshape(-1)
        if self.body_nominal is not None and cmd.size == 3:  # a velocity command: at the nominal body
            cmd = np.concatenate([cmd, self.body_nominal])
        wanted = self.frame_dim - FRAME_DIM + 3
        if cmd.size != wanted:
            raise ValueError(
                f"command must be (vx, vy, yaw rate){'' if wanted == 3 else ' [+ height, pitch, roll]'}, "
                f"got {cmd.size} values"
            )
        return np.concatenate(
            [
                r.gyro_radps,
                gravity_in_body(r.quat_wxyz),
                cmd,
                r.joint_pos_rad - self.home,
                r.joint_vel_radps,
                self._last_action,
            ]
        ).astype(np.float32)

    def act(self, r: SensorReading, command: np.ndarray) -> np.ndarray:
        """(12,) joint targets [rad] for the reading and the (vx, vy, yaw rate) command; for a
        policy with whole-body commands, (vx, vy, yaw rate, height, pitch, roll), or the first three
        at the sidecar's nominal body command."""
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
