"""`tauopt kerastuner check-env`: the KerasTuner environment preflight (no sockets)."""

from __future__ import annotations

import argparse
import json

import pytest

from tauopt.transport.grpc import _cli
from tauopt.transport.grpc._env import ID_VAR, IP_VAR, PORT_VAR, check_env

FULL = {IP_VAR: "127.0.0.1", PORT_VAR: "8000", ID_VAR: "tuner0"}


def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    for var in (IP_VAR, PORT_VAR, ID_VAR):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    parser = argparse.ArgumentParser(prog="tauopt")
    _cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["kerastuner", "check-env", *argv])
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_nothing_set_is_valid_local_mode() -> None:
    r = check_env({"PATH": "/bin"})
    assert (r.valid, r.mode, r.role, r.errors) == (True, "local", None, ())


def test_complete_worker_set_is_valid_with_role_endpoint_and_id() -> None:
    r = check_env(FULL)
    assert (r.valid, r.mode, r.role, r.endpoint, r.tuner_id) == (True, "distributed", "worker", "127.0.0.1:8000", "tuner0")


@pytest.mark.parametrize("tuner_id", ["chief", "chief-0", "mychief", "tuner-chief-1"])
def test_an_id_containing_chief_is_the_chief(tuner_id: str) -> None:
    assert check_env({**FULL, ID_VAR: tuner_id}).role == "chief"


@pytest.mark.parametrize("tuner_id", ["Chief", "CHIEF", "worker-1", "chef", "tuner0"])
def test_an_id_without_lowercase_chief_is_a_worker(tuner_id: str) -> None:
    r = check_env({**FULL, ID_VAR: tuner_id})
    assert (r.valid, r.role) == (True, "worker")


@pytest.mark.parametrize("missing", [IP_VAR, PORT_VAR, ID_VAR])
def test_a_partial_set_is_invalid_and_names_what_is_missing(missing: str) -> None:
    env = {k: v for k, v in FULL.items() if k != missing}
    r = check_env(env)
    assert not r.valid
    assert missing in r.errors[0]
    assert all(other not in r.errors[0].split("missing")[1].split(";")[0] for other in env)


@pytest.mark.parametrize("only", [PORT_VAR, ID_VAR])
def test_port_or_id_without_ip_is_invalid_although_keras_tuner_runs_locally(only: str) -> None:
    r = check_env({only: FULL[only]})
    assert not r.valid
    assert IP_VAR in r.errors[0] and "silently runs locally" in r.errors[0]


@pytest.mark.parametrize("var", [IP_VAR, PORT_VAR, ID_VAR])
@pytest.mark.parametrize("blank", ["", "   ", "\t"])
def test_empty_or_whitespace_values_count_as_missing(var: str, blank: str) -> None:
    r = check_env({**FULL, var: blank})
    assert not r.valid
    assert var in r.errors[0] and "empty" in r.errors[0]


def test_all_three_set_but_empty_is_invalid_not_local() -> None:
    # KerasTuner sees IP in the environment and goes distributed; an empty target then fails.
    r = check_env({IP_VAR: "", PORT_VAR: "", ID_VAR: ""})
    assert not r.valid and r.mode == "distributed"


@pytest.mark.parametrize("port", ["0", "65536", "80a", "-1", "8000.0", " 8000", "１２３"])
def test_port_must_be_an_integer_from_1_to_65535(port: str) -> None:
    r = check_env({**FULL, PORT_VAR: port})
    assert not r.valid
    assert any(PORT_VAR in e for e in r.errors)


@pytest.mark.parametrize("port", ["1", "65535", "50051"])
def test_ports_at_the_edges_are_valid(port: str) -> None:
    assert check_env({**FULL, PORT_VAR: port}).port == int(port)


def test_unbracketed_ipv6_is_invalid_and_the_message_shows_the_bracketed_form() -> None:
    r = check_env({**FULL, IP_VAR: "::1"})
    assert not r.valid
    assert "[::1]" in r.errors[0]


@pytest.mark.parametrize("ip", ["[::1]", "[fe80::1]", "0.0.0.0", "10.1.2.3", "chief-host", "node1.cluster.local"])
def test_bracketed_ipv6_ipv4_and_host_names_are_valid(ip: str) -> None:
    r = check_env({**FULL, IP_VAR: ip})
    assert r.valid, r.errors
    assert r.endpoint == f"{ip}:8000"


@pytest.mark.parametrize("ip", ["[::1", "[not-v6]", "a b", "host:8000", "1.2.3.4 "])
def test_malformed_addresses_are_invalid(ip: str) -> None:
    assert not check_env({**FULL, IP_VAR: ip}).valid


def test_several_problems_are_all_reported() -> None:
    r = check_env({IP_VAR: "::1", PORT_VAR: "99999", ID_VAR: "tuner0"})
    assert len(r.errors) == 2


def test_cli_exit_0_and_prints_role_endpoint_id(monkeypatch, capsys) -> None:
    code, out, _ = run_cli(monkeypatch, capsys, {**FULL, ID_VAR: "chief"})
    assert code == 0
    assert "chief" in out and "127.0.0.1:8000" in out


def test_cli_local_mode_exits_0(monkeypatch, capsys) -> None:
    code, out, _ = run_cli(monkeypatch, capsys, {})
    assert code == 0 and "local mode" in out


def test_cli_invalid_exits_2_with_the_reason_on_stderr(monkeypatch, capsys) -> None:
    code, out, err = run_cli(monkeypatch, capsys, {PORT_VAR: "8000"})
    assert code == 2 and out == ""
    assert IP_VAR in err


def test_cli_json_for_machines(monkeypatch, capsys) -> None:
    code, out, _ = run_cli(monkeypatch, capsys, FULL, "--json")
    assert code == 0
    assert json.loads(out) == {
        "valid": True,
        "mode": "distributed",
        "role": "worker",
        "endpoint": "127.0.0.1:8000",
        "ip": "127.0.0.1",
        "port": 8000,
        "tuner_id": "tuner0",
        "errors": [],
    }
    code, out, _ = run_cli(monkeypatch, capsys, {ID_VAR: "chief"}, "--json")
    verdict = json.loads(out)
    assert code == 2 and verdict["valid"] is False and verdict["errors"]


@pytest.mark.parametrize("tuner_id", ["a/b", "x" * 129, "tab\there"])
def test_an_id_that_cannot_be_a_tag_or_a_file_name_is_invalid(tuner_id: str) -> None:
    r = check_env({**FULL, ID_VAR: tuner_id})
    assert not r.valid and ID_VAR in r.errors[0]
