"""`tauopt kerastuner chief` refuses to start without a complete chief environment."""

from __future__ import annotations

import argparse

import pytest

from tauopt.transport.grpc import _cli
from tauopt.transport.grpc._env import ID_VAR, IP_VAR, PORT_VAR


def chief(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str], *extra: str) -> tuple[int, str]:
    for var in (IP_VAR, PORT_VAR, ID_VAR):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    parser = argparse.ArgumentParser(prog="tauopt")
    _cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["kerastuner", "chief", "--objective", "score", "--direction", "min", "--max-trials", "3", *extra])
    code = args.func(args)
    return code, capsys.readouterr().err


def test_the_chief_refuses_a_partial_environment_with_the_preflight_message(monkeypatch, capsys) -> None:
    code, err = chief(monkeypatch, capsys, {IP_VAR: "127.0.0.1", ID_VAR: "chief"})
    assert code == 2 and PORT_VAR in err


def test_the_chief_refuses_local_mode(monkeypatch, capsys) -> None:
    code, err = chief(monkeypatch, capsys, {})
    assert code == 2 and IP_VAR in err


def test_the_chief_refuses_a_worker_id(monkeypatch, capsys) -> None:
    code, err = chief(monkeypatch, capsys, {IP_VAR: "127.0.0.1", PORT_VAR: "8000", ID_VAR: "Chief-0"})
    assert code == 2 and "worker id" in err


def test_the_chief_refuses_a_space_keras_tuner_cannot_parse(monkeypatch, capsys, tmp_path) -> None:
    space = tmp_path / "space.json"
    space.write_text('[{"name": "x", "type": "categorical", "values": ["a", 1]}]')
    code, err = chief(monkeypatch, capsys, {IP_VAR: "127.0.0.1", PORT_VAR: "8000", ID_VAR: "chief"}, "--space", str(space))
    assert code == 2 and "one type" in err
