"""Runs inside the official venv made by ``benchmarks/wosac_official.py`` (TensorFlow 2.13 and
waymo-open-dataset-tf-2-12-0 1.6.7): exports our rollouts in the official submission format
(``sim_agents_submission_pb2.ScenarioRollouts``, one per scenario, validated by
``submission_specs.validate_scenario_rollouts``) and scores them with the official
``sim_agents_metrics.metrics.compute_scenario_metrics_for_bundle`` and the 2025 config.

Usage: python wosac_official_child.py SCENES_DIR ROLLOUTS_NPZ OUT_JSON EXPORT_TFRECORD
Not part of the package: it imports only TensorFlow and the Waymo package.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from waymo_open_dataset.protos import scenario_pb2, sim_agents_metrics_pb2, sim_agents_submission_pb2
from waymo_open_dataset.utils.sim_agents import submission_specs
from waymo_open_dataset.wdl_limited.sim_agents_metrics import metrics

FIELDS = (
    "metametric",
    "average_displacement_error",
    "min_average_displacement_error",
    "linear_speed_likelihood",
    "linear_acceleration_likelihood",
    "angular_speed_likelihood",
    "angular_acceleration_likelihood",
    "distance_to_nearest_object_likelihood",
    "collision_indication_likelihood",
    "time_to_collision_likelihood",
    "distance_to_road_edge_likelihood",
    "offroad_indication_likelihood",
    "traffic_light_violation_likelihood",
    "simulated_collision_rate",
    "simulated_offroad_rate",
    "simulated_traffic_light_violation_rate",
)


def rollouts_proto(scenario_id: str, object_id: np.ndarray, future: np.ndarray):
    """``ScenarioRollouts`` of R joint scenes from ``future`` (R, N, 80, 4) x, y, z, heading."""
    scenes = []
    for r in range(future.shape[0]):
        trajs = [
            sim_agents_submission_pb2.SimulatedTrajectory(
                center_x=future[r, i, :, 0],
                center_y=future[r, i, :, 1],
                center_z=future[r, i, :, 2],
                heading=future[r, i, :, 3],
                object_id=int(object_id[i]),
            )
            for i in range(future.shape[1])
        ]
        scenes.append(sim_agents_submission_pb2.JointScene(simulated_trajectories=trajs))
    return sim_agents_submission_pb2.ScenarioRollouts(scenario_id=scenario_id, joint_scenes=scenes)


def load_config():
    """The 2025 config shipped in the wheel (``metrics.load_metrics_config`` opens it by a path relative
    to the working directory, which only works from site-packages)."""
    import waymo_open_dataset

    path = (
        Path(next(iter(waymo_open_dataset.__path__)))
        / "wdl_limited/sim_agents_metrics/challenge_2025_sim_agents_config.textproto"
    )
    config = sim_agents_metrics_pb2.SimAgentMetricsConfig()
    text_format.Parse(path.read_text(), config)
    return config


def main() -> None:
    scenes_dir, npz_path, out_json, export_path = map(Path, sys.argv[1:5])
    data = np.load(npz_path)
    ids = sorted({k.split("/")[0] for k in data.files})
    files = sorted(str(p) for p in scenes_dir.iterdir() if "tfrecord" in p.name)
    config = load_config()
    out = {}
    seconds = {}
    with tf.io.TFRecordWriter(str(export_path)) as writer:
        for record in tf.data.TFRecordDataset(files):
            scenario = scenario_pb2.Scenario.FromString(record.numpy())
            if scenario.scenario_id not in ids:
                continue
            sid = scenario.scenario_id
            proto = rollouts_proto(sid, data[f"{sid}/object_id"], data[f"{sid}/future"])
            submission_specs.validate_scenario_rollouts(proto, scenario)
            writer.write(proto.SerializeToString())
            t = time.perf_counter()
            m = metrics.compute_scenario_metrics_for_bundle(config, scenario, proto)
            seconds[sid] = time.perf_counter() - t
            out[sid] = {f: float(getattr(m, f)) for f in FIELDS}
            print(sid, f"{m.metametric:.5f}", f"{seconds[sid]:.1f} s", flush=True)
    missing = sorted(set(ids) - set(out))
    Path(out_json).write_text(
        json.dumps(
            {"metrics": out, "seconds": seconds, "missing": missing, "tensorflow": tf.__version__}, indent=2
        )
    )


if __name__ == "__main__":
    main()
