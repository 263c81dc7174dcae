"""The layer contract (pyproject ``[tool.importlinter]``) holds on this tree, and breaks on a new import
that goes against the order: ``make lint`` would then fail (``lint-imports`` exits non-zero)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(src: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the repo's contracts over the package found in ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``src/scenefactory`` that a test may break (the tree itself is never touched)."""
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(
        ROOT / "src" / "scenefactory", src / "scenefactory", ignore=shutil.ignore_patterns("*.pt")
    )
    return src


def test_the_tree_keeps_every_contract(package_copy: Path, tmp_path: Path) -> None:
    result = _lint(package_copy, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "names"),
    [
        # a low layer reaching up: engines reading the trainer
        (
            "engines/kinematic.py",
            "import scenefactory.rl.ppo",
            "scenefactory.engines is not allowed to import scenefactory.rl",
        ),
        # the bottom reaching the CLI
        (
            "errors.py",
            "import scenefactory.cli",
            "scenefactory.errors is not allowed to import scenefactory.cli",
        ),
        # go1 reading the driving task
        (
            "go1/rewards.py",
            "import scenefactory.tasks.driving.rewards",
            "scenefactory.go1 is not allowed to import scenefactory.tasks",
        ),
    ],
)
def test_an_import_against_the_order_breaks_the_contract(
    package_copy: Path, tmp_path: Path, module: str, line: str, names: str
) -> None:
    broken = tmp_path / "src"
    shutil.copytree(package_copy, broken)
    path = broken / "scenefactory" / module
    path.write_text(path.read_text() + f"\n{line}  # noqa: E402\n")
    result = _lint(broken, tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert names in " ".join(result.stdout.split()), result.stdout[-3000:]
