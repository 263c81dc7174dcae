"""The engine contract (:class:`scenefactory.engines.base.Engine`), checked on every tier alike.

Every tier is built the way the task builds it, through
``make_engine(EngineSpec(...), num_worlds, agents_per_world, dt, params, device)``: kinematic,
mujoco, learned (a tiny residual model fitted here), grounded (a domain-randomization artifact,
whose knobs are drawn from a seeded generator at every reset, and a history correction with a GRU),
and the lag wrapper (``action_lag_steps`` > 0) around the kinematic and the mujoco tier. The learned
and grounded files are fitted once per session on a few hundred kinematic transitions (a second).

What every tier must do, as ``engines/base.py`` writes it:

- carry ``name``, ``num_worlds``, ``agents_per_world``, ``dt``, ``device`` and ``params`` and be an
  :class:`Engine`; report every :class:`VehicleState` field as (W, K[, 2]) float32 (``valid`` bool);
- place agents where ``reset`` puts them, and reset only the worlds named, in the order named;
- never move an invalid agent, nor an inactive one;
- refuse a wrong action shape and NaN/inf actions without stepping; treat actions outside [-1, 1]
  exactly as clipped; stop under braking and never reverse (the mujoco tier's sprung body may rock
  back a little once its locked wheels stop it: :attr:`Tier.rebound`);
- take road friction per world; hand out a ``state_dict`` of plain tensors that a fresh engine
  resumes from bit for bit (also through ``torch.save``/``torch.load(weights_only=True)``), and
  refuse a state of the wrong size or with an entry missing with a ``ValueError`` naming it,
  changing nothing;
- report collisions as ``None`` or a (W, K) bool tensor (and, when it has a contact model, see a
  head-on crash); step deterministically.

Each check also asserts the thing it compares did change (the agents moved, the state advanced),
so a frozen or no-op engine fails it. W = 3 worlds of K = 2 agents (W ≠ K catches a transposition).
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import pytest
import torch

from scenefactory.dynamics.correctors import Method
from scenefactory.dynamics.models import DynamicsModelConfig, ModelKind
from scenefactory.engines import make_engine
from scenefactory.engines.base import Engine, VehicleState
from scenefactory.engines.kinematic import KinematicEngine
from scenefactory.engines.spec import PHYSICS_TIERS, EngineSpec
from scenefactory.grounding.engine_data import record_engine
from scenefactory.grounding.fit import fit_dynamics
from scenefactory.grounding.ground import GroundConfig, ground
from scenefactory.vehicles.params import VehicleParams

DT_S = 0.1
W, K = 3, 2
CAR = replace(VehicleParams(), max_accel_mps2=3.5)
"""Not the default car, so an engine that drops ``params`` shows it (the fits below use it too)."""
SPEED_MPS = 5.0
DRIVE = (0.3, 0.5)
"""A left turn under half throttle: every live agent moves and turns."""
TIERS = (
    "kinematic",
    "mujoco",
    "learned",
    "grounded-dr",
    "grounded-history",
    "kinematic+lag2",
    "mujoco+lag1",
    "mujoco-warp",
)


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny batches: one thread is as fast and does not fight other jobs for the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A learned model.pt and two grounding folders, fitted on 320 kinematic transitions of ``CAR``."""
    root = tmp_path_factory.mktemp("contract")
    data = root / "data"
    record_engine(KinematicEngine(4, 2, DT_S, CAR), data, episodes=2, episode_steps=20, seed=0)
    small = DynamicsModelConfig(kind=ModelKind.RESIDUAL, history_len=3, hidden_size=16, num_layers=1)
    model = fit_dynamics(data, small, root / "learned", epochs=1, seed=0).model_path
    out = {"learned": model}
    for method in (Method.DR, Method.HISTORY):
        cfg = GroundConfig(
            method=method, hidden_size=16, num_layers=1, history_len=3, train_steps=20, batch_size=64
        )
        out[f"grounded-{method.value}"] = ground(data, cfg, root / method.value).out_dir
    return out


