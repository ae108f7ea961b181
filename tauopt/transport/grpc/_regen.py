"""Regenerate the committed gRPC code (KerasTuner's and Optuna's services) from the `.proto` files.

Run as `python -m tauopt.transport.grpc._regen` (`make grpc-stubs`). For KerasTuner,
protoc runs with the repository root as its include path, so the generated modules
import each other as `tauopt.transport.grpc._generated.*` and need no sys.path tricks.
Optuna's `api.proto` is compiled from its own directory, so it registers as
`api.proto`, exactly as Optuna's own gencode does: both then load into one process
(protobuf accepts an identical file twice), and the one import protoc writes is
made relative. The `_pb2.pyi` stubs type the messages for mypy (protobuf builds
them at import). `tests/test_grpc_generated.py` regenerates into a temp dir and
compares bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["GENERATOR_VERSION", "PROTO_DIR", "PROTOS", "OPTUNA_DIR", "generate", "generated_names"]

# Newer grpcio-tools embed runtime checks that pin the minimum grpcio/protobuf;
# pin the generator so a regen never silently raises those floors.
GENERATOR_VERSION = "1.85.1"
PROTO_DIR = Path(__file__).resolve().parent / "_generated"
ROOT = PROTO_DIR.parents[3]  # the directory holding the `tauopt` package
PROTOS = ("keras_tuner.proto", "service.proto")
OPTUNA_DIR = ROOT / "tauopt" / "transport" / "optuna" / "_generated"
OPTUNA_PROTOS = ("api.proto",)


def generated_names(protos: tuple[str, ...] = PROTOS) -> list[str]:
    """The files protoc writes next to the protos."""
    names = []
    for proto in protos:
        stem = proto.removesuffix(".proto")
        names += [f"{stem}_pb2.py", f"{stem}_pb2.pyi", f"{stem}_pb2_grpc.py"]
    return names


def generate(out_root: Path = ROOT) -> list[Path]:
    """Run protoc for both services; `out_root` mirrors the repository root. Returns the written files."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        have = version("grpcio-tools")
    except PackageNotFoundError as exc:  # pragma: no cover - depends on the install
        raise SystemExit("grpcio-tools is missing; install it with `pip install grpcio-tools==1.85.1`") from exc
    if have != GENERATOR_VERSION:
        raise SystemExit(f"grpcio-tools {have} is installed; regenerate with grpcio-tools=={GENERATOR_VERSION}")
    return _generate_kerastuner(out_root) + _generate_optuna(out_root)


def _protoc(args: list[str]) -> None:
    from grpc_tools import protoc

    code = protoc.main(["grpc_tools.protoc", *args])
    if code != 0:
        raise SystemExit(f"protoc failed with exit code {code}")


def _generate_optuna(out_root: Path) -> list[Path]:
    out_dir = out_root / OPTUNA_DIR.relative_to(ROOT)
    out_dir.mkdir(parents=True, exist_ok=True)
    outs = [f"--python_out={out_dir}", f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}"]
    _protoc([f"-I{OPTUNA_DIR}", *outs, *OPTUNA_PROTOS])
    for proto in OPTUNA_PROTOS:
        stem = proto.removesuffix(".proto")
        stub = out_dir / f"{stem}_pb2_grpc.py"
        bare = f"import {stem}_pb2 as {stem}__pb2"
        stub.write_text(stub.read_text().replace(bare, f"from . {bare}"))
    return [out_dir / name for name in generated_names(OPTUNA_PROTOS)]


def _generate_kerastuner(out_root: Path) -> list[Path]:
    rel = [str((PROTO_DIR / p).relative_to(ROOT)) for p in PROTOS]
    out_root.mkdir(parents=True, exist_ok=True)
    outs = [f"--python_out={out_root}", f"--pyi_out={out_root}", f"--grpc_python_out={out_root}"]
    _protoc([f"-I{ROOT}", *outs, *rel])
    out_dir = out_root / PROTO_DIR.relative_to(ROOT)
    return [out_dir / name for name in generated_names()]


def main() -> int:
    for path in generate():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
