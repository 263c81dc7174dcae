"""The documentation does what it says: the getting-started commands run as written (at test
sizes), the generated reference lists every flag of the parser, the results pages show every result
file with its command, seed and machine, and a docs build with the site's link validation fails on a
broken link. The full site build (``mkdocs build --strict``) is ``make docs``, part of ``make test``."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scenefactory.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "gen"))

import cli_reference  # noqa: E402
import results  # noqa: E402

SIZES = {"--worlds": "4", "--agents": "2", "--iterations": "2", "--episodes": "2", "--seconds": "1"}
"""Test sizes put in place of a page's (the flags stay the page's; only their numbers shrink)."""
EXTRA = {
    ("train", "drive"): ["--train-scenes", "3"],
    ("render", "drive"): ["--panels", "1"],
    ("eval", "go1"): ["--quick"],
}
"""Size flags a page leaves at their defaults (120 procedural scenes; four panels; 10 s episodes)."""


def page_commands(path: Path, task: str = "drive") -> list[list[str]]:
    """Every ``scenefactory train|eval|render TASK`` line of the page's ``bash`` blocks, split as a
    shell would (continuation lines joined, comments dropped)."""
    text = path.read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if (
                words[:1] == ["scenefactory"]
                and words[1:2] in (["train"], ["eval"], ["render"])
                and task in words
            ):
                out.append(words[1:])
    return out


def at_test_size(words: list[str]) -> list[str]:
    """The command with the numbers of :data:`SIZES` and the flags of :data:`EXTRA`."""
    out = [SIZES.get(words[i - 1], w) if i else w for i, w in enumerate(words)]
    return out + EXTRA.get((words[0], words[1]), [])


def test_pages_hold_the_drive_quick_start() -> None:
    """The README's quick start and the getting-started page hold the same train → eval → render
    sequence, so the test below covers both."""
    readme = page_commands(ROOT / "README.md")
    page = page_commands(ROOT / "docs" / "getting-started.md")
    assert [w[:2] for w in page] == [["train", "drive"], ["eval", "drive"], ["render", "drive"]]
    assert readme == page


def test_readme_python_example_runs_as_written(one_torch_thread: None) -> None:
    """The README's Python snippet runs unchanged and steps the environment it builds."""
    (code,) = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), flags=re.S)
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert tuple(scope["result"].reward.shape) == (2, 4)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_getting_started_commands_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_torch_thread: None
) -> None:
    """Run the page's commands in order, in a fresh folder, with only their sizes shrunk: each exits
    0 and leaves the files the page says it writes."""
    monkeypatch.chdir(tmp_path)
    page = ROOT / "docs" / "getting-started.md"
    go1 = page_commands(page, "go1")
    assert [w[:2] for w in go1] == [["eval", "go1"], ["render", "go1"], ["eval", "go1"]]
    for words in [*page_commands(page), go1[0], go1[2]]:
        assert main(at_test_size(words)) == 0, words
    # render go1 is run end to end by tests/go1/test_go1_terrain.py (5 s of rendering): here its flags
    # are checked against the parser as written on the page
    build_parser().parse_args(at_test_size(go1[1]))
    run = tmp_path / "runs" / "first"
    assert (run / "checkpoints" / "latest.pt").is_file()
    for name in ("config.json", "history.json"):
        assert (run / name).is_file()
    metrics = json.loads((run / "eval" / "metrics.json").read_text())
    assert metrics["episodes"] > 0 and "goal_reach_rate_ci95" in metrics
    assert (run / "episodes.gif").stat().st_size > 0
    assert json.loads((tmp_path / "runs" / "go1_eval" / "metrics.json").read_text())
    rough = json.loads((tmp_path / "runs" / "go1_rough_eval" / "metrics.json").read_text())
    assert [r["kind"] for r in rough["terrain"]] == ["stairs_up", "stairs_up"]  # at 0.5 and 1.0 m/s


