"""The committed gRPC code matches the `.proto`, and the `.proto` matches keras-tuner's and
Optuna's wire formats."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from tauopt.transport.grpc import _regen


def test_committed_gencode_matches_a_fresh_regen(tmp_path: Path) -> None:
    fresh = _regen.generate(tmp_path)
    for path in fresh:
        committed = _regen.ROOT / path.relative_to(tmp_path)
        assert committed.read_bytes() == path.read_bytes(), f"{path.name} drifted: run `make grpc-stubs`"
    produced = {p.name for p in (tmp_path / _regen.PROTO_DIR.relative_to(_regen.ROOT)).iterdir()}
    assert produced == set(_regen.generated_names())
    produced = {p.name for p in (tmp_path / _regen.OPTUNA_DIR.relative_to(_regen.ROOT)).iterdir()}
    assert produced == set(_regen.generated_names(_regen.OPTUNA_PROTOS))


def test_optuna_service_is_optunas_own_descriptor_byte_for_byte() -> None:
    """Same file name and bytes as the pinned Optuna's gencode: the client's messages are
    ours, and both load into one process (protobuf accepts an identical file twice)."""
    pytest.importorskip("optuna")
    from tauopt.transport.optuna._generated import api_pb2 as ours
    from optuna.storages._grpc.auto_generated import api_pb2 as theirs  # after ours: the other order works too

    assert ours.DESCRIPTOR.name == "api.proto"
    assert ours.DESCRIPTOR.serialized_pb == theirs.DESCRIPTOR.serialized_pb
    assert ours.Trial is theirs.Trial
    service = ours.DESCRIPTOR.services_by_name["StorageService"]
    assert service.full_name == "optuna.StorageService" and len(service.methods) == 19


def _keras_tuner_descriptor(module: str):
    """The FileDescriptorProto keras-tuner's wheel registers, read from its gencode text
    (never imported: that would import keras, and clash with ours in the default pool)."""
    from google.protobuf import descriptor_pb2

    spec = importlib.util.find_spec("keras_tuner")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("keras-tuner is not installed")
    source = Path(spec.submodule_search_locations[0], "src", "protos", "v4", f"{module}.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            return descriptor_pb2.FileDescriptorProto.FromString(ast.literal_eval(node.args[0]))
    raise AssertionError(f"no serialized descriptor in keras-tuner's {module}")


def _ours(module):
    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(fdp)
    return fdp


@pytest.mark.parametrize("name", ["keras_tuner_pb2", "service_pb2"])
def test_messages_enums_and_service_match_keras_tuner_1_4_8_on_the_wire(name: str) -> None:
    import importlib

    theirs = _keras_tuner_descriptor(name)
    ours = _ours(importlib.import_module(f"tauopt.transport.grpc._generated.{name}"))
    assert ours.package == theirs.package == "keras_tuner"
    # Only the file path differs; it never crosses the wire.
    assert list(ours.message_type) == list(theirs.message_type)
    assert list(ours.enum_type) == list(theirs.enum_type)
    assert list(ours.service) == list(theirs.service)


def test_stub_uses_the_exact_method_paths() -> None:
    from tauopt.transport.grpc._generated import service_pb2

    service = service_pb2.DESCRIPTOR.services_by_name["Oracle"]
    assert service.full_name == "keras_tuner.Oracle"
    assert sorted(f"/{service.full_name}/{m.name}" for m in service.methods) == sorted(
        f"/keras_tuner.Oracle/{m}"
        for m in ("GetSpace", "UpdateSpace", "CreateTrial", "UpdateTrial", "EndTrial", "GetBestTrials", "GetTrial")
    )
