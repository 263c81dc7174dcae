"""Data-parallel PPO under ``torchrun`` (gloo, two CPU processes): one checkpoint folder, ranks that
end with the same networks, an exact resume, and an update that is the one-process update of the
same data.

``torchrun --nproc_per_node 2`` runs this file as its worker script (the ``__main__`` block below):
each rank trains tiny driving runs on the kinematic tier through ``jobs.drive.train`` and saves its
own final networks beside them (test output, not the run's: only rank 0 writes into a run folder).

"Trains as well as one process with the same total batch", made exact: in the ``same-data`` run
both ranks simulate the same worlds (their seed offset patched away here), so the pooled batch is
one process's batch twice. Gradients averaged over the ranks, the pooled observation normalizer,
the averaged KL divergence, the advantages normalized over both ranks and the pooled episode
statistics must then give what one process gives on those worlds: every history figure within
:data:`SAME_DATA_TOL` and every weight within :data:`WEIGHT_TOL` (what differs is float rounding
and the unbiased advantage standard deviation over 2n instead of n samples). With their own
seeds (``seed + rank``) the two ranks see different worlds, and there a few iterations'
rewards measure only noise: on this 2-core machine the per-step reward of 20 iterations moved by
about as much between seeds as over training, so no tolerance there would test anything.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from scenefactory.checkpoint import load_checkpoint
from scenefactory.engines.spec import EngineSpec
from scenefactory.errors import UserError
from scenefactory.rl import distributed
from scenefactory.rl.ppo import PPOConfig

ITERATIONS = 2
WORLDS = 4
"""Worlds of the two-rank runs (two per rank)."""
SAME_DATA_TOL = 1e-2
"""Relative tolerance of the same-data run's history figures (module doc: the advantages' standard
deviation over 2n pooled samples instead of n moves the surrogate loss by about 1/(2n), 0.4 % here)."""
WEIGHT_TOL = 1e-4
"""Absolute tolerance of its weights (|w| <= 1 here; they differ by about 1e-5 after two updates)."""
PPO = PPOConfig(
    num_steps_per_env=8,
    num_mini_batches=2,
    num_learning_epochs=2,
    actor_hidden_dims=(32, 32),
    critic_hidden_dims=(32, 32),
)
"""Small networks and rollouts: the plumbing is under test, not the policy."""
TIMINGS = ("steps_per_s", "collect_s", "learn_s")


def _train_args(out: Path, worlds: int, iterations: int) -> Any:
    from scenefactory.jobs.drive import TrainArgs

    return TrainArgs(
        out=out,
        engine=EngineSpec("kinematic"),
        worlds=worlds,
        agents=2,
        iterations=iterations,
        seed=0,
        num_train_scenes=4,
    )


def _networks(trainer: Any) -> dict[str, torch.Tensor]:
    alg = trainer.alg
    out = {f"actor.{k}": v.clone() for k, v in alg.get_policy().state_dict().items()}
    out.update({f"critic.{k}": v.clone() for k, v in alg.critic.state_dict().items()})
    return out


def collectives(path: Path) -> None:
    """This rank's inputs and outputs of the collectives the trainer adds to rsl-rl's: the masked
    advantage normalization over all ranks (``rl.driving.mask_decisions``) and the gathers."""
    from scenefactory.rl.driving import mask_decisions

    ranks = distributed.setup("cpu")
    g = torch.Generator().manual_seed(100 + ranks.rank)
    steps, envs = 6, 5 + ranks.rank  # ranks need not hold the same number of samples here
    storage = SimpleNamespace(
        returns=torch.randn(steps, envs, 1, generator=g),
        values=torch.randn(steps, envs, 1, generator=g),
        advantages=None,
    )
    inputs = {"returns": storage.returns.clone(), "values": storage.values.clone()}
    valid = torch.rand(steps, envs, generator=g) > 0.3
    mask_decisions(SimpleNamespace(storage=storage), valid, ranks)
    outputs = {
        "valid": valid,
        "advantages": storage.advantages,
        "masked_returns": storage.returns,
        "cat": ranks.cat(torch.arange(ranks.rank + 1)),
        "sum": torch.tensor(ranks.sum([ranks.rank, 1.5])),
        "gathered": ranks.gather_to_main({"rank": ranks.rank}),
    }
    torch.save({**inputs, **outputs}, path)


def _worker(root: Path) -> None:
    """One rank's part (run by torchrun): the straight, the stopped-and-resumed and the same-data
    runs; each rank saves its final networks as ``root/ranks/<run>_<rank>.pt``."""
    from scenefactory.jobs.drive import train

    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    (root / "ranks").mkdir(exist_ok=True)

    def run(name: str, out: Path, iterations: int, worlds: int = WORLDS) -> None:
        trainer = train(_train_args(out, worlds, iterations), PPO)
        torch.save(_networks(trainer), root / "ranks" / f"{name}_{rank}.pt")

    collectives(root / "ranks" / f"collectives_{rank}.pt")
    run("straight", root / "straight", ITERATIONS)
    run("stopped", root / "resumed", ITERATIONS - 1)
    run("resumed", root / "resumed", ITERATIONS)
    distributed.Ranks.seed = lambda self, seed: seed  # type: ignore[method-assign]  # same worlds
    run("same_data", root / "same_data", ITERATIONS, worlds=2 * WORLDS)


# ----------------------------------------------------------------------------------------- pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The worker's runs under ``torchrun --nproc_per_node 2`` (gloo on the CPU)."""
    root = tmp_path_factory.mktemp("torchrun")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
        __file__,
        str(root),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop(distributed.BACKEND_ENV, None)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (a history figure of an iteration that finished no episode)."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


