"""The spec's layout: the value objects (`tauopt.models`) sit below the strategies, so
nothing `tauopt.models` imports, at module level or inside a function, reaches
`tauopt.strategies` (the strategies read the models; the list of strategy names is the
registry's, read where it is needed)."""

from __future__ import annotations

from pathlib import Path

import tauopt

from test_layout import _imports  # every module a file imports, relative ones resolved

ROOT = Path(tauopt.__file__).parent


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    files = {_module_of(p): p for p in ROOT.rglob("*.py") if "_generated" not in p.parts}
    return {m: {i for i in _imports(p) if i in files} for m, p in files.items()}


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        for n in graph.get(m, ()):
            # importing a.b.c runs a/b/__init__ first (and tauopt/__init__, the public face that
            # imports everything, which is not what a module depends on)
            for k in range(2, n.count(".") + 2):
                parent = ".".join(n.split(".")[:k])
                if parent in graph and parent not in seen:
                    seen.add(parent)
                    todo.append(parent)
    return seen


def test_the_models_do_not_import_the_strategies() -> None:
    graph = _graph()
    assert any(m.startswith("tauopt.strategies") for m in graph)
    reached = _reachable(graph, "tauopt.models")
    assert not [m for m in reached if m == "tauopt.strategies" or m.startswith("tauopt.strategies.")], sorted(reached)
    # and the strategies do import the models: the arrow points one way
    assert "tauopt.models" in _reachable(graph, "tauopt.strategies")
