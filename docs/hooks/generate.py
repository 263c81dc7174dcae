"""MkDocs hook: add the generated pages (the command-line reference and the results pages) to the
site at build time, from the code and from ``benchmarks/results/``. No file is written into
``docs/``: the pages exist only in the build, so they can never be stale in git."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "gen"))
sys.path.insert(0, str(ROOT / "src"))

import cli_reference  # noqa: E402
import results  # noqa: E402


def from_repository_root(name: str) -> str:
    """A Markdown file of the repository's root as a page of the site: its links into ``docs/``
    rewritten to be relative to the site (``docs/concepts/layers.md`` → ``concepts/layers.md``)."""
    text = (ROOT / name).read_text(encoding="utf-8")
    return f"<!-- {name} of the repository, copied at build time: edit that file. -->\n" + text.replace(
        "](docs/", "]("
    )


def generated_pages() -> dict[str, str]:
    """``{page path under docs/: markdown}`` of every generated page."""
    return {
        "reference/cli.md": cli_reference.page(),
        **results.pages(ROOT),
        "contributing.md": from_repository_root("CONTRIBUTING.md"),
        "changelog.md": from_repository_root("CHANGELOG.md"),
    }


def on_files(files: Files, config) -> Files:  # type: ignore[no-untyped-def]
    """Add each generated page as a file of the build (replacing none: a hand-written page of the same
    path is an error, so the two cannot drift apart)."""
    for path, text in generated_pages().items():
        if files.get_file_from_path(path) is not None:
            raise ValueError(
                f"docs/{path} is generated at build time (docs/hooks/generate.py): delete the file"
            )
        files.append(File.generated(config, path, content=text))
    return files


SPHINX_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):<code>(~?)([^<]*)</code>")
"""A Sphinx role left in a docstring, as mkdocstrings renders it: ``:class:<code>~a.b.C</code>``."""


def on_page_content(html: str, page, config, files) -> str:  # type: ignore[no-untyped-def]
    """The code's docstrings cross-reference in Sphinx's roles (``:class:`~a.b.C```), which
    mkdocstrings leaves as text: show the name alone, as Sphinx would (``~`` keeps its last part)."""
    return SPHINX_ROLE.sub(
        lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>", html
    )
