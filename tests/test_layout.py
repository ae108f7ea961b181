"""Rules of the house that reading alone would let slip: doors are siblings
(neither imports the other; the CLI composes them)."""

from __future__ import annotations

import ast
from pathlib import Path

import tauopt

TRANSPORT = Path(tauopt.__file__).parent / "transport"


def _imports(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved)."""
    package = "tauopt." + ".".join(path.relative_to(TRANSPORT.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
    return found


def test_doors_do_not_import_each_other() -> None:
    doors = [d.name for d in TRANSPORT.iterdir() if d.is_dir() and (d / "__init__.py").exists()]
    assert {"http", "grpc"} <= set(doors)
    for door in doors:
        others = [f"tauopt.transport.{o}" for o in doors if o != door]
        for path in (TRANSPORT / door).rglob("*.py"):
            if "_generated" in path.parts:
                continue
            bad = [m for m in _imports(path) if any(m == o or m.startswith(o + ".") for o in others)]
            assert not bad, f"{path.relative_to(TRANSPORT)} imports another door: {bad}"
