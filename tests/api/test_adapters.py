"""The Gymnasium vector views and the PettingZoo parallel view (``scenefactory.api``): each library's
contract (spaces, shapes, dtypes, same-step autoreset, seeding; PettingZoo's own API test), the
task's semantics (an agent's episode ends once, then its slot waits masked until its world resets;
time-outs are truncations) and zero-copy hand-out of the environment's tensors."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.utils.passive_env_checker import check_obs
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics
from pettingzoo.test import parallel_api_test

from scenefactory.api import (
    AgentStatus,
    DrivingTaskConfig,
    Go1TaskConfig,
    make_driving_env,
    make_go1_env,
    nominal,
    procedural_scenes,
)
from scenefactory.api.gym_vector import DrivingVectorEnv, Go1VectorEnv
from scenefactory.api.parallel_env import DrivingParallelEnv

W, K = 2, 3
TASK = DrivingTaskConfig(num_worlds=W, agents_per_world=K, episode_length_s=3.0)  # 30 steps
N = W * K
TERMINAL = (int(AgentStatus.GOAL), int(AgentStatus.COLLISION), int(AgentStatus.OFFROAD))


def driving_vec(arrays: str = "numpy") -> DrivingVectorEnv:
    scenes = procedural_scenes("train", 6, K)
    return DrivingVectorEnv(make_driving_env(TASK, scenes, seed=0), arrays=arrays)


# ---------------------------------------------------------------------------------- Gymnasium


def test_driving_vector_spaces_and_reset() -> None:
    vec = driving_vec()
    d = vec.env.obs_dim
    assert vec.num_envs == N
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert vec.single_observation_space == spaces.Box(-np.inf, np.inf, (d,), np.float32)
    assert vec.single_action_space == spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert vec.observation_space.shape == (N, d) and vec.observation_space.dtype == np.float32
    assert vec.action_space.shape == (N, 2)
    obs, info = vec.reset(seed=5)
    assert obs.shape == (N, d) and obs.dtype == np.float32
    assert vec.observation_space.contains(obs)
    check_obs(obs[0], vec.single_observation_space, "reset")
    assert info["active"].shape == (N,) and info["active"].dtype == np.bool_
    again, _ = vec.reset(seed=5)
    other, _ = vec.reset(seed=6)
    np.testing.assert_array_equal(obs, again)
    assert not np.array_equal(obs, other)
    with pytest.raises(ValueError, match="no reset options"):
        vec.reset(options={"scene": 1})
    with pytest.raises(ValueError, match=r"actions: expected shape \(6, 2\), got \(2, 3, 2\)"):
        vec.step(np.zeros((W, K, 2), np.float32))
    with pytest.raises(ValueError, match="arrays must be one of"):
        DrivingVectorEnv(vec.env, arrays="jax")


def test_driving_vector_steps_report_each_episode_end_once_then_mask_the_slot() -> None:
    vec = driving_vec()
    vec.reset(seed=0)
    vec.action_space.seed(0)
    waiting = np.zeros(N, dtype=bool)  # slots whose episode ended and whose world has not reset
    ends = records = truncations = world_resets = 0
    for _ in range(65):  # two full episodes of 30 steps: goals, crashes and time-outs
        obs, reward, terminated, truncated, info = vec.step(vec.action_space.sample())
        assert obs.shape == (N, vec.env.obs_dim) and obs.dtype == np.float32
        assert reward.shape == (N,) and reward.dtype == np.float32
        assert terminated.dtype == truncated.dtype == np.bool_
        assert vec.observation_space.contains(obs)
        assert set(info) == {"was_active", "active", "world_reset", "outcome"}
        assert all(v.shape == (N,) for v in info.values())
        done = terminated | truncated
        assert not (terminated & truncated).any()
        # a waiting slot reports nothing and is masked
        assert not info["was_active"][waiting].any()
        assert not done[waiting].any() and (reward[waiting] == 0).all()
        assert info["was_active"][done].all()
        # outcomes: terminal states terminate, time-outs truncate
        assert np.isin(info["outcome"][terminated], TERMINAL).all()
        assert (info["outcome"][truncated] == int(AgentStatus.TIMEOUT)).all()
        assert (info["outcome"][~done] == int(AgentStatus.ACTIVE)).all()
        # a world resets when each of its live agents has ended; its slots start afresh
        reset = info["world_reset"]
        assert (done | ~info["was_active"])[reset].all()
        waiting = (waiting | done) & ~reset
        np.testing.assert_array_equal(info["active"], ~waiting)  # these scenes fill every slot
        ends += int(done.sum())
        records += int(vec.last.finished.outcome.numel())
        truncations += int(truncated.sum())
        world_resets += int(reset.sum()) // K
    assert ends == records > 0
    assert truncations > 0 and world_resets >= W


def test_driving_vector_arrays_are_views_of_the_env_tensors() -> None:
    vec = driving_vec()
    obs, _ = vec.reset(seed=0)
    assert np.shares_memory(obs, vec.env.observations().numpy())
    kept = obs.copy()
    obs2, reward, *_ = vec.step(np.zeros((N, 2), np.float32))
    assert np.shares_memory(obs2, vec.env.observations().numpy())
    assert np.shares_memory(reward, vec.last.reward.numpy())
    np.testing.assert_array_equal(obs, kept)  # a later step builds new tensors, never overwrites

    tvec = driving_vec(arrays="torch")
    tobs, _ = tvec.reset(seed=0)
    assert isinstance(tobs, torch.Tensor)
    assert tobs.data_ptr() == tvec.env.observations().data_ptr()
    tobs2, treward, tterm, ttrunc, _ = tvec.step(torch.zeros(N, 2))
    assert tobs2.data_ptr() == tvec.env.observations().data_ptr()
    assert treward.dtype == torch.float32 and tterm.dtype == ttrunc.dtype == torch.bool
    np.testing.assert_array_equal(tobs2.numpy(), obs2)  # same seed, same actions, same step


def test_episode_statistics_wrapper_sums_each_agent_episode() -> None:
    """Gymnasium's own episode-return bookkeeping agrees with ours only under same-step autoreset:
    under next-step autoreset it would drop the first reward after every world reset."""
    vec = RecordEpisodeStatistics(driving_vec())
    vec.reset(seed=1)
    vec.action_space.seed(1)
    ret = np.zeros(N)
    checked = 0
    for _ in range(65):
        _, reward, terminated, truncated, info = vec.step(vec.action_space.sample())
        ret += reward
        done = terminated | truncated
        if done.any():
            np.testing.assert_allclose(info["episode"]["r"][done], ret[done], rtol=1e-5, atol=1e-5)
            ret[done] = 0.0
            checked += int(done.sum())
    assert checked >= N  # every slot ended at least one episode, after a world reset too


def test_go1_vector_env_contract_and_time_out_truncation() -> None:
    cfg = replace(nominal(Go1TaskConfig()), episode_length_s=0.1)  # 5 policy steps
    vec = Go1VectorEnv(make_go1_env(cfg, num_envs=3, seed=0))
    obs_dim = cfg.history * 45
    assert vec.single_observation_space.shape == (obs_dim,)
    assert vec.single_action_space == spaces.Box(-cfg.action_clip, cfg.action_clip, (12,), np.float32)
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    obs, info = vec.reset(seed=2)
    assert obs.shape == (3, obs_dim) and obs.dtype == np.float32 and vec.observation_space.contains(obs)
    assert info["critic_obs"].shape == (3, 73)
    kept = (obs, obs.copy())
    for t in range(1, 6):
        obs, reward, terminated, truncated, info = vec.step(np.zeros((3, 12), np.float32))
        np.testing.assert_array_equal(*kept)  # a step leaves the arrays it handed out before
        kept = (obs, obs.copy())
        assert reward.shape == (3,) and reward.dtype == np.float32
        assert not terminated.any()  # standing still at home, nobody falls
        assert truncated.all() == (t == 5) and truncated.any() == (t == 5)
        assert np.shares_memory(obs, vec.last.actor_obs.numpy())
    assert (vec.env.step_count == 0).all()  # restarted in the step that truncated them

    noisy = Go1VectorEnv(make_go1_env(num_envs=2))  # randomized robots and noisy sensors
    a = noisy.reset(seed=9)[0].copy()  # a reset rewrites the previous reset's array in place
    b = noisy.reset(seed=9)[0].copy()
    c = noisy.reset(seed=10)[0].copy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


# --------------------------------------------------------------------------------- PettingZoo


def parallel(agents_in_scenes: int = K) -> DrivingParallelEnv:
    scenes = procedural_scenes("train", 6, agents_in_scenes)
    return DrivingParallelEnv(make_driving_env(replace(TASK, num_worlds=1), scenes, seed=0))


def test_pettingzoo_parallel_api_test_passes_without_warnings() -> None:
    env = parallel()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(env, num_cycles=200)
    assert [str(w.message) for w in caught] == []


def test_parallel_agents_leave_once_finished_and_the_episode_ends_empty() -> None:
    env = parallel()
    obs, infos = env.reset(seed=3)
    assert env.agents == env.possible_agents == ["agent_0", "agent_1", "agent_2"]
    assert set(obs) == set(infos) == set(env.agents)
    assert np.shares_memory(obs["agent_1"], env.env.observations().numpy())
    ended: dict[str, str] = {}
    for _ in range(TASK.max_steps):
        live = list(env.agents)
        actions = {a: env.action_space(a).sample() for a in live}
        obs, rewards, terms, truncs, infos = env.step(actions)
        assert set(obs) == set(rewards) == set(terms) == set(truncs) == set(infos) == set(live)
        for a in live:
            assert isinstance(rewards[a], float) and obs[a].dtype == np.float32
            if terms[a] or truncs[a]:
                assert a not in env.agents
                ended[a] = infos[a]["outcome"]
                assert (infos[a]["outcome"] == "timeout") == truncs[a]
            else:
                assert a in env.agents and infos[a] == {}
        if not env.agents:
            break
    assert env.agents == [] and set(ended) == set(env.possible_agents)
    with pytest.raises(ValueError, match="call reset"):
        env.step({})
    env.reset()
    with pytest.raises(ValueError, match=r"missing \['agent_2'\]"):
        env.step({"agent_0": np.zeros(2), "agent_1": np.zeros(2)})


def test_parallel_agents_are_the_scene_s_and_one_world_only() -> None:
    env = parallel(agents_in_scenes=2)  # scenes place 2 of the K = 3 slots
    env.reset(seed=0)
    assert env.agents == ["agent_0", "agent_1"] and len(env.possible_agents) == 3
    with pytest.raises(ValueError, match=r"not live \['agent_2'\]"):
        env.step({a: np.zeros(2, np.float32) for a in env.possible_agents})
    with pytest.raises(ValueError, match="views one world; the environment has 2"):
        DrivingParallelEnv(make_driving_env(TASK, procedural_scenes("train", 2, K)))