def _rows(out: Path) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in r.items() if k not in TIMINGS}
        for r in json.loads((out / "history.json").read_text())
    ]


@pytest.mark.slow
def test_two_ranks_write_one_run_folder_and_end_with_the_same_networks(two_ranks: Path) -> None:
    out = two_ranks / "straight"
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert [f for f in files if not f.startswith("tensorboard/")] == [
        "checkpoints/latest.pt",
        f"checkpoints/model_{ITERATIONS}.pt",
        "config.json",
        "history.json",
        "learning_curve.png",
    ]
    assert len([f for f in files if f.startswith("tensorboard/")]) == 1  # rank 0's event file only
    ckpt = load_checkpoint(out / "checkpoints" / "latest.pt")
    assert ckpt["world_size"] == 2 and len(ckpt["rank_states"]) == 1
    assert ckpt["task_cfg"]["num_worlds"] == WORLDS  # the run's worlds; each rank simulated half
    assert ckpt["env_state"]["episode"]["step_count"].shape[0] == WORLDS // 2
    steps_per_iteration = PPO.num_steps_per_env * WORLDS * 2  # every rank's agents
    assert ckpt["env_steps"] == ITERATIONS * steps_per_iteration
    # the ranks simulated different worlds (seed + rank) ...
    assert not torch.equal(ckpt["env_state"]["generator"], ckpt["rank_states"][0]["env_state"]["generator"])
    # ... and hold the same networks, rank 0's as saved
    r0, r1 = (torch.load(two_ranks / "ranks" / f"straight_{r}.pt") for r in (0, 1))
    assert r0.keys() == r1.keys()
    assert all(torch.equal(r0[k], r1[k]) for k in r0)
    assert all(
        torch.equal(ckpt["actor_state_dict"][k.removeprefix("actor.")], v)
        for k, v in r0.items()
        if k.startswith("actor.")
    )
    assert sorted(p.name for p in two_ranks.iterdir()) == [
        "ranks",
        "resumed",
        "same_data",
        "straight",
    ]


