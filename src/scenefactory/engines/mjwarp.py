"""The batched MuJoCo Warp stepper: every world of one ``MjModel`` in one ``mujoco_warp`` Model/Data.

:class:`WarpSim` is the Warp twin of :class:`~scenefactory.engines.mjbatch.BatchedSim` (same
methods, same ``state_dict`` layout) for the ``mujoco-warp`` tier:

- **state as torch tensors without copies**: :meth:`WarpSim.tensor` is a live ``(num_worlds, ...)``
  view of a Data field (``wp.to_torch``: the tensor and the Warp array share memory, on the CPU and
  on a GPU), :meth:`WarpSim.model_tensor` of a per-world Model field;
- **per-world model fields** for randomization (``geom_friction``, ``dof_frictionloss``, masses,
  ...): :meth:`WarpSim.expand` replaces the shared ``(1, ...)`` field by a ``(num_worlds, ...)``
  copy, which MuJoCo Warp's kernels index per world (``worldid % shape[0]``);
- **decimation in one graph**: :meth:`WarpSim.step` records its ``nstep`` substeps (each
  ``mujoco_warp.step`` followed by an optional ``hook`` that launches Warp kernels, e.g. a sensor
  read) once with ``wp.ScopedCapture`` and replays the graph afterwards: a CUDA graph on a GPU,
  Warp's own replay of the recorded launches on the CPU (the same numbers as launching them one by
  one, bit for bit, about 10x faster on the CPU because Python is out of the loop);
- partial resets by world ids, a health check naming the worlds that blew up or overflowed the
  contact/constraint buffers, and ``state_dict``/``load_state_dict``.

Numbers: MuJoCo Warp computes in float32 (MuJoCo C in float64), so its trajectories agree with the
C engine's within a tolerance, not bit for bit (``tests/engines/test_warp_equivalence.py``). On the CPU it
is deterministic; on a GPU the order of contacts comes from atomics, so two runs may differ in the
last bits.

Devices: on the CPU the numpy arrays of :meth:`bind` and :meth:`expand` are the same memory as the
Warp arrays (zero copy), so numpy code written for ``BatchedSim`` (the Go1 task) runs unchanged. On
a GPU they are **host copies**: written to the device before every :meth:`step`, :meth:`forward` or
:meth:`set_const` and read back after it — correct, but the copies cost what the GPU gains; code
that wants GPU speed uses the torch views (the car engine, ``engines.warp_engine``). A run uses
either the numpy arrays or the torch views of a field, not both (on a GPU a host copy would
overwrite what the torch view wrote). On a GPU the Warp work runs on a stream of its own, ordered
after the torch work queued before it and before the torch work queued after it.

Buffers: MuJoCo Warp preallocates contacts (``nconmax`` per world, pooled over the worlds) and
constraint rows (``njmax`` per world). The defaults are sized from the model's own state at
``qpos0`` (twice its contacts plus 16, room for every extra contact's rows and a row per dof);
:meth:`check_health` raises when a step overflowed them, naming the worlds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
import torch

from scenefactory.engines.mjbatch import BatchedSim
from scenefactory.errors import UserError

SIM_ENGINES = ("mujoco", "mujoco-warp")
"""The MuJoCo engines a task's worlds can run on: MuJoCo C (``BatchedSim``) or MuJoCo Warp
(:class:`WarpSim`)."""

Hook = Callable[[], None]
"""Launches Warp kernels after each substep (recorded into the step's graph with it)."""

INTEGRATION_FIELDS = ("qpos", "qvel", "act", "ctrl", "qacc_warmstart", "time")
"""Data fields the next step depends on (as ``BatchedSim.INTEGRATION_FIELDS``)."""

DERIVED_FIELDS = {
    "body_mass": ("body_subtreemass", "body_invweight0", "dof_invweight0"),
    "body_inertia": ("body_invweight0", "dof_invweight0"),
    "body_ipos": ("body_invweight0", "dof_invweight0"),
    "body_iquat": ("body_invweight0", "dof_invweight0"),
    "dof_armature": ("body_invweight0", "dof_invweight0"),
}
"""Model fields that :meth:`WarpSim.set_const` derives from a field: expanded with it, so that each
world gets its own (``mujoco_warp.set_const`` writes them per world)."""

FATAL_OVERFLOWS = ~((1 << 9) | (1 << 10))
"""``mujoco_warp.OverflowType`` bits that make a step wrong (dropped contacts or constraint rows);
the solver's iteration limits (bits 9 and 10) are not among them, as in MuJoCo C."""


WARP_MISSING = (
    "the mujoco-warp engine needs MuJoCo Warp, an optional extra: pip install 'scenefactory[warp]' "
    "(mujoco-warp and warp-lang)"
)


def require_warp() -> None:
    """A :class:`~scenefactory.errors.UserError` saying how to install MuJoCo Warp when it is missing."""
    try:
        import mujoco_warp  # noqa: F401
        import warp  # noqa: F401
    except ImportError as exc:
        raise UserError(f"{WARP_MISSING} ({exc})") from exc


def _warp() -> Any:
    """``warp``, initialized quietly (its module-load lines are INFO messages)."""
    require_warp()
    import warp as wp

    if wp.config.log_level < wp.LOG_WARNING:
        wp.config.log_level = wp.LOG_WARNING
    wp.init()
    return wp


def warp_installed() -> bool:
    """Whether the optional MuJoCo Warp extra is importable (without importing it)."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("warp", "mujoco_warp"))


def cuda_available() -> bool:
    """Whether both torch and Warp see a CUDA device."""
    if not torch.cuda.is_available():
        return False
    return bool(_warp().is_cuda_available())


def check_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch device: the CPU, or a CUDA device that torch and Warp both see; a
    :class:`~scenefactory.errors.UserError` otherwise."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise UserError(f"--device must be cpu or cuda (or cuda:N), got {device!r}") from exc
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise UserError(f"--device must be cpu or cuda (or cuda:N), got {device!r}")
    if not torch.cuda.is_available():
        raise UserError(
            f"--device {device}: torch sees no CUDA device (torch {torch.__version__}, "
            f"built for CUDA {torch.version.cuda or 'none: a CPU-only build'}); use --device cpu"
        )
    if warp_installed() and not cuda_available():  # Warp is needed only by the mujoco-warp tier
        raise UserError(f"--device {device}: Warp sees no CUDA device (no driver?); use --device cpu")
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise UserError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s)")
    return torch.device("cuda", index)


def ground_pairs(model: mujoco.MjModel) -> int:
    """Geom pairs a plane or height field can touch (their contact filter allows it): the contacts
    a world of robots or cars standing on the ground has, one per foot or wheel and body."""
    ground = np.isin(model.geom_type, (mujoco.mjtGeom.mjGEOM_PLANE, mujoco.mjtGeom.mjGEOM_HFIELD))
    contype, conaffinity = model.geom_contype, model.geom_conaffinity
    count = 0
    for g in np.nonzero(ground)[0]:
        other = ~ground & (model.geom_bodyid != model.geom_bodyid[g])
        allowed = ((contype[g] & conaffinity) != 0) | ((contype & conaffinity[g]) != 0)
        count += int((other & allowed).sum())
    return count


def rows_per_contact(model: mujoco.MjModel) -> int:
    """Constraint rows of the model's widest contact: condim rows on an elliptic cone, 2·(condim − 1)
    on a pyramidal one (1 for a frictionless contact)."""
    condim = int(model.geom_condim.max()) if model.ngeom else 1
    if model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC:
        return condim
    return max(1, 2 * (condim - 1))


def default_sizes(model: mujoco.MjModel) -> tuple[int, int]:
    """``(nconmax, njmax)`` per world: twice the ground pairs (:func:`ground_pairs`) or the contacts
    at ``qpos0``, whichever is more, plus 16 (crashes, falls); rows for every one of those contacts
    (:func:`rows_per_contact`), the rows at ``qpos0`` beside contacts, and one per dof (joint limits
    and dry friction: brakes)."""
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    nconmax = 2 * max(ground_pairs(model), int(data.ncon)) + 16
    contact_rows = int((data.efc_type >= int(mujoco.mjtConstraint.mjCNSTR_CONTACT_FRICTIONLESS)).sum())
    njmax = int(data.nefc) - contact_rows + rows_per_contact(model) * nconmax + model.nv
    return nconmax, njmax


class WarpSim:
    """``num_worlds`` simulations of ``model`` in one MuJoCo Warp Model/Data on ``device``."""

    def __init__(
        self,
        model: mujoco.MjModel,
        num_worlds: int,
        device: str | torch.device = "cpu",
        nconmax: int | None = None,
        njmax: int | None = None,
        expand: tuple[str, ...] = (),
        graph: bool = True,
        host_copies: bool | None = None,
    ) -> None:
        """Put ``model`` on ``device`` with ``num_worlds`` copies of its ``qpos0`` state.

        ``nconmax``/``njmax``: contacts and constraint rows per world (``None``: :func:`default_sizes`);
        ``expand``: Model fields made per-world now (:meth:`expand`); ``graph``: record the substeps
        into a graph (``False``: launch them one by one, the reference the graph is tested against);
        ``host_copies``: hand out numpy host copies (:meth:`bind`) kept in step with the device
        (``None``: on a GPU only; ``True`` on the CPU tests that path).
        """
        if num_worlds < 1:
            raise ValueError(f"need at least one world, got {num_worlds}")
        wp = _warp()
        import mujoco_warp as mjw

        self._wp, self._mjw = wp, mjw
        self.model = model
        self.num_worlds = num_worlds
        self.device = check_device(device)
        self.wp_device = wp.get_device(str(self.device) if self.device.type == "cuda" else "cpu")
        sizes = default_sizes(model)
        self.nconmax = sizes[0] if nconmax is None else nconmax
        self.njmax = sizes[1] if njmax is None else njmax
        self.use_graph = graph
        self.host_copies = self.device.type == "cuda" if host_copies is None else host_copies
        data0 = mujoco.MjData(model)
        mujoco.mj_forward(model, data0)
        with wp.ScopedDevice(self.wp_device):
            self.m = mjw.put_model(model)
            self.m.opt.warn_overflow = 0  # check_health reports overflows, naming the worlds
            self.d = mjw.put_data(model, data0, nworld=num_worlds, nconmax=self.nconmax, njmax=self.njmax)
        self._stream = None
        if self.wp_device.is_cuda:
            self._torch_stream = torch.cuda.Stream(device=self.device)
            self._stream = wp.stream_from_torch(self._torch_stream)
            self.use_graph = graph and bool(wp.is_mempool_enabled(self.wp_device))
        self._graphs: dict[tuple[Any, ...], Any] = {}
        self._views: dict[str, torch.Tensor] = {}
        self._expanded: dict[str, torch.Tensor] = {}
        self._host: dict[str, np.ndarray] = {}
        """Host copies handed out by :meth:`bind`/:meth:`expand` on a GPU (``name`` or ``model.name``)."""
        for name in expand:
            self.expand_tensor(name)

    # --------------------------------------------------------------------------------- views

    def tensor(self, name: str) -> torch.Tensor:
        """Live (num_worlds, ...) torch view of the Data field ``name`` on :attr:`device` (zero copy;
        Warp vector types add a last axis, e.g. ``xpos`` (W, nbody, 3))."""
        if name not in self._views:
            arr = getattr(self.d, name, None)
            if arr is None or not hasattr(arr, "shape") or arr.shape[:1] != (self.num_worlds,):
                raise ValueError(f"MuJoCo Warp Data has no per-world array '{name}'")
            self._views[name] = self._wp.to_torch(arr)
        return self._views[name]

    def expand_tensor(self, name: str) -> torch.Tensor:
        """Live (num_worlds, ...) torch view of the Model field ``name``, made per-world first if it
        was shared (each world starts from the shared value; fields that :meth:`set_const` derives
        from it are made per-world too). Graphs recorded before are dropped (they hold the old
        array)."""
        if name in self._expanded:
            return self._expanded[name]
        for field in (name, *DERIVED_FIELDS.get(name, ())):
            if field in self._expanded:
                continue
            arr = getattr(self.m, field, None)
            if arr is None or not hasattr(arr, "shape") or arr.ndim < 2:
                raise ValueError(f"MuJoCo Warp Model has no per-world field '{field}'")
            if arr.shape[0] != self.num_worlds:
                tiled = np.repeat(arr.numpy()[:1], self.num_worlds, axis=0)
                arr = self._wp.array(tiled, dtype=arr.dtype, device=self.wp_device)
                setattr(self.m, field, arr)
            self._expanded[field] = self._wp.to_torch(arr)
        self._graphs.clear()
        return self._expanded[name]

    def bind(self, name: str) -> np.ndarray:
        """(num_worlds, ...) numpy array of the Data field ``name``: the field's own memory on the
        CPU, a host copy on a GPU (module docstring). float32, as MuJoCo Warp computes."""
        return self._numpy(name, self.tensor(name))

    def expand(self, name: str) -> np.ndarray:
        """(num_worlds, ...) numpy array of the per-world Model field ``name`` (:meth:`expand_tensor`;
        on a GPU a host copy)."""
        return self._numpy(f"model.{name}", self.expand_tensor(name))

    def _numpy(self, key: str, view: torch.Tensor) -> np.ndarray:
        if not self.host_copies:
            return view.numpy()
        if key not in self._host:
            self._host[key] = view.detach().cpu().numpy().copy()
        return self._host[key]

    def _host_view(self, key: str) -> torch.Tensor:
        return self.expand_tensor(key[6:]) if key.startswith("model.") else self.tensor(key)

    def _push(self) -> None:
        for key, arr in self._host.items():
            self._host_view(key).copy_(torch.from_numpy(arr), non_blocking=False)

    def _pull(self) -> None:
        for key, arr in self._host.items():
            arr[...] = self._host_view(key).cpu().numpy()

    # ------------------------------------------------------------------------------- running

    def _run(self, key: tuple[Any, ...], work: Callable[[], None]) -> None:
        """Run ``work`` (Warp launches) on the device, from its recorded graph when graphs are on."""
        wp = self._wp
        self._push()
        if self._stream is not None:
            self._torch_stream.wait_stream(torch.cuda.current_stream(self.device))
        with wp.ScopedDevice(self.wp_device), self._scoped_stream():
            if not self.use_graph:
                work()
            else:
                if key not in self._graphs:
                    with wp.ScopedCapture(device=self.wp_device, stream=self._stream) as capture:
                        work()
                    self._graphs[key] = capture.graph
                wp.capture_launch(self._graphs[key])
        if self._stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self._torch_stream)
            if self._host:
                self._torch_stream.synchronize()
        self._pull()

    def _scoped_stream(self) -> contextlib.AbstractContextManager[Any]:
        """Warp's launches on this sim's stream (a GPU), or nothing to do (the CPU)."""
        return self._wp.ScopedStream(self._stream) if self._stream is not None else contextlib.nullcontext()

    def step(self, nstep: int = 1, hook: Hook | None = None) -> None:
        """Advance every world by ``nstep`` physics steps, launching ``hook`` after each."""
        if nstep < 1:
            raise ValueError(f"nstep must be >= 1, got {nstep}")
        m, d, mjw = self.m, self.d, self._mjw

        def substeps() -> None:
            for _ in range(nstep):
                mjw.step(m, d)
                if hook is not None:
                    hook()

        self._run(("step", nstep, hook), substeps)

    def forward(self, ids: np.ndarray | torch.Tensor | None = None) -> None:
        """Recompute derived quantities (positions, contacts, sensors) of worlds ``ids`` (all by
        default). MuJoCo Warp computes every world; the sensors of the others are put back, so they
        keep what their last step left (as ``BatchedSim.forward`` of some worlds does)."""
        m, d, mjw = self.m, self.d, self._mjw
        with self._sensors_kept(ids):
            self._run(("forward",), lambda: mjw.forward(m, d))

    @contextlib.contextmanager
    def _sensors_kept(self, ids: np.ndarray | torch.Tensor | None) -> Iterator[None]:
        """Put back the sensors of every world not in ``ids`` after the block (all: ``None``)."""
        if ids is None:
            yield
            return
        sensors = self.tensor("sensordata")
        keep = torch.ones(self.num_worlds, dtype=torch.bool, device=self.device)
        keep[torch.as_tensor(ids, dtype=torch.long, device=self.device)] = False
        saved = sensors.clone()
        yield
        sensors.copy_(torch.where(keep[:, None], saved, sensors))
        if "sensordata" in self._host:
            self._host["sensordata"][...] = sensors.cpu().numpy()

    def reset(self, ids: np.ndarray | torch.Tensor) -> None:
        """Worlds ``ids`` back to ``qpos0`` at rest (velocities, controls, warm start, time and
        overflow flags zeroed), then :meth:`forward` of those worlds."""
        rows = torch.as_tensor(ids, dtype=torch.long, device=self.device)
        qpos0 = torch.as_tensor(self.model.qpos0, dtype=torch.float32, device=self.device)
        self.tensor("qpos")[rows] = qpos0
        for name in ("qvel", "act", "ctrl", "qacc_warmstart", "time", "overflow"):
            self.tensor(name)[rows] = 0
        for key in ("qpos", "qvel", "act", "ctrl", "qacc_warmstart", "time"):
            if key in self._host:
                self._host[key][rows.cpu().numpy()] = self.tensor(key)[rows].cpu().numpy()
        self.forward(rows)

    def set_const(self, ids: np.ndarray | torch.Tensor | None = None) -> None:
        """Recompute the constants derived from per-world masses and inertias (``mujoco_warp
        .set_const``, which computes every world; the sensors of worlds not in ``ids`` are put back,
        as in :meth:`forward`)."""
        m, d, mjw, wp = self.m, self.d, self._mjw, self._wp
        with self._sensors_kept(ids):
            self._push()
            with wp.ScopedDevice(self.wp_device), self._scoped_stream():
                mjw.set_const(m, d)
            if self._stream is not None:
                self._torch_stream.synchronize()
            self._pull()

    # -------------------------------------------------------------------------------- health

    def bad_worlds(self) -> torch.Tensor:
        """(num_worlds,) bool on :attr:`device`: NaN/inf state or a buffer overflow since the reset."""
        qpos, qvel = self.tensor("qpos"), self.tensor("qvel")
        bad = ~(torch.isfinite(qpos).all(dim=1) & torch.isfinite(qvel).all(dim=1))
        return bad | ((self.tensor("overflow") & FATAL_OVERFLOWS) != 0)

    def check_health(self, hint: str) -> None:
        """Raise ``FloatingPointError`` naming the worlds whose state is NaN/inf or whose contacts or
        constraint rows overflowed MuJoCo Warp's buffers (``nconmax``/``njmax``)."""
        bad = self.bad_worlds()
        if bool(bad.any()):  # one device-to-host read per call
            worlds = torch.nonzero(bad).flatten()[:8].tolist()
            flags = int(self.tensor("overflow")[worlds[0]])
            what = (
                f"overflowed MuJoCo Warp's buffers (flags {flags:#x}: nconmax {self.nconmax}, "
                f"njmax {self.njmax} per world)"
                if flags & FATAL_OVERFLOWS
                else "became unstable (NaN/inf)"
            )
            raise FloatingPointError(f"MuJoCo Warp simulation {what} in worlds {worlds}; {hint}")

    # --------------------------------------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        """CPU copies of every world's integration state, the per-world model fields and the sensors
        as the last step left them (``BatchedSim.state_dict``'s layout, in float32)."""
        self._push()
        return {
            "data": {f: self.tensor(f).detach().cpu().clone() for f in INTEGRATION_FIELDS},
            "model": {f: v.detach().cpu().clone() for f, v in self._expanded.items()},
            "sensordata": self.tensor("sensordata").detach().cpu().clone(),
        }

    def load_state_dict(self, state: Any, set_const: bool = False) -> None:
        """Restore :meth:`state_dict` (every array checked first: names, shapes, dtypes), then
        (``set_const``) the derived constants, then the sensors as saved."""
        checked: list[tuple[torch.Tensor, torch.Tensor]] = []
        groups: tuple[tuple[str, Mapping[str, torch.Tensor]], ...] = (
            ("model", self._expanded),
            ("data", {f: self.tensor(f) for f in INTEGRATION_FIELDS}),
            ("sensordata", {"sensordata": self.tensor("sensordata")}),
        )
        for group, arrays in groups:
            saved = state.get(group) if isinstance(state, Mapping) else None
            if group == "sensordata":
                saved = {"sensordata": saved} if saved is not None else None
            if not isinstance(saved, Mapping) or set(saved) != set(arrays):
                raise ValueError(
                    f"MuJoCo Warp state '{group}' holds {sorted(saved or [])}, expected {sorted(arrays)}"
                )
            for f, current in arrays.items():
                value = saved[f]
                if not isinstance(value, torch.Tensor) or value.shape != current.shape:
                    got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                    raise ValueError(
                        f"MuJoCo Warp state '{group}.{f}' is {got}, this sim holds {tuple(current.shape)}"
                    )
                if value.dtype != current.dtype:
                    raise ValueError(
                        f"MuJoCo Warp state '{group}.{f}' is {value.dtype}, this sim holds {current.dtype}"
                        " (a state of the C engine?)"
                    )
                checked.append((current, value))
        for current, value in checked:
            current.copy_(value)
        for key, arr in self._host.items():
            arr[...] = self._host_view(key).cpu().numpy()
        if set_const:
            self.set_const(torch.zeros(0, dtype=torch.long))  # every world's sensors as saved


@dataclass(frozen=True)
class PhysicsBackend:
    """Which MuJoCo runs a task's worlds, and where.

    - ``engine``: ``"mujoco"`` (MuJoCo C on CPU threads, ``engines.mjbatch.BatchedSim``) or
      ``"mujoco-warp"`` (:class:`WarpSim`).
    - ``device``: ``"cpu"`` or ``"cuda"``/``"cuda:N"`` (MuJoCo Warp only; whether the device exists
      is checked when the simulation is built).
    """

    engine: str = "mujoco"
    device: str = "cpu"

    def __post_init__(self) -> None:
        """Reject an unknown engine, a malformed device and a GPU for MuJoCo C."""
        if self.engine not in SIM_ENGINES:
            raise ValueError(f"physics engine must be one of {SIM_ENGINES}, got {self.engine!r}")
        try:
            kind = torch.device(self.device).type
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"physics device must be cpu or cuda[:N], got {self.device!r}") from exc
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"physics device must be cpu or cuda[:N], got {self.device!r}")
        if kind == "cuda" and self.engine == "mujoco":
            raise ValueError(
                f"physics engine 'mujoco' (MuJoCo C) runs on the CPU, not on {self.device!r}: "
                "use engine 'mujoco-warp' for a GPU"
            )


def make_sim(
    model: mujoco.MjModel, num_worlds: int, backend: PhysicsBackend, nthread: int | None = None
) -> BatchedSim | WarpSim:
    """``num_worlds`` worlds of ``model`` on ``backend``: a ``BatchedSim`` on ``nthread`` threads, or a
    :class:`WarpSim` with its default buffer sizes (numpy :meth:`WarpSim.bind` arrays: zero copy on
    the CPU, host copies on a GPU)."""
    if backend.engine == "mujoco":
        return BatchedSim(model, num_worlds, nthread)
    return WarpSim(model, num_worlds, backend.device)
