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


def _options(*argv: str):  # type: ignore[no-untyped-def]
    from tauopt.transport.grpc._chief import options_from_args

    parser = argparse.ArgumentParser(prog="tauopt")
    _cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["kerastuner", "chief", "--objective", "loss", "--direction", "min", *argv])
    return options_from_args(args, {IP_VAR: "127.0.0.1", PORT_VAR: "8000", ID_VAR: "chief"})


def test_hyperband_takes_its_trial_count_from_the_bracket_schedule() -> None:
    config = _options("--algorithm", "hyperband", "--max-epochs", "9", "--factor", "3", "--hyperband-iterations", "2").config
    assert config.hyperband is not None and config.hyperband.max_epochs == 9
    assert config.max_trials == 2 * (13 + 7 + 3)  # brackets 2, 1, 0 of KerasTuner's schedule


def test_hyperband_needs_max_epochs_and_a_factor_of_two_or_more() -> None:
    from tauopt.errors import ApiError

    with pytest.raises(ApiError, match="--max-epochs"):
        _options("--algorithm", "hyperband")
    with pytest.raises(ApiError, match="--factor >= 2"):
        _options("--algorithm", "hyperband", "--max-epochs", "9", "--factor", "1")
    with pytest.raises(ApiError, match="--max-trials N is required"):
        _options()
