"""Every stage checkpoint committed under ``stages/`` is listed in ``stages/README.md`` with its
SHA-256, is at most 1 MB, and is a stage checkpoint that loads safely (``weights_only``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from scenefactory.checkpoint import load_checkpoint
from scenefactory.rl.checkpoints import MAX_STAGE_BYTES

STAGES = Path(__file__).resolve().parents[1] / "stages"
FILES = sorted(STAGES.rglob("*.pt")) if STAGES.is_dir() else []


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(STAGES)) for p in FILES])
def test_a_committed_stage_is_listed_with_its_hash(path: Path) -> None:
    manifest = (STAGES / "README.md").read_text()
    rel = str(path.relative_to(STAGES.parent))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert rel in manifest and digest in manifest, (rel, digest)
    assert path.stat().st_size <= MAX_STAGE_BYTES
    data = load_checkpoint(path)
    assert data["stage_checkpoint"] is True and "optimizer_state_dict" not in data
    assert isinstance(data["iteration"], int) and data["iteration"] > 0