def documented_commands() -> list[tuple[str, list[str]]]:
    """Every ``scenefactory ...`` line (also after ``torchrun ... -m``) in the README's and the docs
    pages' ``bash`` blocks: ``(file, words after 'scenefactory')``."""
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                shell = any("$" in w for w in words)  # a loop's variable: not a line to parse alone
                if "scenefactory" in words and words[0] in ("scenefactory", "torchrun") and not shell:
                    out.append((path.relative_to(ROOT).as_posix(), words[words.index("scenefactory") + 1 :]))
    return out


def test_every_documented_command_line_parses(capsys: pytest.CaptureFixture[str]) -> None:
    """Each command a page shows uses flags the parser has, with values it accepts (the pages are
    checked against the code, not only the getting-started ones that run)."""
    commands = documented_commands()
    assert len(commands) > 30
    parser = build_parser()
    for where, words in commands:
        try:
            parser.parse_args(words)
        except SystemExit as e:  # --list-recipes prints and exits 0
            assert e.code == 0, (where, words)
        except Exception as e:
            raise AssertionError(f"{where}: scenefactory {' '.join(words)}: {e}") from e
    capsys.readouterr()


def _leaf_parsers() -> list[tuple[tuple[str, ...], object]]:
    return [(w, p) for w, p, _ in cli_reference.commands(build_parser())]


def test_cli_reference_lists_every_command_and_flag() -> None:
    """Every sub-command of the real parser has a section, and every one of its flags is in it."""
    page = cli_reference.page()
    leaves = _leaf_parsers()
    assert {" ".join(w) for w, _ in leaves} >= {
        "train drive",
        "eval go1",
        "convert",
        "experiment",
        "deploy go1",
    }
    for words, parser in leaves:
        start = page.index(f"{{#{cli_reference.slug(words)}}}")
        nxt = page.find("{#cli-", start + 1)
        section = page[start : nxt if nxt > 0 else None]
        for action in parser._actions:  # type: ignore[attr-defined]
            for option in action.option_strings:
                if action.help != "==SUPPRESS==" and option not in ("-h", "--help"):
                    assert f"`{option}`" in section, (words, option)


def test_results_pages_show_every_file_with_command_seed_and_machine(tmp_path: Path) -> None:
    """A result file the generator has never seen appears on the benchmarks page with its numbers
    and provenance; a record appears on the experiments page with its tables."""
    res = tmp_path / "benchmarks" / "results"
    (res / "experiments").mkdir(parents=True)
    (res / "wosac_new_metric.json").write_text(
        json.dumps(
            {
                "command": "scenefactory bench wosac --out x.json",
                "seed": 7,
                "realism": {"meta": 0.6123},
                "runs": {"real": {"casps": 1.5, "steps": 30}, "procedural": {"casps": 2.5, "steps": 30}},
                "machine": {"cpu_count": 16, "gpu": "H100"},
            }
        )
    )
    record = {
        "schema": results.RECORD_SCHEMA,
        "title": "A new experiment",
        "command": "scenefactory experiment x",
        "seed": "0-2",
        "machine": {"cpu_count": 2},
        "date": "2026-12-07",
        "source": "a test",
        "tables": [{"columns": ["a", "b"], "rows": [["1", "0.25 [0.1, 0.4]"]]}],
    }
    (res / "experiments" / "x.json").write_text(json.dumps(record))
    pages = results.pages(tmp_path)
    bench = pages["results/benchmarks.md"]
    assert "`scenefactory bench wosac --out x.json`" in bench and "**Seed**: 7" in bench
    assert "| realism.meta | 0.612 |" in bench and "16 CPU cores, H100" in bench
    # a dict of runs is one table, a row per run, the shared fields under it
    assert "|  | casps |" in bench and "| real | 1.500 |" in bench and "In every row: steps 30." in bench
    exp = pages["results/experiments.md"]
    assert "## A new experiment" in exp and "| 1 | 0.25 [0.1, 0.4] |" in exp


