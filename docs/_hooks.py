"""MkDocs hooks: pages that are generated from the code or kept at the root, not written twice.

- `<!-- error-catalogue -->` on a page becomes the table of every error type, built
  from `tauopt.errors.CATALOGUE` itself, so the documented catalogue cannot drift
  from the one every door renders.
- `<!-- readme-walkthrough -->` becomes the README's five-minute walkthrough (its
  programs are run by the tests where they are written, in the README).
- `<!-- standing -->` becomes the table of where each benchmark target stands,
  rendered by `benchmarks/standing.py` (the table `make bench` prints and
  BENCHMARKS.md carries).
- The repository's root files that readers of the site need, BENCHMARKS.md (the
  current figures and how each was reached) and CHANGELOG.md, become the
  pages `benchmarks/log.md` and `changelog.md`; the plots under `benchmarks/`
  are served as `img/<name>.png`.
- `OperationDocstrings`, a griffe extension (mkdocs.yml), gives the clients'
  operations the protocol's docstrings, as `tauopt.client._base.operation_docs`
  does at import: written once, in `tauopt/operations.py`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import griffe
from mkdocs.structure.files import File, Files

MARK = "<!-- error-catalogue -->"
WALKTHROUGH = "<!-- readme-walkthrough -->"
STANDING = "<!-- standing -->"
ROOT = Path(__file__).resolve().parent.parent


def catalogue_table() -> str:
    from tauopt.errors import CATALOGUE

    rows = ["| `error_type` | HTTP | gRPC | Retry-After | meaning |", "|---|---|---|---|---|"]
    for kind in CATALOGUE.values():
        retry = {"never": "never", "error": "when the engine knows"}.get(str(kind.retry_after), f"{kind.retry_after} s")
        meaning = kind.meaning.replace("|", "\\|")
        rows.append(f"| `{kind.error_type}` | {kind.http_status} | `{kind.grpc_code}` | {retry} | {meaning} |")
    return "\n".join(rows)


def standing_table() -> str:
    """benchmarks/standing.py's table, its links pointing at the site's copy of BENCHMARKS.md."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tauopt_bench_standing", ROOT / "benchmarks" / "standing.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return str(module.table(page="benchmarks/log.md"))


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
    if STANDING in markdown:
        markdown = markdown.replace(STANDING, standing_table())
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