@dataclass(frozen=True)
class Tier:
    """One parameterization: the spec, built into engines of any size."""

    spec: EngineSpec

    def build(self, worlds: int = W, agents: int = K) -> Engine:
        return make_engine(self.spec, worlds, agents, dt=DT_S, params=CAR, device="cpu")

    @property
    def lag(self) -> int:
        return self.spec.action_lag_steps

    @property
    def rebound(self) -> tuple[float, float]:
        """Backward speed [m/s] and travel [m] allowed after a hard stop: none for the abstract
        tiers; on the mujoco tier the sprung body rocks back on its suspension when the locked
        wheels stop it (measured: its centre of mass -0.05 m/s, 1.3 cm, wheels still)."""
        return (0.1, 0.03) if self.spec.tier in PHYSICS_TIERS else (0.0, 0.0)


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest) -> Tier:
    name: str = request.param
    base, _, lag = name.partition("+lag")
    lag_steps = int(lag) if lag else 0
    if base == "learned":
        path = request.getfixturevalue("fitted")[base]
        return Tier(EngineSpec(tier="learned", dynamics_model=path))
    if base.startswith("grounded"):
        path = request.getfixturevalue("fitted")[base]
        return Tier(EngineSpec(tier="grounded", grounding=path))
    return Tier(EngineSpec(tier=base, action_lag_steps=lag_steps))


# ------------------------------------------------------------------------------------ helpers


def spawn(worlds: int = W, agents: int = K) -> torch.Tensor:
    """Poses (worlds, agents, 3): agents 20 m apart along their world's heading (no contacts)."""
    pose = torch.zeros(worlds, agents, 3)
    yaw = 0.2 * torch.arange(worlds, dtype=torch.float32).view(worlds, 1)
    ahead = 20.0 * torch.arange(agents, dtype=torch.float32).view(1, agents)
    pose[..., 0] = 3.0 + ahead * torch.cos(yaw)
    pose[..., 1] = -4.0 + 10.0 * torch.arange(worlds).view(worlds, 1) + ahead * torch.sin(yaw)
    pose[..., 2] = yaw
    return pose


