"""Regenerate the committed KerasTuner gRPC code from the `.proto` files.

Run as `python -m tauopt.transport.grpc._regen` (`make grpc-stubs`). protoc runs
with the repository root as its include path, so the generated modules import
each other as `tauopt.transport.grpc._generated.*` and need no sys.path tricks.
The `_pb2.pyi` stubs type the messages for mypy (protobuf builds them at import).
`tests/test_grpc_generated.py` regenerates into a temp dir and compares bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["GENERATOR_VERSION", "PROTO_DIR", "PROTOS", "generate", "generated_names"]

# Newer grpcio-tools embed runtime checks that pin the minimum grpcio/protobuf;
# pin the generator so a regen never silently raises those floors.
GENERATOR_VERSION = "1.85.1"
PROTO_DIR = Path(__file__).resolve().parent / "_generated"
ROOT = PROTO_DIR.parents[3]  # the directory holding the `tauopt` package
PROTOS = ("keras_tuner.proto", "service.proto")


def generated_names() -> list[str]:
    """The files protoc writes next to the protos."""
    names = []
    for proto in PROTOS:
        stem = proto.removesuffix(".proto")
        names += [f"{stem}_pb2.py", f"{stem}_pb2.pyi", f"{stem}_pb2_grpc.py"]
    return names


def generate(out_root: Path = ROOT) -> list[Path]:
    """Run protoc; `out_root` mirrors the repository root. Returns the written files."""
    try:
        from grpc_tools import protoc
        from importlib.metadata import version
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise SystemExit("grpcio-tools is missing; install it with `pip install grpcio-tools==1.85.1`") from exc
    have = version("grpcio-tools")
    if have != GENERATOR_VERSION:
        raise SystemExit(f"grpcio-tools {have} is installed; regenerate with grpcio-tools=={GENERATOR_VERSION}")
    rel = [str((PROTO_DIR / p).relative_to(ROOT)) for p in PROTOS]
    out_root.mkdir(parents=True, exist_ok=True)
    outs = [f"--python_out={out_root}", f"--pyi_out={out_root}", f"--grpc_python_out={out_root}"]
    code = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", *outs, *rel])
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}")
    out_dir = out_root / PROTO_DIR.relative_to(ROOT)
    return [out_dir / name for name in generated_names()]


def main() -> int:
    for path in generate():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
