"""Which logged vehicles a converted scene controls, which it replays, and why — counted, never
dropped silently (``convert.select_agents``, ``summary.json``, ``eval drive``'s ``agents``).

Scenarios are WOMD records in the real wire format: ``make_scenario``'s road with its three moving
cars and a pedestrian, plus the cases that must not be controlled (a parked car, one that appears
after the start, one whose log ends 0.3 s in, one seen only in the history, a cyclist) and one whose
log ends early but after a real drive (controlled: its goal is where its log ends).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenefactory.cli import main
from scenefactory.scenes.scene_json import load_scene
from scenefactory.scenes.womd.convert import PARKED_M, REASONS, scenario_to_scene
from scenefactory.scenes.womd.scenario_pb2 import Scenario, Track
from scenefactory.scenes.womd.tfrecord import write_records
from test_womd_reader import CURRENT, STEPS, make_scenario


def _track(track_id: int, kind: int, xy: list[tuple[float, float] | None], speed: float = 0.0) -> Track:
    """A track heading +x; ``xy[t]`` None = not observed at step t."""
    track = Track(id=track_id, object_type=kind)  # type: ignore[arg-type]
    for p in xy:
        if p is None:
            track.states.add(valid=False)
        else:
            track.states.add(
                center_x=p[0], center_y=p[1], center_z=0.8, length=4.6, width=1.9, height=1.6,
                heading=0.0, velocity_x=speed, velocity_y=0.0, valid=True,
            )  # fmt: skip
    return track


def _moving(y: float, speed: float, x0: float = -30.0, valid: range = range(STEPS)) -> list:
    return [(x0 + speed * 0.1 * t, y) if t in valid else None for t in range(STEPS)]


def selection_scenario(scenario_id: str = "selection") -> Scenario:
    """``make_scenario`` (SDC 100, track to predict 101, car 102, pedestrian 200) plus:
    300 parked (1 cm jitter), 301 first seen at step 20, 302 log ends at step 13 (2.4 m),
    303 seen only at steps 0-5, 304 a cyclist, 305 log ends at step 40 after 24 m (controlled)."""
    sc = make_scenario(scenario_id, 3)
    jitter = np.random.default_rng(0).normal(0.0, 0.01, (STEPS, 2))
    sc.tracks.extend(
        [
            _track(300, Track.TYPE_VEHICLE, [(10.0 + a, -6.0 + b) for a, b in jitter]),
            _track(301, Track.TYPE_VEHICLE, _moving(1.75, 8.0, x0=-60.0, valid=range(20, STEPS)), 8.0),
            _track(302, Track.TYPE_VEHICLE, _moving(-1.75, 8.0, x0=-80.0, valid=range(0, 14)), 8.0),
            _track(303, Track.TYPE_VEHICLE, _moving(1.75, 8.0, x0=-90.0, valid=range(0, 6)), 8.0),
            _track(304, Track.TYPE_CYCLIST, _moving(-3.0, 4.0, x0=0.0), 4.0),
            _track(305, Track.TYPE_VEHICLE, _moving(1.75, 8.0, x0=-70.0, valid=range(0, 41)), 8.0),
        ]
    )
    return sc


def test_selection_rule_reasons_and_counts() -> None:
    sc = selection_scenario()
    scene, report = scenario_to_scene(sc)
    counts = scene.params["agents"]
    # SDC first, then the track to predict, then by distance to the SDC
    assert counts["controlled_track_ids"] == [100, 101, 102, 305]
    assert counts["by_reason"] == {
        "not_vehicle": 2,  # the pedestrian and the cyclist
        "not_valid_at_start": 1,  # 301
        "parked": 1,  # 300 (its jitter is far below PARKED_M)
        "short_log": 1,  # 302
        "beyond_max_agents": 0,
    }
    assert (counts["controlled"], counts["replayed"], counts["left_out"], counts["history_only"]) == (
        4,
        5,
        0,
        1,
    )
    assert counts["controlled"] + counts["replayed"] + counts["history_only"] == len(sc.tracks)
    assert scene.replay is not None and scene.replay.num_objects == 5
    assert sorted(scene.replay.kind.tolist()) == [1, 1, 1, 2, 3]  # 3 vehicles, the pedestrian, the cyclist
    assert report.not_controlled == counts["by_reason"] and report.replayed_objects == 5
    assert report.history_only_objects == 1 and report.controlled_agents == 4
    # the car whose log ends early: its goal is where its log ends, and its log says so
    origin = np.array(scene.params["origin_xy"])
    np.testing.assert_allclose(scene.goal_xy[3], np.array([-70.0 + 8.0 * 0.1 * 40, 1.75]) - origin)
    assert scene.log is not None
    assert scene.log.valid[3, : 40 - CURRENT + 1].all() and not scene.log.valid[3, 40 - CURRENT + 1 :].any()
    assert set(REASONS) == set(counts["by_reason"]) and PARKED_M > 0.1


def test_vehicles_beyond_max_agents_are_replayed_and_counted() -> None:
    sc = selection_scenario("crowded")
    scene, _ = scenario_to_scene(sc, max_agents=2)
    counts = scene.params["agents"]
    assert counts["controlled_track_ids"] == [100, 101] and scene.num_agents == 2
    assert counts["by_reason"]["beyond_max_agents"] == 2 and counts["replayed"] == 7
    assert scene.replay is not None and sorted(scene.replay.kind.tolist()) == [1, 1, 1, 1, 1, 2, 3]
    # a replay cap leaves the farthest out — counted as left out, with their reasons
    capped, report = scenario_to_scene(sc, max_agents=2, max_replay=3)
    c = capped.params["agents"]
    assert (c["replayed"], c["left_out"]) == (3, 4) and report.left_out_objects == 4
    assert sum(c["by_reason"].values()) == c["replayed"] + c["left_out"]


def test_convert_summary_and_expert_eval_report_the_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shard = tmp_path / "in.tfrecord"
    write_records(
        shard,
        [selection_scenario("sel-a").SerializeToString(), make_scenario("plain", 2).SerializeToString()],
    )
    out = tmp_path / "out"
    assert main(["--threads", "1", "convert", str(shard), "--out", str(out), "--max-agents", "3"]) == 0
    assert "agents: 5 controlled, 7 replayed" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    agents = summary["agents"]
    # sel-a: 3 controlled (SDC, 101, then 102, nearer than 305: beyond --max-agents); plain: 2
    assert (agents["controlled"], agents["replayed"], agents["left_out"], agents["history_only"]) == (
        5,
        7,
        0,
        1,
    )
    assert agents["by_reason"] == {
        "not_vehicle": 3,  # two pedestrians and the cyclist
        "not_valid_at_start": 1,
        "parked": 1,
        "short_log": 1,
        "beyond_max_agents": 1,
    }
    assert set(agents["reasons"]) == set(REASONS)
    scene = load_scene(out / "json" / "sel-a.json")  # the scene keeps its own counts
    assert scene.params["agents"]["controlled"] == 3 and scene.params["agents"]["replayed"] == 6
    # eval: K from the data (3), the counts carried over, nothing left out
    m_out = tmp_path / "expert"
    argv = ["--threads", "1", "eval", "drive", "--policy", "expert", "--scenes", str(out / "json")]
    assert main([*argv, "--out", str(m_out)]) == 0
    m = json.loads((m_out / "metrics.json").read_text())
    assert m["agents_per_world"] == 3 and m["episodes"] == 5
    assert (m["agents"]["controlled"], m["agents"]["replayed"], m["agents"]["left_out"]) == (5, 7, 0)
    assert m["agents"]["by_reason"] == {**agents["by_reason"], "beyond_agents_per_world": 0}
    # a smaller --agents says so, and the agents beyond it replay their logs
    capsys.readouterr()
    assert main([*argv, "--agents", "1", "--out", str(m_out)]) == 0
    err = capsys.readouterr().err
    assert "hold more controlled agents than --agents (1)" in err and "the other 3 replay their logs" in err
    m1 = json.loads((m_out / "metrics.json").read_text())
    assert m1["episodes"] == 2 and m1["agents"]["by_reason"]["beyond_agents_per_world"] == 3
    assert (m1["agents"]["controlled"], m1["agents"]["replayed"], m1["agents"]["left_out"]) == (2, 10, 0)


_KINDS = st.sampled_from([Track.TYPE_VEHICLE, Track.TYPE_VEHICLE, Track.TYPE_PEDESTRIAN, Track.TYPE_CYCLIST])


@settings(max_examples=25, deadline=None)
@given(
    tracks=st.lists(
        st.tuples(_KINDS, st.integers(0, 30), st.integers(0, 90), st.floats(0.0, 12.0)),
        min_size=1,
        max_size=10,
    ),
    max_agents=st.integers(1, 4),
    max_replay=st.integers(0, 6),
)
def test_every_track_is_accounted_for(
    tracks: list[tuple[int, int, int, float]], max_agents: int, max_replay: int
) -> None:
    """Whatever the tracks (kind, first and last observed step, speed) and caps: every track is
    controlled, replayed, left out or history-only, each non-controlled one with a reason."""
    sc = make_scenario("prop", 1)  # the SDC keeps the scenario convertible
    for j, (kind, first, last, speed) in enumerate(tracks):
        sc.tracks.append(
            _track(400 + j, kind, _moving(3.0 * (j % 3) - 3.0, speed, valid=range(first, last + 1)), speed)
        )
    scene, report = scenario_to_scene(sc, max_agents=max_agents, max_replay=max_replay)
    c = scene.params["agents"]
    assert c["controlled"] + c["replayed"] + c["left_out"] + c["history_only"] == len(sc.tracks)
    assert sum(c["by_reason"].values()) == c["replayed"] + c["left_out"]
    assert 1 <= c["controlled"] <= max_agents and c["replayed"] <= max_replay
    assert scene.num_agents == c["controlled"] == report.controlled_agents
