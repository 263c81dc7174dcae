"""``experiment NAME --ray ADDRESS``: each (kind, seed) training and each evaluation as a Ray task,
on a local Ray instance started here (two CPUs) standing in for a cluster; the smallest
experiment configuration (the tests' ``TINY`` sizes) of ``transfer``.

What is checked: the report folder and every cell's metrics are written (by the driver), the Ray
evaluation gives what the same evaluation gives in this process, a rerun resumes (a finished
training is reused, not redone), and a job that fails on a worker is named by its (kind, seed)
while the other jobs finish.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from scenefactory.engines.spec import EngineSpec
from scenefactory.experiments import ExperimentArgs, Sizes, run_experiment
from scenefactory.experiments.base import train_all, train_spec
from scenefactory.experiments.ray_backend import ClusterJobError, _sees
from scenefactory.jobs.drive import EvalArgs, evaluate

TINY = Sizes(seeds=1, train_worlds=2, train_agents=2, iterations=1, train_scenes=2, episodes=2, eval_worlds=2)
"""The smallest experiment sizes the tests use (``tests/experiments/test_experiments.py``)."""
TIERS = ("kinematic", "mujoco")
RESULT_KEYS = ("goal_reach_rate", "collision_rate", "offroad_rate", "episodes", "scenes")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Ray instance (2 CPUs, no dashboard); its GCS address, as ``--ray`` takes it."""
    ray = pytest.importorskip("ray")
    ctx = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield str(ctx.address_info["gcs_address"])
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def transfer_on_ray(cluster: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("transfer_ray")
    run_experiment("transfer", ExperimentArgs(out=out, sizes=TINY, ray=cluster, command="test"))
    return out


def _stamp(path: Path) -> tuple[int, bytes]:
    return path.stat().st_mtime_ns, path.read_bytes()


@pytest.mark.slow
def test_transfer_on_ray_writes_the_report_and_every_cell(transfer_on_ray: Path) -> None:
    out = transfer_on_ray
    doc = json.loads((out / "results.json").read_text())
    cells = doc["results"]["cells"]
    assert [(c["kind"], c["eval_tier"]) for c in cells] == [(t, e) for t in TIERS for e in TIERS]
    for trained in TIERS:
        assert (out / "train" / f"{trained}_s0" / "checkpoints" / "latest.pt").is_file()
        for engine in TIERS:
            cell = out / f"{trained}_on_{engine}"
            assert sorted(p.name for p in cell.iterdir()) == ["metrics.json", "metrics.md", "metrics.png"]
            metrics = json.loads((cell / "metrics.json").read_text())
            assert metrics["engine"] == engine and metrics["trained_on"] == trained
            assert metrics["episodes"] >= TINY.episodes
    assert (out / "report.md").is_file() and (out / "transfer.json").is_file()
    assert not list(out.glob(".ray-probe-*")) and not (out / "ray_failures.log").exists()


@pytest.mark.slow
def test_an_evaluation_on_ray_is_the_one_made_here(transfer_on_ray: Path, tmp_path: Path) -> None:
    """The cell ``kinematic_on_kinematic`` as Ray computed it, and ``eval drive``'s job run here on
    the same checkpoint, scenes and seed: the same figures."""
    ckpt = transfer_on_ray / "train" / "kinematic_s0" / "checkpoints" / "latest.pt"
    here = evaluate(
        EvalArgs(
            checkpoint=ckpt,
            out=tmp_path,
            engine=EngineSpec("kinematic"),
            episodes=TINY.episodes,
            seed=0,
            worlds=TINY.eval_worlds,
        )
    )
    on_ray = json.loads((transfer_on_ray / "kinematic_on_kinematic" / "metrics.json").read_text())
    assert {k: on_ray[k] for k in RESULT_KEYS} == {k: here[k] for k in RESULT_KEYS}


@pytest.mark.slow
def test_a_rerun_reuses_finished_trainings_and_a_failing_job_is_named(
    transfer_on_ray: Path, cluster: str, tmp_path: Path
) -> None:
    """The experiment's trainings again, into a folder holding the finished ``(kinematic, seed 0)``
    run and a damaged ``(broken, seed 0)`` one (a file where its checkpoints belong): the first
    resumes with nothing left to do and writes nothing; the second fails on its worker and is
    named, after the first finished."""
    shutil.copytree(transfer_on_ray / "train" / "kinematic_s0", tmp_path / "train" / "kinematic_s0")
    latest = tmp_path / "train" / "kinematic_s0" / "checkpoints" / "latest.pt"
    before = _stamp(latest)
    broken = tmp_path / "train" / "broken_s0"
    broken.mkdir(parents=True)
    (broken / "checkpoints").write_text("not a folder")

    def spec(seed: int) -> Any:  # what transfer trained its kinematic policies with
        return train_spec(EngineSpec("kinematic"), TINY, seed)

    args = ExperimentArgs(out=tmp_path, ray=cluster)
    with pytest.raises(ClusterJobError) as info:
        train_all({"kinematic": ([], spec), "broken": ([], spec)}, args, TINY)
    message = str(info.value)
    assert message.startswith("1 of 2 jobs failed on the Ray cluster (the others finished;")
    assert "training (broken, seed 0): CheckpointError:" in message and "is a file" in message
    pid = int(message.split("worker pid ")[1].split()[0])
    assert pid != os.getpid()  # it ran on a Ray worker
    assert _stamp(latest) == before  # resumed: nothing left to train, nothing rewritten
    log = (tmp_path / "ray_failures.log").read_text()
    assert log.startswith("== training (broken, seed 0)") and "Traceback" in log


def test_ray_addresses_and_shared_folders_are_checked(
    tmp_path: Path, cli_error: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = cli_error("experiment", "transfer", "--ray", f"127.0.0.1:{port}", "--out", str(tmp_path / "o"))
    assert f"--ray '127.0.0.1:{port}': no Ray cluster reachable" in err
    assert "--ray 'nope': not a Ray address" in cli_error(
        "experiment", "transfer", "--ray", "nope", "--out", str(tmp_path / "o")
    )
    probe = tmp_path / "probe"
    probe.write_text("token")
    assert _sees(str(probe), "token").split("\n")[1] == "ok"
    assert "cannot read it (FileNotFoundError" in _sees(str(tmp_path / "missing"), "token")
    assert replace(ExperimentArgs(out=tmp_path), ray=None).executor().remote is False
