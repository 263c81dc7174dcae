"""The committed form of a stage checkpoint (``checkpoint.pack_stage``): float16 weight matrices
as byte planes, the history as columns, the whole file LZMA-compressed; reading it back gives the
training form (float32 weights within float16 rounding, the history exactly), and a damaged or
hostile compressed file is one line naming it, never code run."""

from __future__ import annotations

import io
import lzma
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenefactory.checkpoint import CHECKPOINT_FORMAT, HALF_MIN_NUMEL, load_checkpoint, pack_stage
from scenefactory.errors import CheckpointError


class _Payload:
    """Unpickling this runs ``os.system`` (writes a marker file)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _stage() -> dict[str, Any]:
    gen = torch.Generator().manual_seed(0)
    actor = {
        "mlp.0.weight": 0.1 * torch.randn(64, 40, generator=gen),  # 2,560 values: float16
        "mlp.0.bias": torch.randn(64, generator=gen),  # small: stays float32
        "obs_normalizer._mean": torch.randn(1, 2048, generator=gen),  # statistics: stay float32
        "obs_normalizer.count": torch.tensor(7),
    }
    critic = {"mlp.0.weight": torch.randn(32, 64, generator=gen), "mlp.0.bias": torch.zeros(32)}
    history = [{"iteration": i + 1, "mean_return": math.nan if i == 0 else 0.1 * i, "n": i} for i in range(5)]
    return {
        "format": CHECKPOINT_FORMAT,
        "stage_checkpoint": True,
        "iteration": 5,
        "actor_state_dict": actor,
        "critic_state_dict": critic,
        "history": history,
    }


def test_a_packed_stage_reads_back_in_training_form(tmp_path: Path) -> None:
    stage = _stage()
    path = tmp_path / "stage.pt"
    path.write_bytes(pack_stage(stage))
    back = load_checkpoint(path)
    assert "half_precision" not in back and back["iteration"] == 5
    for net in ("actor_state_dict", "critic_state_dict"):
        saved: dict[str, torch.Tensor] = stage[net]
        assert set(back[net]) == set(saved)
        for name, value in saved.items():
            half = value.numel() >= HALF_MIN_NUMEL and "normalizer" not in name
            want = value.half().float() if half else value
            assert back[net][name].dtype == value.dtype and torch.equal(back[net][name], want), name
    assert not torch.equal(
        back["actor_state_dict"]["mlp.0.weight"], stage["actor_state_dict"]["mlp.0.weight"]
    )
    rows = back["history"]
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5] and math.isnan(rows[0]["mean_return"])
    assert rows[1:] == stage["history"][1:] and all(type(r["n"]) is int for r in rows)


def test_rows_with_differing_keys_are_kept_as_rows(tmp_path: Path) -> None:
    stage = {**_stage(), "history": [{"a": 1.0}, {"a": 2.0, "b": 3}]}
    (tmp_path / "s.pt").write_bytes(pack_stage(stage))
    assert load_checkpoint(tmp_path / "s.pt")["history"] == stage["history"]


def test_a_truncated_stage_is_one_line_naming_it(tmp_path: Path) -> None:
    blob = pack_stage(_stage())
    path = tmp_path / "cut.pt"
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(CheckpointError, match="truncated") as err:
        load_checkpoint(path)
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)


def test_a_compressed_hostile_file_is_refused_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, "stage_checkpoint": True, "evil": _Payload(marker)}, buf)
    path = tmp_path / "evil.pt"
    path.write_bytes(lzma.compress(buf.getvalue()))
    with pytest.raises(CheckpointError, match="refused to load"):
        load_checkpoint(path)
    assert not marker.exists()


def _edited(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A packed stage file with ``edit`` applied to its stored (still packed) contents."""
    packed = torch.load(io.BytesIO(lzma.decompress(pack_stage(_stage()))), weights_only=True)
    edit(packed)
    buf = io.BytesIO()
    torch.save(packed, buf)
    path = tmp_path / "edited.pt"
    path.write_bytes(lzma.compress(buf.getvalue()))
    return path


def test_a_hand_edited_half_entry_names_the_field(tmp_path: Path) -> None:
    def edit(packed: dict[str, Any]) -> None:
        packed["half_precision"]["actor_state_dict/mlp.0.weight"] = [64, 41]  # the planes hold 64 x 40

    path = _edited(tmp_path, edit)
    with pytest.raises(CheckpointError, match=r"'actor_state_dict/mlp.0.weight' is not the float16 planes"):
        load_checkpoint(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.integers(min_value=0), bit=st.integers(min_value=0, max_value=7))
def test_a_flipped_bit_loads_or_is_a_checkpoint_error(tmp_path: Path, at: int, bit: int) -> None:
    """LZMA's check catches a damaged file: any flipped bit reads back or is a CheckpointError."""
    blob = bytearray(pack_stage(_stage()))
    blob[at % len(blob)] ^= 1 << bit
    path = tmp_path / "flipped.pt"
    path.write_bytes(bytes(blob))
    try:
        load_checkpoint(path)
    except CheckpointError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)


@pytest.mark.parametrize("columns", [None, {"a": [1.0], "b": 2.0}, {"a": [1.0], "b": [1.0, 2.0]}])
def test_hand_edited_history_columns_name_the_field(tmp_path: Path, columns: Any) -> None:
    path = _edited(tmp_path, lambda packed: packed.update(history={"columns": columns}))
    with pytest.raises(CheckpointError, match=r"'history.columns' is not lists of one length"):
        load_checkpoint(path)
