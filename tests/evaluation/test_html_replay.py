"""The HTML replay's data, without a browser (``test_browser.py`` opens the page itself).

What is pinned, and why:

- a recording keeps, per step and agent, TTC, DRAC, the reward and its terms, and they are the
  environment's: the reward is Σ weight · term over the task's terms, a car closing on a slower one
  ahead has a finite TTC that falls as the gap closes and a positive DRAC, and step 0 (the spawn) has
  none — the agent panel shows these figures;
- the page's data decodes back (delta-encoded centimetres, milliradians) to the recorded poses within
  the quantization, logged objects too, and holds the statuses, TTC (∞ kept apart from "none") and
  the terms;
- the file stands alone: no URL to fetch anything from, the data gzipped and inlined once;
- a baseline of another scene, or a bad ``--format``/``--panels``/``--out``, is refused with a
  message that names it.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import re

import numpy as np
import pytest
import torch

from scene_fixtures import straight_scene
from scenefactory.cli.main import main
from scenefactory.evaluation.html_replay import DATA_MARK, replay_payload, write_html_replay
from scenefactory.evaluation.record import EpisodeRecord
from scenefactory.evaluation.rollout import record_episodes
from scenefactory.scenes.scene import ReplayLog, Scene
from scenefactory.tasks.driving.config import DrivingTaskConfig
from scenefactory.tasks.driving.status import AgentStatus

STEPS = 25


def chase_scene() -> Scene:
    """A fast car 20 m behind a slow one in the eastbound lane, a car westbound, a pedestrian
    walking along the kerb (a logged object)."""
    from dataclasses import replace

    sc = straight_scene(
        [(10.0, 0.0, 0.0, 10.0), (30.0, 0.0, 0.0, 2.0), (90.0, 3.5, math.pi, 6.0)], goal_s=60.0
    )
    t = np.arange(40)
    xy = np.stack([20.0 + 1.2 * 0.1 * t, np.full(40, -3.0)], axis=1)[None]
    ped = ReplayLog(
        xy=xy,
        yaw=np.zeros((1, 40)),
        vel_xy=np.tile([1.2, 0.0], (1, 40, 1)),
        valid=np.ones((1, 40), dtype=bool),
        length_m=np.array([0.6]),
        width_m=np.array([0.6]),
        kind=np.array([2]),
    )
    return replace(sc, name="chase", replay=ped)


def coast(obs: torch.Tensor) -> torch.Tensor:
    """Zero actions: keep speed and heading."""
    return torch.zeros(*obs.shape[:2], 2)


@pytest.fixture(scope="module")
def recorded() -> EpisodeRecord:
    task = DrivingTaskConfig(agents_per_world=3, episode_length_s=STEPS * 0.1)
    (rec,) = record_episodes(coast, task, [chase_scene()])
    return rec


def test_recording_keeps_ttc_drac_and_reward_terms(recorded: EpisodeRecord) -> None:
    rec = recorded
    t, k = rec.pos_xy.shape[:2]
    assert rec.ttc_s is not None and rec.drac_mps2 is not None and rec.reward is not None
    assert rec.reward_terms is not None
    for a in (rec.ttc_s, rec.drac_mps2, rec.reward, *rec.reward_terms.values()):
        assert a.shape == (t, k)
        assert np.isnan(a[0]).all()  # the spawn: no step has ended yet
    weights = {term.name: term.weight for term in DrivingTaskConfig().rewards}
    assert set(rec.reward_terms) == set(weights)
    total = sum(weights[n] * rec.reward_terms[n] for n in weights)
    live = ~np.isnan(rec.reward)
    end = np.flatnonzero(rec.status[:, 0] == int(AgentStatus.COLLISION))  # a rear-end collision
    assert len(end) and live[1 : end[0] + 1, 0].all() and not live[end[0] + 1 :, 0].any()
    np.testing.assert_allclose(total[live], rec.reward[live], atol=1e-5)
    # the chaser closes 8 m/s on the slow car 20 m ahead: TTC finite and falling, DRAC positive
    chaser = rec.ttc_s[1:6, 0]
    assert np.isfinite(chaser).all() and (np.diff(chaser) < 0).all()
    assert 0.5 < chaser[0] < 3.0
    assert (rec.drac_mps2[1:6, 0] > 0.5).all()
    # the westbound car has nothing ahead in its lane: no TTC within the horizon
    assert np.isinf(rec.ttc_s[1:6, 2]).all()
    assert rec.reward_terms["collision"][end[0], 0] != 0  # the step it hit has the collision term


def _undelta(d: list[int], n: int, start: int = 0) -> np.ndarray:
    return np.cumsum(np.asarray(d[start : start + n], dtype=np.int64))


def test_payload_decodes_to_the_recording(recorded: EpisodeRecord) -> None:
    rec = recorded
    p = replay_payload([rec], title="chase")
    (w,) = p["worlds"]
    origin = np.asarray(w["origin_m"])
    a = w["agents"]
    t = rec.num_steps
    assert w["steps"] == t and a["slot"] == [0, 1, 2]
    for j in range(3):
        x = _undelta(a["x"], t, j * t) / 100 + origin[0]
        y = _undelta(a["y"], t, j * t) / 100 + origin[1]
        yaw = _undelta(a["yaw"], t, j * t) / 1000
        np.testing.assert_allclose(x, rec.pos_xy[:, j, 0], atol=0.006)
        np.testing.assert_allclose(y, rec.pos_xy[:, j, 1], atol=0.006)
        np.testing.assert_allclose(np.cos(yaw), np.cos(rec.yaw[:, j]), atol=2e-3)
        assert a["status"][j] == "".join(str(int(s)) for s in rec.status[:, j])
    assert rec.ttc_s is not None
    ttc = a["ttc"][2 * t : 3 * t]  # the westbound car: none at step 0, then never within the horizon
    assert ttc[0] is None and set(ttc[1:6]) == {-1}
    assert a["ttc"][1] == round(float(rec.ttc_s[1, 0]) * 100)
    assert set(a["terms"]) == set(rec.reward_terms or {})
    # the pedestrian, decoded at step 10
    o = w["objects"]
    assert o["kind"] == ["pedestrian"] and o["t0"] == [0] and o["n"] == [t] and o["gap"] == [""]
    px = _undelta(o["x"], t)[10] / 100 + origin[0]
    assert px == pytest.approx(20.0 + 1.2, abs=0.01)
    lanes = w["map"]["lanes"]
    assert lanes["n"] == [61, 61] and w["map"]["lane_width"] == [350, 350]


def test_written_page_stands_alone(recorded: EpisodeRecord, tmp_path) -> None:
    path = write_html_replay(
        [recorded, recorded], tmp_path / "r" / "episodes.html", baseline=[recorded, None]
    )
    html = path.read_text()
    assert DATA_MARK not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # nothing fetched from anywhere
    assert "http://" not in html and "https://" not in html
    blob = re.search(r'<script id="replay-data" type="application/octet-stream">([^<]*)</script>', html)
    assert blob is not None
    data = json.loads(gzip.decompress(base64.b64decode(blob.group(1))))
    assert [w["title"] for w in data["worlds"]] == ["chase", "chase"]
    assert data["worlds"][0]["baseline"] is not None and data["worlds"][1]["baseline"] is None
    assert path.stat().st_size < 40_000  # a 120 m road, 3 cars, 25 steps, twice
    assert path.stat().st_mode & 0o044  # readable beyond its owner, like any page one shares


def test_refuses_what_it_cannot_show(recorded: EpisodeRecord, tmp_path) -> None:
    from dataclasses import replace

    other = replace(recorded, scene=replace(recorded.scene, name="elsewhere"))
    with pytest.raises(ValueError, match="baseline of world 'chase' plays scene 'elsewhere'"):
        replay_payload([recorded], baseline=[other])
    with pytest.raises(ValueError, match="1 baseline entries for 2 episodes"):
        replay_payload([recorded, recorded], baseline=[None])
    with pytest.raises(ValueError, match="expected 1 to 64 episodes"):
        replay_payload([])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--format", "gif", "--panels", "6", "--out", "v.gif"], "--panels must be between 1 and 4"),
        (["--format", "html", "--out", "v.gif"], "expected a .html file"),
        (["--format", "both", "--out", "v.html"], "expected a .gif file"),
    ],
)
def test_render_flags_refused(extra: list[str], message: str, tmp_path, capsys) -> None:
    extra = [str(tmp_path / e) if e.startswith("v.") else e for e in extra]
    assert main(["render", "drive", "--checkpoint", str(tmp_path / "none.pt"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_signal_states_follow_the_steps(recorded: EpisodeRecord) -> None:
    from dataclasses import replace

    from scenefactory.scenes.scene import SignalLog, SignalState

    states = np.array(
        [[SignalState.GO, SignalState.STOP]] * 10 + [[SignalState.CAUTION, SignalState.UNKNOWN]] * 5
    )
    sig = SignalLog(stop_xy=np.array([[40.0, 0.0], [60.0, 3.5]]), lane=np.array([0, 1]), state=states)
    rec = replace(recorded, scene=replace(recorded.scene, signals=sig))
    s = replay_payload([rec])["worlds"][0]["signals"]
    assert s["xy"]["n"] == [1, 1]
    assert s["state"][0] == "gr" and s["state"][9] == "gr" and s["state"][10] == "yu"
    assert s["state"][15:] == ["uu"] * (rec.num_steps - 15)  # past the end of a log: unknown