def reset_all(
    engine: Engine,
    pose: torch.Tensor | None = None,
    speed: float = SPEED_MPS,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reset every world; returns the poses used."""
    w, k = engine.num_worlds, engine.agents_per_world
    pose = spawn(w, k) if pose is None else pose
    valid = torch.ones(w, k, dtype=torch.bool) if valid is None else valid
    engine.reset(torch.arange(w), pose, torch.full((w, k), speed), valid)
    return pose


def drive(w: int = W, k: int = K, action: tuple[float, float] = DRIVE) -> torch.Tensor:
    return torch.tensor(action).expand(w, k, 2).clone()


def everyone(w: int = W, k: int = K) -> torch.Tensor:
    return torch.ones(w, k, dtype=torch.bool)


def snapshot(state: VehicleState) -> dict[str, torch.Tensor]:
    """Copies of every field (engines may update their buffers in place)."""
    return {f.name: getattr(state, f.name).clone() for f in fields(VehicleState)}


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], rows: Any = slice(None)) -> None:
    """Every field identical (bit for bit) in the worlds ``rows``."""
    for name in a:
        assert torch.equal(a[name][rows], b[name][rows]), (
            f"'{name}' differs:\n{a[name][rows]}\n{b[name][rows]}"
        )


def leaves(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts to ``{"a.b": leaf}``."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(leaves(value, path + "."))
        else:
            out[path] = value
    return out


def same_tree(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    la, lb = leaves(a), leaves(b)
    return la.keys() == lb.keys() and all(torch.equal(la[p], lb[p]) for p in la)


def moved(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> torch.Tensor:
    """(W, K) distance [m] each agent travelled."""
    return (after["pos_xy"] - before["pos_xy"]).norm(dim=-1)


def set_leaf(tree: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``tree`` with the leaf at ``path`` replaced (``None``: removed)."""
    head, _, rest = path.partition(".")
    out = dict(tree)
    if rest:
        out[head] = set_leaf(tree[head], rest, value)
    elif value is None:
        del out[head]
    else:
        out[head] = value
    return out


# ---------------------------------------------------------------------------------- the contract


def test_attributes_protocol_shapes_and_dtypes(tier: Tier) -> None:
    engine = tier.build()
    assert isinstance(engine, Engine)
    assert isinstance(engine.name, str) and tier.spec.tier in engine.name
    assert (engine.num_worlds, engine.agents_per_world, engine.dt) == (W, K, DT_S)
    assert engine.device == torch.device("cpu") and engine.params == CAR
    pose = reset_all(engine)
    for state in (engine.state(), engine.step(drive(), everyone())):
        for f in fields(VehicleState):
            value = getattr(state, f.name)
            shape = (W, K, 2) if f.name in ("pos_xy", "vel_xy", "vel_b") else (W, K)
            dtype = torch.bool if f.name == "valid" else torch.float32
            assert isinstance(value, torch.Tensor), f.name
            assert (tuple(value.shape), value.dtype, value.device) == (shape, dtype, engine.device), f.name
            assert bool(torch.isfinite(value.float()).all()), f.name
    st = snapshot(engine.state())
    assert float(moved({"pos_xy": pose[..., :2]}, st).min()) > 0.2  # every agent drove on


def test_reset_places_agents_where_told(tier: Tier) -> None:
    engine = tier.build()
    pose = spawn()
    speed = torch.tensor([[4.0, 6.0], [0.0, 2.0], [7.5, 3.0]])
    valid = torch.tensor([[True, True], [True, False], [True, True]])
    engine.reset(torch.arange(W), pose, speed, valid)
    st = engine.state()
    torch.testing.assert_close(st.pos_xy, pose[..., :2], atol=1e-5, rtol=0)
    torch.testing.assert_close(st.yaw, pose[..., 2], atol=1e-5, rtol=0)
    torch.testing.assert_close(st.speed[valid], speed[valid], atol=1e-4, rtol=0)
    assert float(st.steer[valid].abs().max()) < 1e-6  # wheels straight
    assert st.valid.tolist() == valid.tolist()


def test_partial_reset_by_ids_leaves_other_worlds_untouched(tier: Tier) -> None:
    """Reset worlds (2, 0) — in that order — of one of two identical engines, mid-episode: world 1
    and everything hidden about it (histories, queues, knobs) must go on exactly as in the twin."""
    a, b = tier.build(), tier.build()
    for e in (a, b):
        reset_all(e)
        for _ in range(3):
            e.step(drive(), everyone())
    fresh = spawn()[[1, 2]] + torch.tensor([100.0, 50.0, 1.0])  # poses for worlds 2 then 0
    a.reset(torch.tensor([2, 0]), fresh, torch.zeros(2, K), torch.ones(2, K, dtype=torch.bool))
    sa, sb = snapshot(a.state()), snapshot(b.state())
    torch.testing.assert_close(sa["pos_xy"][[2, 0]], fresh[..., :2], atol=1e-4, rtol=0)
    torch.testing.assert_close(sa["yaw"][[2, 0]], fresh[..., 2], atol=1e-5, rtol=0)
    assert float(sa["speed"][[2, 0]].abs().max()) < 1e-4
    assert_same(sa, sb, rows=1)
    da, db = leaves(a.state_dict()), leaves(b.state_dict())
    for path, value in da.items():
        if value.dim() > 0 and value.shape[0] == W:
            assert torch.equal(value[1], db[path][1]), f"state_dict '{path}' of world 1 changed"
    for _ in range(3):
        sa2, sb2 = snapshot(a.step(drive(), everyone())), snapshot(b.step(drive(), everyone()))
    assert_same(sa2, sb2, rows=1)
    assert float(moved(sb, sb2)[1].min()) > 1.0  # world 1 did drive on
    assert float(moved(sa2, sb2)[[0, 2]].min()) > 50.0  # the reset worlds are elsewhere


def test_invalid_agents_never_move(tier: Tier) -> None:
    engine = tier.build()
    valid = torch.tensor([[True, False], [True, True], [False, True]])
    pose = reset_all(engine, valid=valid)
    start = {"pos_xy": pose[..., :2]}
    for _ in range(tier.lag + 4):
        st = snapshot(engine.step(drive(), everyone()))
    assert st["valid"].tolist() == valid.tolist()
    torch.testing.assert_close(st["pos_xy"][~valid], pose[..., :2][~valid], atol=1e-5, rtol=0)
    torch.testing.assert_close(st["yaw"][~valid], pose[..., 2][~valid], atol=1e-5, rtol=0)
    assert float(moved(start, st)[valid].min()) > 1.0
    assert float((st["yaw"] - pose[..., 2])[valid].min()) > 0.01  # and turned left


def test_inactive_agents_do_not_move(tier: Tier) -> None:
    engine = tier.build()
    reset_all(engine)
    for _ in range(2):
        engine.step(drive(), everyone())
    before = snapshot(engine.state())
    active = torch.tensor([[True, True], [False, True], [True, False]])
    for _ in range(tier.lag + 4):
        after = snapshot(engine.step(drive(), active))
    torch.testing.assert_close(after["pos_xy"][~active], before["pos_xy"][~active], atol=1e-5, rtol=0)
    torch.testing.assert_close(after["yaw"][~active], before["yaw"][~active], atol=1e-5, rtol=0)
    assert float(moved(before, after)[active].min()) > 1.0


def test_bad_actions_raise_and_step_nothing(tier: Tier) -> None:
    engine = tier.build()
    reset_all(engine)
    engine.step(drive(), everyone())
    before = engine.state_dict()
    for shape in ((W, K, 3), (K, W, 2), (W, K), (W + 1, K, 2)):
        with pytest.raises(ValueError, match="actions have shape"):
            engine.step(torch.zeros(shape), everyone())
    for bad in (math.nan, math.inf, -math.inf):
        actions = drive()
        actions[W - 1, K - 1, 1] = bad
        with pytest.raises(FloatingPointError, match="non-finite"):
            engine.step(actions, everyone())
    assert same_tree(engine.state_dict(), before)
    engine.step(drive(), everyone())
    assert not same_tree(engine.state_dict(), before)  # a good step does change it


def test_out_of_range_actions_behave_as_clipped(tier: Tier) -> None:
    a, b = tier.build(), tier.build()
    reset_all(a), reset_all(b)
    start = snapshot(a.state())
    g = torch.Generator().manual_seed(5)
    for _ in range(tier.lag + 4):
        wild = (torch.rand(W, K, 2, generator=g) * 2.0 - 1.0) * 6.0  # mostly outside [-1, 1]
        sa, sb = snapshot(a.step(wild, everyone())), snapshot(b.step(wild.clamp(-1.0, 1.0), everyone()))
        assert_same(sa, sb)
    assert not torch.equal(sa["steer"], start["steer"])  # the actions did act


def test_braking_stops_and_never_reverses(tier: Tier) -> None:
    engine = tier.build()
    pose = reset_all(engine, speed=6.0)
    heading = torch.stack((torch.cos(pose[..., 2]), torch.sin(pose[..., 2])), dim=-1)
    along = [torch.zeros(W, K)]
    back_mps, back_m = tier.rebound
    for _ in range(tier.lag + 20):
        st = engine.step(drive(action=(0.0, -1.0)), everyone())
        assert float(st.speed.min()) >= -back_mps, f"speed {st.speed.min():.4f} m/s: reversing"
        along.append(((st.pos_xy - pose[..., :2]) * heading).sum(-1))
    assert float(st.speed.abs().max()) < 0.05  # stopped
    travelled = torch.stack(along)  # (T, W, K) distance along the start heading
    assert float(travelled[-1].min()) > 1.0
    behind = travelled.cummax(dim=0).values - travelled
    assert float(behind.max()) <= back_m + 1e-5, f"rolled back {behind.max():.3f} m while braking"


def test_friction_is_per_world_and_part_of_the_state(tier: Tier) -> None:
    a, b = tier.build(), tier.build()
    reset_all(a), reset_all(b)
    a.set_friction(torch.tensor([1]), torch.tensor([0.2]))
    da, db = leaves(a.state_dict()), leaves(b.state_dict())
    changed = [p for p in da if not torch.equal(da[p], db[p])]
    assert changed, "the friction is not part of the state"
    for path in changed:  # world 1's rows only
        assert da[path].shape[0] == W and torch.equal(da[path][[0, 2]], db[path][[0, 2]]), path
    a.set_friction(torch.tensor([1]), torch.tensor([1.0]))  # the default, exactly
    assert same_tree(a.state_dict(), b.state_dict())
    a.set_friction(torch.tensor([2, 1]), torch.tensor([0.15, 0.5]))
    start = snapshot(a.state())
    for _ in range(tier.lag + 4):
        sa, sb = snapshot(a.step(drive(), everyone())), snapshot(b.step(drive(), everyone()))
    assert_same(sa, sb, rows=0)
    assert float(moved(start, sa).min()) > 1.0


def test_state_dict_round_trip_steps_bit_for_bit(tier: Tier) -> None:
    a = tier.build()
    reset_all(a, valid=torch.tensor([[True, True], [True, False], [True, True]]))
    a.set_friction(torch.tensor([0, 2]), torch.tensor([0.3, 0.6]))
    g = torch.Generator().manual_seed(7)
    actions = [torch.rand(W, K, 2, generator=g) * 2.0 - 1.0 for _ in range(3 + 5)]
    for act in actions[:3]:
        a.step(act, everyone())
    saved = a.state_dict()
    at_save = snapshot(a.state())
    for path, value in leaves(saved).items():
        assert isinstance(value, torch.Tensor) and value.device.type == "cpu", path
    stream = io.BytesIO()
    torch.save(saved, stream)
    stream.seek(0)
    restored = torch.load(stream, weights_only=True)
    expected = [snapshot(a.step(act, everyone())) for act in actions[3:]]
    b = tier.build()  # never reset: everything it holds must come from the state
    b.load_state_dict(restored)
    assert_same(snapshot(b.state()), at_save)
    got = [snapshot(b.step(act, everyone())) for act in actions[3:]]
    for e, r in zip(expected, got, strict=True):
        assert_same(e, r)
    assert float(moved(at_save, expected[-1]).max()) > 1.0


def test_wrong_or_incomplete_state_is_refused_by_name(tier: Tier) -> None:
    a = tier.build()
    reset_all(a)
    a.step(drive(), everyone())
    saved = a.state_dict()
    names = leaves(saved)
    target = tier.build()
    reset_all(target, pose=spawn() + 7.0)
    untouched = target.state_dict()

    def refused(state: Mapping[str, Any], entry: str) -> None:
        with pytest.raises(ValueError) as err:
            target.load_state_dict(state)
        assert entry in str(err.value), f"{err.value} does not name '{entry}'"
        assert same_tree(target.state_dict(), untouched), "a refused state changed the engine"

    bigger = tier.build(W + 1, K)
    reset_all(bigger)
    with pytest.raises(ValueError) as err:
        target.load_state_dict(bigger.state_dict())
    assert any(path.rpartition(".")[2].lstrip("_") in str(err.value) for path in names), str(err.value)
    for key in (next(iter(saved)), list(saved)[-1]):
        refused(set_leaf(saved, key, None), key.lstrip("_"))
    batched = [p for p, v in names.items() if v.dim() > 0 and v.shape[0] == W]
    for path in (batched[0], batched[-1]):
        grown = torch.cat((names[path], names[path][:1]))
        refused(set_leaf(saved, path, grown), path.rpartition(".")[2].lstrip("_"))
    target.load_state_dict(saved)  # the good one loads
    assert same_tree(target.state_dict(), saved)


def test_collisions_are_none_or_a_bool_mask(tier: Tier) -> None:
    """Head-on in world 0 (agents 8 m apart, closing at 12 m/s); the others keep 20 m apart."""
    engine = tier.build()
    pose = spawn()
    pose[0, 1] = torch.tensor([pose[0, 0, 0] + 8.0, pose[0, 0, 1], math.pi])
    reset_all(engine, pose=pose, speed=6.0)
    seen = torch.zeros(W, K, dtype=torch.bool)
    for _ in range(10):
        engine.step(torch.zeros(W, K, 2), everyone())
        hits = engine.collisions()
        if hits is None:
            continue
        assert isinstance(hits, torch.Tensor) and hits.dtype == torch.bool and tuple(hits.shape) == (W, K)
        seen |= hits.cpu()
    if engine.collisions() is not None:  # a contact model sees the crash, and nothing else
        assert seen[0].all() and not seen[1:].any(), seen


def test_stepping_is_deterministic(tier: Tier) -> None:
    a, b = tier.build(), tier.build()
    reset_all(a), reset_all(b)
    g = torch.Generator().manual_seed(11)
    previous = snapshot(a.state())
    for _ in range(tier.lag + 4):
        act = torch.rand(W, K, 2, generator=g) * 2.0 - 1.0
        sa, sb = snapshot(a.step(act, everyone())), snapshot(b.step(act, everyone()))
        assert_same(sa, sb)
        assert float(moved(previous, sa).min()) > 0.05
        previous = sa
