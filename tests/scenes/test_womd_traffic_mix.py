"""The synthetic corpus's logged traffic has WOMD's make-up (``scenes.womd.synthetic``, module
docstring, *Background traffic*): the target figures stated there, checked on written files, and a
background that leaves the map and the moving vehicles as they were."""

from __future__ import annotations

import numpy as np
import pytest

from scenefactory.scenes.womd.convert import scenario_to_scene
from scenefactory.scenes.womd.reader import iter_scenarios
from scenefactory.scenes.womd.synthetic import WOMD_MIX, Background, city_scenario, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list:
    out = tmp_path_factory.mktemp("mix")
    shards = write_corpus(out, 10, seed=11, road_points=(2000, 4000), mix=WOMD_MIX, workers=1)
    return [sc for p in shards for _, _, sc in iter_scenarios(p)]


def _tracks(sc) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    kind = np.array([tr.object_type for tr in sc.tracks])
    valid = np.array([[s.valid for s in tr.states] for tr in sc.tracks], dtype=bool)
    xy = np.array([[[s.center_x, s.center_y] for s in tr.states] for tr in sc.tracks])
    return kind, valid, xy


def test_the_corpus_has_womds_make_up(corpus: list) -> None:
    kinds, observed, parked_share, partial = [], [], [], []
    for sc in corpus:
        kind, valid, xy = _tracks(sc)
        assert 20 <= len(kind) <= 128
        assert set(kind.tolist()) <= {1, 2, 3}
        kinds.append(np.bincount(kind, minlength=4)[1:])
        per_step = valid.sum(axis=0)
        observed.append(per_step.mean())
        first = xy[np.arange(len(kind)), valid.argmax(axis=1)]
        moved = np.where(valid, np.linalg.norm(xy - first[:, None], axis=-1), 0.0).max(axis=1)
        parked_share.append(((kind == 1) & (moved < 1.0)).sum() / (kind == 1).sum())
        partial.append((~valid.all(axis=1)).mean())
        assert valid[0, :].all()  # the SDC is observed throughout
        inval = sc.tracks[int(np.flatnonzero(~valid.all(axis=1))[0])].states
        bad = next(s for s in inval if not s.valid)
        assert bad.center_x == -1.0 and bad.length == -1.0  # unobserved states carry -1, as WOMD's
    share = np.sum(kinds, axis=0) / np.sum(kinds)
    assert 0.45 <= share[0] <= 0.85 and 0.10 <= share[1] <= 0.45 and 0.01 <= share[2] <= 0.10, share
    assert all(8 <= o <= 60 for o in observed) and 20 <= np.mean(observed) <= 45, observed
    assert 0.25 <= np.mean(parked_share) <= 0.75, parked_share
    assert np.mean(partial) >= 0.5, partial


def test_convert_replays_the_background_with_its_kinds(corpus: list) -> None:
    scene, report = scenario_to_scene(corpus[0])
    rep = scene.replay
    assert rep is not None and report.replayed_objects == rep.num_objects
    kinds = set(rep.kind.tolist())
    assert {1, 2} <= kinds or {1, 3} <= kinds
    assert (~rep.valid[:, 0]).any()  # some appear later


def test_the_background_leaves_the_map_and_moving_vehicles_unchanged() -> None:
    plain = city_scenario("x", 3, 1500, 5, 1)
    busy = city_scenario("x", 3, 1500, 5, 1, background=Background(pedestrians=6, cyclists=2, extra_parked=4))
    assert [f.SerializeToString() for f in plain.map_features] == [
        f.SerializeToString() for f in busy.map_features
    ]
    for a, b in zip(plain.tracks[:5], busy.tracks[:5], strict=True):
        assert a.SerializeToString() == b.SerializeToString()  # no occlusion asked: every state valid
    again = city_scenario(
        "x", 3, 1500, 5, 1, background=Background(pedestrians=6, cyclists=2, extra_parked=4)
    )
    assert again.SerializeToString() == busy.SerializeToString()
    kind = [tr.object_type for tr in busy.tracks]
    assert kind.count(2) == 6 and kind.count(3) == 2 and kind.count(1) >= 6
    with pytest.raises(ValueError, match="occluded_share"):
        Background(occluded_share=1.5)
