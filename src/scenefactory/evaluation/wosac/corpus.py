"""A generated real-format WOMD corpus for WOSAC: city scenarios of ``scenes.womd.synthetic`` with WOMD's
make-up of logged traffic (``WOMD_MIX``: pedestrians, cyclists, parked vehicles, objects observed over
part of the log), written as one scenario shard. The project ships no Waymo data; this corpus is what
the baselines table and the official-code comparison are measured on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scenefactory.scenes.womd.synthetic import WOMD_MIX, city_scenario
from scenefactory.scenes.womd.tfrecord import write_records

ROAD_POINTS = (2000, 8000)
VEHICLES = (3, 32)
PARKED = 4


def write_wosac_corpus(folder: Path, count: int, seed: int = 0) -> Path:
    """Write ``count`` scenarios ``wosac-{seed}-{i:04d}`` to ``folder/synthetic.tfrecord-00000-of-00001``
    (the same for the same arguments); return the shard's path. Each draws its road-point target,
    moving-vehicle count and background from ``seed``; a map too small for its vehicles gets one
    fewer until they fit."""
    if count < 1:
        raise ValueError(f"write_wosac_corpus: need count >= 1, got {count}")
    rng = np.random.default_rng(seed)
    records = []
    for i in range(count):
        bg = WOMD_MIX.background(rng)
        vehicles = int(rng.integers(VEHICLES[0], VEHICLES[1] + 1))
        target = int(rng.integers(ROAD_POINTS[0], ROAD_POINTS[1] + 1))
        sub_seed = int(rng.integers(0, 2**31))
        while True:
            try:
                sc = city_scenario(f"wosac-{seed}-{i:04d}", sub_seed, target, vehicles, PARKED, background=bg)
                break
            except ValueError:
                if vehicles <= 1:
                    raise
                vehicles -= 1
        records.append(sc.SerializeToString())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "synthetic.tfrecord-00000-of-00001"
    write_records(path, records)
    return path