@pytest.mark.slow
def test_a_stopped_two_rank_run_resumes_exactly(two_ranks: Path) -> None:
    """Each rank continues its own saved worlds and generators: stopped after iteration 2 and
    resumed, the run is the straight one, bit for bit."""
    resumed_rows, straight_rows = _rows(two_ranks / "resumed"), _rows(two_ranks / "straight")
    assert [r.keys() for r in resumed_rows] == [r.keys() for r in straight_rows]
    assert all(_same(a[k], b[k]) for a, b in zip(resumed_rows, straight_rows, strict=True) for k in a)
    for r in (0, 1):
        resumed, straight = (torch.load(two_ranks / "ranks" / f"{n}_{r}.pt") for n in ("resumed", "straight"))
        assert all(torch.equal(resumed[k], straight[k]) for k in straight)
    stopped = torch.load(two_ranks / "ranks" / "stopped_0.pt")
    assert not all(torch.equal(stopped[k], resumed[k]) for k in stopped)  # it did train on


@pytest.mark.slow
def test_the_advantages_are_normalized_over_every_rank(two_ranks: Path) -> None:
    """Two ranks of different data (5 and 6 agents, their own decisions): each rank's advantages
    are its part of what one process computes on both ranks' samples together."""
    from scenefactory.rl.driving import mask_decisions

    parts = [torch.load(two_ranks / "ranks" / f"collectives_{r}.pt") for r in (0, 1)]
    storage = SimpleNamespace(**{k: torch.cat([p[k] for p in parts], dim=1) for k in ("returns", "values")})
    valid = torch.cat([p["valid"] for p in parts], dim=1)
    mask_decisions(SimpleNamespace(storage=storage), valid)
    split = parts[0]["valid"].shape[1]
    for part, adv, ret in zip(
        parts,
        storage.advantages.split([split, valid.shape[1] - split], dim=1),
        storage.returns.split([split, valid.shape[1] - split], dim=1),
        strict=True,
    ):
        torch.testing.assert_close(part["advantages"], adv, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(part["masked_returns"], ret)
    own = SimpleNamespace(returns=parts[1]["returns"].clone(), values=parts[1]["values"].clone())
    mask_decisions(SimpleNamespace(storage=own), parts[1]["valid"])  # rank 1 alone: another answer
    assert float((own.advantages - parts[1]["advantages"]).abs().max()) > 1e-3
    for part in parts:
        assert part["cat"].tolist() == [0, 0, 1] and part["sum"].tolist() == [1.0, 3.0]
    assert parts[0]["gathered"] == [{"rank": 0}, {"rank": 1}] and parts[1]["gathered"] is None


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= SAME_DATA_TOL * abs(want) + 1e-7


@pytest.mark.slow
def test_two_ranks_on_the_same_data_update_as_one_process(two_ranks: Path, tmp_path: Path) -> None:
    """Both ranks on the same worlds (module doc): the one-process run of those worlds, figure for
    figure and weight for weight, within :data:`SAME_DATA_TOL` and :data:`WEIGHT_TOL`."""
    from scenefactory.jobs.drive import train

    torch.set_num_threads(1)
    one = train(_train_args(tmp_path / "one", WORLDS, ITERATIONS), PPO)
    two, ref = _rows(two_ranks / "same_data"), _rows(tmp_path / "one")
    assert len(two) == len(ref) == ITERATIONS
    for got, want in zip(two, ref, strict=True):
        assert got.keys() == want.keys()
        for key, value in want.items():
            if key in ("env_steps", "episodes") and isinstance(value, int):  # both ranks' are counted
                assert got[key] == 2 * value, key
            elif isinstance(value, float) and value == value:
                assert _close(got[key], value), (got["iteration"], key, got[key], value)
            else:
                assert _same(got[key], value), key
    weights = torch.load(two_ranks / "ranks" / "same_data_0.pt")
    for key, value in _networks(one).items():
        if key.endswith("normalizer.count"):  # the normalizers pooled both ranks' observations
            assert torch.equal(weights[key], 2 * value), key
            continue
        assert float((weights[key] - value).abs().max()) <= WEIGHT_TOL * max(1.0, float(value.abs().max())), (
            key
        )
    # different data does give a different update: the comparison can fail
    straight = torch.load(two_ranks / "ranks" / "straight_0.pt")
    assert any(float((straight[k] - v).abs().max()) > 10 * WEIGHT_TOL for k, v in _networks(one).items())


# --------------------------------------------------------------------------- launch errors, one line


def test_the_environment_is_checked_and_the_backend_fits_the_device() -> None:
    assert distributed.ranks_from_environ({}) == distributed.SINGLE
    assert distributed.ranks_from_environ({"WORLD_SIZE": "1"}) == distributed.SINGLE
    two = distributed.ranks_from_environ({"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"})
    assert (two.rank, two.world_size, two.main, two.distributed, two.seed(5)) == (1, 2, False, True, 6)
    assert two.rsl_multi_gpu() == {"global_rank": 1, "local_rank": 1, "world_size": 2}
    assert two.share(8, "worlds") == 4 and two.device("cpu") == torch.device("cpu")
    with pytest.raises(UserError, match=r"worlds 5 does not divide among 2 training processes"):
        two.share(5, "worlds")
    with pytest.raises(UserError, match=r"RANK=2, LOCAL_RANK=2: expected 0 <= rank < WORLD_SIZE=2"):
        distributed.ranks_from_environ({"WORLD_SIZE": "2", "RANK": "2"})
    with pytest.raises(UserError, match="RANK is not set"):
        distributed.ranks_from_environ({"WORLD_SIZE": "2"})
    with pytest.raises(UserError, match="WORLD_SIZE='two' is not an integer"):
        distributed.ranks_from_environ({"WORLD_SIZE": "two"})
    assert distributed.choose_backend("cpu", None) == "gloo"
    assert distributed.choose_backend("cpu", " GLOO ") == "gloo"
    with pytest.raises(UserError, match="NCCL reduces CUDA tensors only"):
        distributed.choose_backend("cpu", "nccl")
    with pytest.raises(UserError, match=r"SCENEFACTORY_DIST_BACKEND='mpi': expected one of gloo, nccl"):
        distributed.choose_backend("cpu", "mpi")
    # one process: every collective is the identity
    single = distributed.SINGLE
    x = torch.tensor([1.0, 2.0, 4.0])
    assert single.sum([1.0, 2.0]) == [1.0, 2.0] and single.cat(x) is x
    mean, std = single.mean_std(x)
    assert float(mean) == pytest.approx(7 / 3) and float(std) == pytest.approx(float(x.std()))
    assert single.own_state("ckpt", {"a": 1}) == {"a": 1}
    with pytest.raises(UserError, match="lacks rank 1's state"):
        two.own_state("ckpt", {"rank_states": []})


TORCHRUN_ENV = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}


def test_python_m_scenefactory_under_torchrun_runs_train_only(tmp_path: Path) -> None:
    """``python -m scenefactory`` (what ``torchrun -m scenefactory`` runs) in a torchrun
    environment: any command but ``train`` is one line, exit status 2."""
    env = {**os.environ, **TORCHRUN_ENV, "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "scenefactory", "bench", "drive", "--out", str(tmp_path / "b")]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "'bench' runs in one process: torchrun (WORLD_SIZE > 1) starts 'train drive'" in proc.stderr


def test_a_batch_that_does_not_divide_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_error: Any
) -> None:
    for key, value in TORCHRUN_ENV.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "t"
    err = cli_error("train", "drive", "--engine", "kinematic", "--worlds", "3", "--out", str(out))
    assert "the run's worlds (--worlds) 3 does not divide among 2 training processes" in err
    err = cli_error("train", "go1", "--envs", "5", "--iterations", "1", "--out", str(out))
    assert "the run's robots (--envs) 5 does not divide among 2 training processes" in err
    assert not out.exists() and not torch.distributed.is_initialized()


if __name__ == "__main__":  # torchrun's worker: see the module doc
    _worker(Path(sys.argv[1]))