def test_a_record_without_its_command_is_refused(tmp_path: Path) -> None:
    """A figure without the command that made it is an error naming the file, not a silent gap."""
    res = tmp_path / "benchmarks" / "results"
    res.mkdir(parents=True)
    (res / "bad.json").write_text(json.dumps({"schema": results.RECORD_SCHEMA, "title": "t", "tables": []}))
    with pytest.raises(results.ResultFileError, match=r"bad\.json: result record without command"):
        results.pages(tmp_path)
    (res / "bad.json").write_text("{not json")
    with pytest.raises(results.ResultFileError, match=r"bad\.json: not valid JSON"):
        results.pages(tmp_path)


def test_a_model_card_without_tables_is_its_result_files(tmp_path: Path) -> None:
    """A policy's record may leave its tables to the result files that evaluate the file (their
    sections become the card's "Measured"); with neither, the build fails naming the record."""
    res = tmp_path / "benchmarks" / "results"
    (res / "experiments").mkdir(parents=True)
    (tmp_path / "p.pt").write_bytes(b"weights")
    card = {"schema": results.RECORD_SCHEMA, "title": "p", "policy": "p.pt", "command": "c", "seed": 0}
    card |= {"machine": {}, "date": "2026-12-07", "source": "s", "tables": []}
    (res / "experiments" / "p.json").write_text(json.dumps(card))
    with pytest.raises(
        results.ResultFileError, match=r"p\.json: no tables, and no result file evaluates p\.pt"
    ):
        results.pages(tmp_path)
    terrain = {"kind": "stairs_up", "level": 3, "parameter": "step_height_m", "parameter_value": 0.1}
    terrain |= {"speed_mps": 0.5, "episodes": 8, "traverse_m": 3.5, "successes": 7, "success_rate": 0.875}
    for k in ("success_rate", "fall_rate", "stall_rate", "lin_vel_error_mps"):
        terrain |= {k: terrain.get(k, 0.0), k.replace("_mps", "") + "_ci95": [0.0, 1.0]}
    evaluation = {"command": "eval go1", "checkpoint": "p.pt (shipped)", "seed": 0, "terrain": [terrain]}
    (res / "go1_p_eval.json").write_text(json.dumps(evaluation))
    pages = results.pages(tmp_path)
    text = pages["results/p.md"]
    assert "## Measured\n" in text and "Measured when it was made" not in text
    assert "| stairs_up | 3 | step_height_m 0.1 | 0.5 | 8 | 0.875 [0.000, 1.000] |" in text
    assert "10 cm stairs up 0.875" in pages["results/index.md"]  # the headline, linked to its section


def test_the_shipped_policy_has_a_model_card_with_its_recipe_and_hash() -> None:
    """Every shipped policy file has a model card, and the card's SHA-256 is the file's."""
    pages = results.pages(ROOT)
    policies = sorted((ROOT / results.POLICIES_DIR).glob("*.pt"))
    assert policies
    for policy in policies:
        card = pages.get(f"results/{policy.stem.replace('_', '-')}.md")
        assert card is not None, (
            f"{policy.name} has no model card (a record with 'policy' in benchmarks/results)"
        )
        assert results.sha256(policy) in card
    assert "--recipe whole-body" in pages["results/go1-whole-body.md"]


def test_link_validation_fails_the_build_on_a_broken_link(tmp_path: Path) -> None:
    """The site's own ``validation`` settings, in strict mode, turn a link to a missing page into a
    failed build (and the same site without the broken link builds)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the page](page.md).\n")
    (docs / "page.md").write_text("# Page\n")
    site = {
        "site_name": "t",
        "strict": True,
        "validation": config["validation"],
        "nav": ["index.md", "page.md"],
    }
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(site))
    build = [sys.executable, "-m", "mkdocs", "build", "-f", str(tmp_path / "mkdocs.yml")]
    assert subprocess.run(build, capture_output=True, text=True).returncode == 0
    (docs / "index.md").write_text("# Home\n\nSee [the page](missing.md) and [an anchor](page.md#nowhere).\n")
    failed = subprocess.run(build, capture_output=True, text=True)
    assert failed.returncode != 0
    assert "missing.md" in failed.stderr and "nowhere" in failed.stderr
