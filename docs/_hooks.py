"""MkDocs hooks: pages that are generated from the code or kept at the root, not written twice.

- `<!-- error-catalogue -->` on a page becomes the table of every error type, built
  from `tauopt.errors.CATALOGUE` itself, so the documented catalogue cannot drift
  from the one every door renders.
- `<!-- readme-walkthrough -->` becomes the README's five-minute walkthrough (its
  programs are run by the tests where they are written, in the README).
- The repository's root files that readers of the site need, BENCHMARKS.md (the
  maintainers' log of how each figure was reached) and CHANGELOG.md, become the
  pages `benchmarks/log.md` and `changelog.md`; the plots under `benchmarks/`
  are served as `img/<name>.png`.
- `OperationDocstrings`, a griffe extension (mkdocs.yml), gives the clients'
  operations the protocol's docstrings, as `tauopt.client._base.operation_docs`
  does at import: written once, in `tauopt/operations.py`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import griffe
from mkdocs.structure.files import File, Files

MARK = "<!-- error-catalogue -->"
WALKTHROUGH = "<!-- readme-walkthrough -->"
ROOT = Path(__file__).resolve().parent.parent


def catalogue_table() -> str:
    from tauopt.errors import CATALOGUE

    rows = ["| `error_type` | HTTP | gRPC | Retry-After | meaning |", "|---|---|---|---|---|"]
    for kind in CATALOGUE.values():
        retry = {"never": "never", "error": "when the engine knows"}.get(str(kind.retry_after), f"{kind.retry_after} s")
        meaning = kind.meaning.replace("|", "\\|")
        rows.append(f"| `{kind.error_type}` | {kind.http_status} | `{kind.grpc_code}` | {retry} | {meaning} |")
    return "\n".join(rows)


def _benchmarks_log() -> str:
    text = (ROOT / "BENCHMARKS.md").read_text()
    return re.sub(r"\]\(benchmarks/([^)/]+\.png)\)", r"](../img/\1)", text)


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "benchmarks/log.md", content=_benchmarks_log()))
    files.append(File.generated(config, "changelog.md", content=(ROOT / "CHANGELOG.md").read_text()))
    for plot in sorted((ROOT / "benchmarks").glob("*.png")):
        files.append(File.generated(config, f"img/{plot.name}", abs_src_path=str(plot)))
    return files


def readme_walkthrough() -> str:
    """The README's five-minute walkthrough, its links made relative to the site's root
    (the README's programs are tested where they are written, so they are not copied)."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Five minutes")
    end = readme.index("\n## ", start + 1)
    return readme[start:end].replace("](docs/", "](")


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARK in markdown:
        markdown = markdown.replace(MARK, catalogue_table())
    if WALKTHROUGH in markdown:
        markdown = markdown.replace(WALKTHROUGH, readme_walkthrough())
    return markdown


class OperationDocstrings(griffe.Extension):
    """The reference reads the code without running it, so the docstrings a decorator
    gives at import are given here, from the same source."""

    def on_package(self, *, pkg: griffe.Module, **_: Any) -> None:
        if pkg.path != "tauopt":
            return
        protocol = pkg["operations.Operations"]
        for client in ("client._client.AsyncClient", "client._client.Client"):
            for name, method in pkg[client].members.items():
                if name in protocol.members and method.docstring is None:
                    doc = protocol.members[name].docstring
                    method.docstring = griffe.Docstring(doc.value, lineno=doc.lineno, endlineno=doc.endlineno, parent=method)
