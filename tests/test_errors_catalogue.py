"""One error catalogue: every door renders from `errors.CATALOGUE` (HTTP
status, gRPC status, Retry-After, other headers) and the client parses with it."""

from __future__ import annotations

import pytest

from tauopt.errors import CATALOGUE, ApiError, api_error, error_type_for_status, kind_of


def test_headers_come_from_the_catalogue_per_error_type() -> None:
    assert CATALOGUE["bandwidth_full"].http_headers(api_error("bandwidth_full", "m")) == {"Retry-After": "1"}
    limited = ApiError(429, "rate_limited", "m", retry_after=0.2)
    assert CATALOGUE["rate_limited"].http_headers(limited) == {"Retry-After": "1"}
    quota = ApiError(429, "quota_exceeded", "m", retry_after=3600.5)
    assert CATALOGUE["quota_exceeded"].http_headers(quota) == {"Retry-After": "3601"}
    cap = ApiError(429, "active_experiment_cap", "m", retry_after=5)
    assert CATALOGUE["active_experiment_cap"].http_headers(cap) == {}  # waiting does not help
    assert CATALOGUE["unauthorized"].http_headers(api_error("unauthorized", "m")) == {
        "WWW-Authenticate": 'Bearer realm="tauopt"'
    }
    assert CATALOGUE["not_found"].http_headers(api_error("not_found", "m")) == {}


def test_every_kind_names_a_real_grpc_status_and_an_error_http_status() -> None:
    grpc = pytest.importorskip("grpc")
    for kind in CATALOGUE.values():
        assert grpc.StatusCode[kind.grpc_code] is not grpc.StatusCode.OK
        assert 400 <= kind.http_status < 600


def test_bare_statuses_map_through_the_catalogue() -> None:
    assert error_type_for_status(429) == "bandwidth_full"
    assert error_type_for_status(502) == error_type_for_status(504) == "unavailable"
    assert error_type_for_status(418) == "invalid_request"
    assert error_type_for_status(418, default="internal") == "internal"
    assert error_type_for_status(307, default="internal") == "internal"


def test_an_uncatalogued_type_keeps_its_own_status() -> None:
    assert kind_of(ApiError(418, "teapot", "m")).http_status == 418
    assert kind_of(api_error("not_found", "m")) is CATALOGUE["not_found"]


def test_the_grpc_door_builds_errors_from_the_catalogue_not_by_hand() -> None:
    from pathlib import Path

    import tauopt

    root = Path(tauopt.__file__).parent / "transport"
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "ApiError(400" not in text and "_TYPE_BY_STATUS" not in text, path
        assert "WWW-Authenticate" not in text and '["Retry-After"] =' not in text, f"{path}: headers chosen by hand"
