"""WOSAC realism metrics (``scenefactory.evaluation.wosac``): the features pinned on cases worked out by
hand, the estimators on counts done by hand, and the meta-metric's ordering on generated real-format
scenarios (the log scores high, random driving low). The agreement with the official TensorFlow code is
checked by ``benchmarks/wosac_official.py`` (it needs TensorFlow 2.13, so it is not part of the suite).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from scenefactory.cli.main import run
from scenefactory.errors import UserError
from scenefactory.evaluation.wosac import geometry
from scenefactory.evaluation.wosac.benchmark import WosacJob, run_wosac, score_scenario
from scenefactory.evaluation.wosac.config import CHALLENGE_2025, FEATURES
from scenefactory.evaluation.wosac.estimators import feature_log_likelihood, histogram_log_likelihood
from scenefactory.evaluation.wosac.features import (
    distance_to_nearest_object,
    kinematic_features,
    time_to_collision,
)
from scenefactory.evaluation.wosac.scenario import wosac_scenario
from scenefactory.scenes.womd.synthetic import Background, city_scenario
from scenefactory.scenes.womd.tfrecord import write_records
from scenefactory.tasks.driving.idm import IdmParams, idm_acceleration, leader_on_path


def _boxes(
    rows: list[list[tuple[float, float, float]]], length: float = 4.0, width: float = 2.0
) -> torch.Tensor:
    """(1, N, T, 7) boxes from per-object lists of (x, y, heading)."""
    out = torch.zeros(1, len(rows), len(rows[0]), 7)
    for i, row in enumerate(rows):
        for t, (x, y, h) in enumerate(row):
            out[0, i, t] = torch.tensor([x, y, 0.75, h, length, width, 1.5])
    return out


def test_acceleration_of_a_known_speed_profile() -> None:
    """x = a t^2 / 2 with a = 2 m/s^2: central differences give speed a t and acceleration a exactly
    inside the series, NaN at the ends (one step for speeds, two for accelerations)."""
    t = torch.arange(11, dtype=torch.float64) * 0.1
    x = 0.5 * 2.0 * t**2
    zero = torch.zeros_like(x)
    speed, accel, ang_speed, _ = kinematic_features(x, zero, zero, zero)
    torch.testing.assert_close(speed[1:-1], 2.0 * t[1:-1])
    torch.testing.assert_close(accel[2:-2], torch.full((7,), 2.0, dtype=torch.float64))
    assert math.isnan(speed[0]) and math.isnan(speed[-1]) and torch.isnan(accel[[0, 1, -2, -1]]).all()
    assert float(ang_speed[1:-1].abs().max()) == 0.0


def test_angular_speed_wraps_across_pi() -> None:
    """Heading 3.1 -> -3.1 rad is a 0.083 rad turn (wrapped), not -6.2 rad."""
    h = torch.tensor([3.1, -3.1, -3.0])
    zero = torch.zeros(3)
    dh = kinematic_features(zero, zero, zero, h)[2]
    assert float(dh[1]) == pytest.approx((2 * math.pi - 6.1) / 2 / 0.1, rel=1e-5)


def test_time_to_collision_following_and_head_on() -> None:
    """A 4 m car at 10 m/s behind one at 5 m/s with 20 m between bumpers: TTC = 20 / (10 - 5) = 4 s.
    The same two boxes head-on are not "following" (heading difference 180 deg > 75 deg): 5 s, the
    maximum, however fast they close."""
    steps = 5
    ego = [(10.0 * 0.1 * k, 0.0, 0.0) for k in range(steps)]
    lead = [(24.0 + 5.0 * 0.1 * k, 0.0, 0.0) for k in range(steps)]
    ttc = time_to_collision(_boxes([ego, lead]), torch.ones(1, 2, steps, dtype=torch.bool), num_eval=1)
    # step 2: ego at 2 m, lead at 25 m: 25 - 2 - 2 - 2 = 19 m closing at 5 m/s
    assert float(ttc[0, 0, 2]) == pytest.approx(19.0 / 5.0, rel=1e-5)
    oncoming = [(24.0 - 10.0 * 0.1 * k, 0.0, math.pi) for k in range(steps)]
    ttc = time_to_collision(_boxes([ego, oncoming]), torch.ones(1, 2, steps, dtype=torch.bool), num_eval=1)
    assert torch.all(ttc == 5.0)


def test_distance_to_nearest_object_and_collision() -> None:
    """Two 4 x 2 m boxes in line, centres 10 m apart: 6 m between them (the rounded corners do not
    touch the faces). Overlapping by 1 m: -1 m. An invalid object is not seen."""
    a = _boxes([[(0.0, 0.0, 0.0)], [(10.0, 0.0, 0.0)], [(3.0, 30.0, 0.0)]])
    valid = torch.ones(1, 3, 1, dtype=torch.bool)
    d = distance_to_nearest_object(a, valid, num_eval=2)
    assert d[0, :, 0].tolist() == pytest.approx([6.0, 6.0], abs=1e-5)
    b = _boxes([[(0.0, 0.0, 0.0)], [(3.0, 0.0, 0.0)]])
    assert float(distance_to_nearest_object(b, torch.ones(1, 2, 1, dtype=torch.bool), 1)) == pytest.approx(
        -1.0
    )
    valid[0, 1] = False  # the third box: its rounded corner is nearest (cores 2.6 x 0.6 m, rounding 0.7 m)
    expected = math.hypot(3.0 - 2.6, 30.0 - 0.6) - 1.4
    assert float(distance_to_nearest_object(a, valid, 1)[0, 0, 0]) == pytest.approx(expected, abs=1e-4)


def test_box_over_the_road_edge_signed_distance() -> None:
    """A road edge along +x has the road on its left (port side). A 4 x 2 m box centred 0.5 m left of
    it has its right corners 0.5 m over the edge: +0.5 m (off-road); centred 3 m left: -2 m."""
    edge = torch.tensor([[[0.0, 0.0, 0.0, 1.0], [50.0, 0.0, 0.0, 1.0], [100.0, 0.0, 0.0, 1.0]]])
    seg = geometry.road_edge_segments(edge, torch.tensor([False]))
    for y, expected in ((0.5, 0.5), (3.0, -2.0), (-5.0, 6.0)):
        corners = geometry.box_corners_xy(
            torch.tensor(40.0), torch.tensor(y), torch.tensor(4.0), torch.tensor(2.0), torch.tensor(0.0)
        )
        pts = torch.cat([corners, torch.zeros(4, 1)], dim=-1)
        d = geometry.polyline_signed_distance(pts, seg, 3.0)
        assert float(d.max()) == pytest.approx(expected, abs=1e-5)


def test_histogram_likelihood_by_hand() -> None:
    """Simulated 0.5, 0.5, 3.0 in 4 bins over [0, 4] with pseudocount 0.1: probabilities
    (2.1, 0.1, 0.1, 1.1) / 3.4. A logged 0.7 scores log(2.1/3.4); 9 (clipped to 4, the last bin)
    and NaN (the last bin, as tfp.stats.histogram puts it) log(1.1/3.4); -1 (clipped) bin 0."""
    sim = torch.tensor([[0.5, 0.5, 3.0]])
    log = torch.tensor([[0.7, 9.0, math.nan, -1.0, 1.5]])
    ll = histogram_log_likelihood(log, sim, 0.0, 4.0, 4, 0.1)
    expected = [
        math.log(2.1 / 3.4),
        math.log(1.1 / 3.4),
        math.log(1.1 / 3.4),
        math.log(2.1 / 3.4),
        math.log(0.1 / 3.4),
    ]
    assert ll[0].tolist() == pytest.approx(expected, rel=1e-6)


def test_bernoulli_any_event_pseudocount() -> None:
    """An object colliding in 1 of 4 rollouts; the log collides: p = (1 + 0.001) / (4 + 0.002)."""
    sim = torch.tensor([[True], [False], [False], [False]])
    ll = feature_log_likelihood(CHALLENGE_2025.collision_indication, torch.tensor([True]), sim)
    assert float(ll[0]) == pytest.approx(math.log(1.001 / 4.002), rel=1e-6)


def test_config_weights_are_the_2025_ones() -> None:
    """The ten weights sum to 1 (collision and off-road 0.25 each, traffic lights 0.05)."""
    assert sum(CHALLENGE_2025.feature(n).weight for n in FEATURES) == pytest.approx(1.0)
    assert CHALLENGE_2025.traffic_light_violation.weight == 0.05


def test_idm_by_hand() -> None:
    """At its desired speed with nobody ahead an IDM car keeps its speed; 22 m behind a car at the same
    10 m/s (s* = 2 + 10 * 2 = 22 m) it brakes at a_max = 2 m/s^2. A leader straight ahead on the path
    is found at the first probe its box overlaps."""
    p = IdmParams()
    v = torch.tensor([10.0, 10.0])
    a = idm_acceleration(v, v, torch.tensor([math.inf, 22.0]), torch.tensor([0.0, 10.0]), p)
    assert a.tolist() == pytest.approx([0.0, -2.0], abs=1e-6)
    probes = torch.arange(1, 11, dtype=torch.float32)
    xy = torch.stack([probes, torch.zeros(10)], dim=-1)[None]
    gap, lead_v = leader_on_path(
        xy,
        torch.zeros(1, 10),
        probes[None],
        torch.tensor([4.0]),
        torch.tensor([2.0]),
        torch.tensor([[9.0, 0.0]]),
        torch.tensor([0.0]),
        torch.tensor([4.0]),
        torch.tensor([2.0]),
        torch.tensor([3.0]),
        torch.tensor([True]),
    )
    assert float(gap[0]) == 6.0 and float(lead_v[0]) == 3.0  # boxes touch once the centre is < 4 m from 9


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two generated real-format scenarios with pedestrians, cyclists, parked and occluded objects."""
    folder = tmp_path_factory.mktemp("wosac")
    bg = Background(pedestrians=4, cyclists=2, extra_parked=4, occluded_share=0.5)
    recs = [
        city_scenario(f"wosac-test-{k}", 11 + k, 2500, 6, 2, background=bg).SerializeToString()
        for k in range(2)
    ]
    write_records(folder / "synthetic.tfrecord-00000-of-00001", recs)
    return folder


