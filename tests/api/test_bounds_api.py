"""The Python API held to the command line's bounds, and its arguments named at the call.

Every bound the API applies (``bounds.API_ARGUMENTS``) is tried through the API just inside and just
outside its range, with the wrong types a Python caller passes (``2.5``, ``"2"``, ``True``), and must
give an ``ArgumentError`` naming the argument and its CLI flag, never pass or fail inside torch. The
numeric flags the CLI shares with the API are compared with the CLI's own argument types, so the two
cannot drift apart. Then one test per action and device case of issue 49.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scenefactory import bounds
from scenefactory.api import DrivingTaskConfig, EngineSpec, make_driving_env, make_go1_env, procedural_scenes
from scenefactory.cli import argtypes
from scenefactory.errors import ArgumentError, UserError
from scenefactory.inputs import as_actions, device

SCENES = procedural_scenes("train", 1, 2)


def _raises(fn: Callable[[], Any], *names: str) -> str:
    with pytest.raises(ArgumentError) as info:
        fn()
    msg = str(info.value)
    assert "\n" not in msg
    for name in names:
        assert name in msg, msg
    return msg


# one way through the API per entry of bounds.API_ARGUMENTS: value -> a call that applies it
THROUGH_API: dict[str, Callable[[Any], Any]] = {
    "EngineSpec.physics_hz (mujoco, mujoco-warp)": lambda v: EngineSpec("mujoco", physics_hz=v),
    "EngineSpec.action_lag_steps": lambda v: EngineSpec(action_lag_steps=v),
    "DrivingTaskConfig.num_worlds": lambda v: DrivingTaskConfig(num_worlds=v),
    "DrivingTaskConfig.agents_per_world": lambda v: DrivingTaskConfig(agents_per_world=v),
    "DrivingTaskConfig.min_active_fraction": lambda v: DrivingTaskConfig(min_active_fraction=v),
    "make_driving_env(agents_per_world, procedural scenes)": lambda v: make_driving_env(
        DrivingTaskConfig(num_worlds=1, agents_per_world=v), num_scenes=1
    ),
    "make_driving_env(seed, procedural scenes)": lambda v: make_driving_env(
        DrivingTaskConfig(num_worlds=1, agents_per_world=1), seed=v, num_scenes=1
    ),
    "make_driving_env(seed, given scenes)": lambda v: make_driving_env(
        DrivingTaskConfig(num_worlds=1, agents_per_world=2), SCENES, seed=v
    ),
    "make_driving_env(num_scenes)": lambda v: make_driving_env(
        DrivingTaskConfig(num_worlds=1, agents_per_world=1), num_scenes=v
    ),
    "make_go1_env(num_envs)": lambda v: make_go1_env(num_envs=v),
    "make_go1_env(seed)": lambda v: make_go1_env(num_envs=1, seed=v),
}
"""``reset(seed)`` is tried on both adapters below."""
OPTIONAL = {"make_driving_env(num_scenes)", "make_go1_env(num_envs)", "make_go1_env(seed)"}


def test_every_api_bound_is_tried() -> None:
    assert set(THROUGH_API) | {"reset(seed) (Gymnasium, PettingZoo)"} == set(bounds.API_ARGUMENTS)


def test_the_api_bounds_are_the_cli_flags_bounds() -> None:
    """The ranges the API checks are the objects (or equal to those) the CLI parses flags with."""
    assert bounds.WORLDS == argtypes.WORLDS
    assert bounds.AGENTS == argtypes.AGENTS
    assert bounds.SCENE_AGENTS == argtypes.SCENE_AGENTS
    assert bounds.SCENE_COUNT == argtypes.SCENES
    for rng, flag in bounds.API_ARGUMENTS.values():
        assert flag.startswith("--")
        assert rng.low <= rng.high


def _outside(rng: bounds.IntRange | bounds.FloatRange) -> list[Any]:
    if isinstance(rng, bounds.IntRange):
        return [rng.low - 1, rng.high + 1, float(rng.low) + 0.5, str(rng.low), True, None]
    return [rng.low - 1.0, rng.high + 1.0, float("nan"), float("inf"), str(rng.low), True]


@pytest.mark.parametrize("key", sorted(THROUGH_API))
def test_each_cli_bound_refuses_the_same_values_through_the_api(key: str) -> None:
    rng, flag = bounds.API_ARGUMENTS[key]
    call = THROUGH_API[key]
    for value in _outside(rng):
        if value is None and key in OPTIONAL:
            continue  # None there means the default
        with pytest.raises((ArgumentError, UserError)) as info:
            call(value)
        msg = str(info.value)
        assert "\n" not in msg
        assert flag.split(" ")[0] in msg or "min_active_fraction" in msg, (key, value, msg)
        if isinstance(value, int | float) and not isinstance(value, bool):  # the CLI refuses it too
            with pytest.raises(argparse.ArgumentTypeError):
                rng(str(value))


def test_values_inside_the_bounds_pass() -> None:
    assert EngineSpec("mujoco", physics_hz=1000).physics_hz == 1000.0
    assert EngineSpec("mujoco", physics_hz=np.float32(100.0)).physics_hz == 100.0
    assert DrivingTaskConfig(num_worlds=np.int64(8192), agents_per_world=128).num_worlds == 8192
    env = make_driving_env(DrivingTaskConfig(num_worlds=1, agents_per_world=2), SCENES, seed=2**32 - 1)
    assert env.num_worlds == 1


def test_issue_49_cases_name_the_argument() -> None:
    _raises(lambda: EngineSpec("mujoco", physics_hz=10**7), "EngineSpec.physics_hz", "--physics-hz", "1000")
    _raises(lambda: make_driving_env(DrivingTaskConfig(num_worlds=1, agents_per_world=100)), "--agents", "32")
    _raises(lambda: DrivingTaskConfig(num_worlds=2.5), "num_worlds", "2.5 (float)")
    _raises(lambda: DrivingTaskConfig(num_worlds="2"), "num_worlds", "'2' (str)")
    _raises(lambda: DrivingTaskConfig(dt_s=1e-5), "dt_s", "--policy-hz")


# ------------------------------------------------------------------------------------ devices


def test_devices() -> None:
    assert device("cpu") == torch.device("cpu")
    _raises(lambda: device("tpu"), "device", "'tpu'")
    _raises(lambda: device("meta"), "device", "meta")
    _raises(lambda: device(3), "device", "3 (int)")
    if not torch.cuda.is_available():
        _raises(lambda: device("cuda"), "device", "'cuda'", "no CUDA GPU")
        _raises(
            lambda: make_driving_env(
                DrivingTaskConfig(num_worlds=1, agents_per_world=2), SCENES, device="cuda"
            ),
            "device",
        )


# ------------------------------------------------------------------------------------ actions


@pytest.fixture(scope="module")
def env() -> Any:
    e = make_driving_env(
        DrivingTaskConfig(num_worlds=2, agents_per_world=2), procedural_scenes("train", 2, 2)
    )
    e.reset()
    return e


def test_numpy_and_list_actions_are_converted(env: Any) -> None:
    a = np.zeros((2, 2, 2))
    assert env.step(a).obs.shape[:2] == (2, 2)
    assert env.step(a.tolist()).obs.shape[:2] == (2, 2)
    assert env.step(np.zeros((2, 2, 2), dtype=np.int32)).obs.shape[:2] == (2, 2)


def test_actions_that_require_grad_are_detached(env: Any) -> None:
    a = torch.zeros(2, 2, 2, requires_grad=True)
    res = env.step(a)
    assert not res.obs.requires_grad
    assert a.grad is None


def test_refused_actions_name_the_argument(env: Any) -> None:
    _raises(lambda: env.step(torch.zeros(2, 2, 2, device="meta")), "actions", "meta")
    _raises(lambda: env.step(torch.zeros(2, 2, 3)), "actions", "(2, 2, 2)", "(2, 2, 3)")
    _raises(lambda: env.step(np.array([["a"] * 2] * 2)), "actions", "dtype")
    _raises(lambda: env.step(torch.zeros(2, 2, 2, dtype=torch.bool)), "actions", "torch.bool")
    _raises(lambda: env.step(torch.zeros(2, 2, 2, dtype=torch.complex64)), "actions", "complex")
    _raises(lambda: env.step([[0.0], [0.0, 1.0]]), "actions", "ragged")
    _raises(lambda: env.step({"a": 1}), "actions", "dict")
    _raises(lambda: env.step(None), "actions", "NoneType")


@settings(max_examples=40, deadline=None)
@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.floats(),
        st.text(max_size=4),
        st.lists(st.floats(width=32), max_size=5),
        st.lists(st.lists(st.floats(width=32) | st.text(max_size=2), max_size=3), max_size=3),
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)).map(lambda s: torch.zeros(s)),
    )
)
def test_any_action_value_is_converted_or_an_argument_error(value: Any) -> None:
    try:
        out = as_actions(value, (2, 2, 2), torch.device("cpu"))
    except ArgumentError as exc:
        assert str(exc).startswith("actions: ")
        return
    assert out.shape == (2, 2, 2) and out.dtype == torch.float32


# ------------------------------------------------------------------------------------ adapters


def test_reset_seeds_on_the_gymnasium_and_pettingzoo_views() -> None:
    pytest.importorskip("gymnasium")
    pytest.importorskip("pettingzoo")
    from scenefactory.api.gym_vector import DrivingVectorEnv
    from scenefactory.api.parallel_env import DrivingParallelEnv

    env = make_driving_env(DrivingTaskConfig(num_worlds=1, agents_per_world=2), SCENES)
    for view in (DrivingVectorEnv(env), DrivingParallelEnv(env)):
        for seed in (2**64, -1, 1.5, "3", True):
            _raises(lambda v=view, s=seed: v.reset(seed=s), "reset(seed=...)", "[0, 4294967295]")
        view.reset(seed=2**32 - 1)
    vec = DrivingVectorEnv(env)
    vec.reset(seed=0)
    _raises(lambda: vec.step(torch.zeros(2, 2, device="meta")), "actions", "meta")
    obs, *_ = vec.step(torch.zeros(2, 2, requires_grad=True))
    assert obs.shape[0] == 2


def test_the_docs_tables_are_the_bounds() -> None:
    """``docs/concepts/scene-checks.md`` holds ``bounds.docs_tables()`` between its markers."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "concepts" / "scene-checks.md").read_text()
    start = "<!-- generated by scenefactory.bounds.docs_tables(): do not edit by hand -->\n"
    block = page.split(start, 1)[1].split("<!-- end of generated tables -->", 1)[0]
    assert block == bounds.docs_tables(), (
        "regenerate the tables of docs/concepts/scene-checks.md with scenefactory.bounds.docs_tables()"
    )


def test_go1_actions_are_converted_or_named() -> None:
    env = make_go1_env(num_envs=2)
    assert env.step(np.zeros((2, 12))).actor_obs.shape[0] == 2
    assert env.step(torch.zeros(2, 12, requires_grad=True)).actor_obs.shape[0] == 2
    _raises(lambda: env.step(torch.zeros(2, 12, device="meta")), "actions", "meta")
    _raises(lambda: env.step(torch.zeros(2, 11)), "actions", "(2, 12)", "(2, 11)")
