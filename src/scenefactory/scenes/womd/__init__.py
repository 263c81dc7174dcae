"""Waymo Open Motion Dataset (WOMD) scenario files, read locally without TensorFlow.

- ``tfrecord``: TFRecord framing (streaming CRC-checked readers — one stops at a fault, one reports
  it and reads on — and an atomic writer).
- ``scenario_pb2``: generated from our own ``scenario.proto`` (WOMD field numbers); regenerate with
  ``make proto``.
- ``reader``: ``iter_scenarios`` over a shard, ``scenario_summary``.

The project ships no WOMD data (its licence forbids redistribution); tests write their own files.
"""

from __future__ import annotations

from scenefactory.scenes.womd.reader import ScenarioSummary, iter_scenarios, parse_scenario, scenario_summary
from scenefactory.scenes.womd.scenario_pb2 import MapFeature, Scenario, Track
from scenefactory.scenes.womd.tfrecord import (
    CorruptRecordError,
    Record,
    RecordFault,
    iter_records,
    masked_crc32c,
    scan_records,
    write_records,
)

__all__ = [
    "CorruptRecordError",
    "MapFeature",
    "Record",
    "RecordFault",
    "Scenario",
    "ScenarioSummary",
    "Track",
    "iter_records",
    "iter_scenarios",
    "masked_crc32c",
    "parse_scenario",
    "scan_records",
    "scenario_summary",
    "write_records",
]