@pytest.mark.slow
def test_log_replay_scores_high_and_random_low(scenes: Path) -> None:
    """On generated scenes the logged future (the challenge's oracle) scores far above random driving;
    constant velocity sits between; every object valid at the current step is simulated."""
    from scenefactory.evaluation.wosac.benchmark import iter_wosac_scenarios

    _, scn = next(iter_wosac_scenarios(scenes, 1))
    assert scn.num_objects >= 8 and scn.num_eval >= 1
    g = torch.Generator().manual_seed(0)
    meta = {p: score_scenario(scn, p, 4, g)[0]["metametric"] for p in ("log", "constant_velocity", "random")}
    assert meta["log"] > 0.8
    assert meta["random"] < meta["log"] - 0.25
    assert meta["random"] < meta["constant_velocity"] < meta["log"]


@pytest.mark.slow
def test_benchmark_cli_writes_metrics(scenes: Path, tmp_path: Path) -> None:
    """``scenefactory benchmark wosac`` writes metrics.json with the aggregate, buckets, per-scene
    figures and the published table, and report.md."""
    out = tmp_path / "out"
    assert (
        run(
            [
                "benchmark",
                "wosac",
                "--scenes",
                str(scenes),
                "--policy",
                "idm",
                "--rollouts",
                "4",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    m = json.loads((out / "metrics.json").read_text())
    assert m["scenarios"] == 2 and len(m["per_scene"]) == 2
    assert 0.0 < m["buckets"]["realism_meta_metric"] <= 1.0
    assert {p["name"] for p in m["published"]} >= {"logged oracle", "random"}
    assert "realism meta-metric" in (out / "report.md").read_text()


def test_every_valid_object_is_simulated_beyond_128() -> None:
    """WOSAC simulates every track valid at the current step: 150 of them (the converter keeps 128),
    the SDC and tracks to predict first, sorted by id."""
    sc = city_scenario("many", 5, 2000, 4, 0)
    base = list(sc.tracks)
    next_id = max(t.id for t in base) + 1
    while len(sc.tracks) < 150:
        t = sc.tracks.add()
        t.CopyFrom(base[len(sc.tracks) % len(base)])
        t.id = next_id
        next_id += 1
        for st in t.states:
            st.center_x += 1000.0 + 10.0 * next_id
    scn = wosac_scenario(sc)
    assert scn.num_objects == 150
    evaluated = scn.object_id[: scn.num_eval].tolist()
    assert evaluated == sorted(evaluated) and sc.tracks[sc.sdc_track_index].id in evaluated


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    """A folder without scenario shards and an unknown policy are refused with what was expected."""
    with pytest.raises(UserError, match="tfrecord"):
        run_wosac(WosacJob(scenes=tmp_path, policy="log", out=tmp_path / "o"), "test")
    with pytest.raises(UserError, match="unknown --policy"):
        WosacJob(scenes=tmp_path, policy="teleport", out=tmp_path)
    sc = city_scenario("no-edges", 3, 2000, 3, 0)
    for f in [f for f in sc.map_features if f.WhichOneof("feature_data") == "road_edge"]:
        sc.map_features.remove(f)
    with pytest.raises(UserError, match="road edge"):
        wosac_scenario(sc)
