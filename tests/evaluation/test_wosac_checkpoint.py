"""``benchmark wosac --policy checkpoint``: a trained driving policy drives each scenario's controllable
vehicles (actions sampled, so the rollouts differ), every other object by its log or, with
``--others idm``, the logged vehicles react; every valid object is in the scored joint scene."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from scenefactory.cli.main import run
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import CheckpointError, UserError
from scenefactory.evaluation.wosac.benchmark import WosacJob, iter_wosac_scenarios
from scenefactory.evaluation.wosac.driven import Driver, driven_rollouts
from scenefactory.rl.driving import Trainer
from scenefactory.rl.driving_spec import TrainSpec
from scenefactory.rl.ppo import PPOConfig
from scenefactory.scenes.library import procedural_scenes
from scenefactory.scenes.womd.synthetic import Background, city_scenario
from scenefactory.scenes.womd.tfrecord import write_records
from scenefactory.tasks.driving.config import DrivingTaskConfig


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One generated real-format scenario with pedestrians, cyclists and parked cars."""
    folder = tmp_path_factory.mktemp("wosac-ckpt")
    bg = Background(pedestrians=3, cyclists=1, extra_parked=2, occluded_share=0.5)
    rec = city_scenario("wosac-ckpt-0", 21, 2500, 5, 2, background=bg).SerializeToString()
    write_records(folder / "synthetic.tfrecord-00000-of-00001", [rec])
    return folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1-iteration kinematic run (9 s episodes: WOSAC simulates 80 steps of 0.1 s)."""
    out = tmp_path_factory.mktemp("wosac-run")
    task = DrivingTaskConfig(num_worlds=2, agents_per_world=2, episode_length_s=9.0)
    ppo = PPOConfig(num_steps_per_env=4, num_mini_batches=1, num_learning_epochs=1, save_interval=1)
    spec = TrainSpec(
        task=task, ppo=ppo, engine=EngineSpec(tier="kinematic"), iterations=1, seed=0, num_train_scenes=2
    )
    Trainer(spec, procedural_scenes("train", 2, 2), out).run()
    return out / "checkpoints" / "latest.pt"


def _stop(obs: torch.Tensor) -> torch.Tensor:
    return torch.tensor([0.0, -1.0]).expand(*obs.shape[:-1], 2)


@pytest.mark.slow  # the first scene's road grid and the native kernels' compilation: ~8 s
def test_agents_are_driven_and_the_rest_replayed_or_reacting(shard: Path) -> None:
    """A policy that brakes: its agents stand near their logged start (they move at most what their
    speed allows while braking), the other objects keep their logs under ``log``; under ``idm`` the
    pedestrians still do, and some logged vehicle leaves its log (it brakes for the stopped agents)."""
    scenario, scn = next(iter_wosac_scenarios(shard, 1))
    task = DrivingTaskConfig()
    log_fut, counts = driven_rollouts(scenario, scn, Driver(_stop, task, EngineSpec(tier="kinematic")), 2)
    assert counts["agents"] >= 1 and counts["converted"] == 1 and counts["reacting"] == 0
    logged = scn.traj[:, 11:, :4]
    moved = (log_fut[0, :, :, :2] - logged[..., :2]).norm(dim=-1).amax(-1) > 1e-4  # (N,)
    assert 1 <= int(moved.sum()) <= counts["agents"]  # only the driven agents leave their logs
    idm_fut, c2 = driven_rollouts(scenario, scn, Driver(_stop, task, EngineSpec(tier="kinematic"), "idm"), 2)
    assert c2["reacting"] >= 1
    people = scn.object_type != 1
    assert torch.equal(idm_fut[:, people], log_fut[:, people])
    assert not torch.equal(idm_fut, log_fut)


@pytest.mark.slow
def test_checkpoint_rollouts_are_sampled_and_scored(shard: Path, checkpoint: Path, tmp_path: Path) -> None:
    """The CLI scores a checkpoint's sampled rollouts, both ``--others`` modes, and says what it drove."""
    for others in ("log", "idm"):
        out = tmp_path / others
        argv = ["benchmark", "wosac", "--scenes", str(shard), "--policy", "checkpoint"]
        argv += [
            "--checkpoint",
            str(checkpoint),
            "--others",
            others,
            "--rollouts",
            "2",
            "--out",
            str(out),
            "--quiet",
        ]
        argv += ["--save-rollouts"]
        assert run(argv) == 0
        m = json.loads((out / "metrics.json").read_text())
        assert m["driven"]["others"] == others and m["driven"]["agents"] >= 1 and m["driven"]["sampled"]
        assert 0.0 < m["buckets"]["realism_meta_metric"] <= 1.0
        import numpy as np

        saved = np.load(out / "rollouts.npz")
        fut = next(saved[k] for k in saved.files if k.endswith("/future"))
        assert not np.array_equal(fut[0], fut[1])  # sampled actions: the two rollouts differ


def test_bad_checkpoint_input_is_a_clear_error(shard: Path, tmp_path: Path) -> None:
    """No checkpoint, a missing file, ``--others idm`` without a checkpoint policy, a policy that
    does not step at 10 Hz: each refused naming what was expected."""
    with pytest.raises(UserError, match="--checkpoint PATH goes with --policy checkpoint"):
        WosacJob(scenes=shard, policy="checkpoint", out=tmp_path)
    with pytest.raises(UserError, match="--others"):
        WosacJob(scenes=shard, policy="log", out=tmp_path, others="idm")
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        run(
            [
                "benchmark",
                "wosac",
                "--scenes",
                str(shard),
                "--policy",
                "checkpoint",
                "--checkpoint",
                str(tmp_path / "none.pt"),
                "--out",
                str(tmp_path / "o"),
            ]
        )
    with pytest.raises(UserError, match="10 Hz"):
        Driver(_stop, DrivingTaskConfig(dt_s=0.05), EngineSpec(tier="kinematic"))
