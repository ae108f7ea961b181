"""The KerasTuner environment contract, checked without touching the network.

KerasTuner decides a process's role from three variables: `KERASTUNER_ORACLE_IP`
(where the chief binds and workers dial), `KERASTUNER_ORACLE_PORT`, and
`KERASTUNER_TUNER_ID` (an id containing the case-sensitive substring `chief` is
the chief). We are stricter than KerasTuner: it silently runs locally when the
IP is missing but a port or id is set, and it accepts blank values and
unbracketed IPv6 literals that later fail as gRPC targets.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

__all__ = ["IP_VAR", "PORT_VAR", "ID_VAR", "EnvCheck", "check_env"]

IP_VAR = "KERASTUNER_ORACLE_IP"
PORT_VAR = "KERASTUNER_ORACLE_PORT"
ID_VAR = "KERASTUNER_TUNER_ID"
VARS = (IP_VAR, PORT_VAR, ID_VAR)

_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")


@dataclass(frozen=True)
class EnvCheck:
    valid: bool
    mode: Literal["local", "distributed"] | None
    role: Literal["chief", "worker"] | None = None
    ip: str | None = None
    port: int | None = None
    tuner_id: str | None = None
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def endpoint(self) -> str | None:
        return f"{self.ip}:{self.port}" if self.ip is not None and self.port is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "mode": self.mode,
            "role": self.role,
            "endpoint": self.endpoint,
            "ip": self.ip,
            "port": self.port,
            "tuner_id": self.tuner_id,
            "errors": list(self.errors),
        }

    def describe(self) -> str:
        if not self.valid:
            return "invalid KerasTuner environment:\n" + "\n".join(f"  - {e}" for e in self.errors)
        if self.mode == "local":
            return f"local mode: none of {', '.join(VARS)} is set; KerasTuner runs in this process alone"
        return f"{self.role} {self.tuner_id!r}, endpoint {self.endpoint}"


def _blank(environ: Mapping[str, str], name: str) -> bool:
    return name not in environ or not environ[name].strip()


def _check_ip(ip: str) -> str | None:
    if ip != ip.strip():
        return f"{IP_VAR}={ip!r} has surrounding whitespace; remove it"
    if ip.startswith("["):
        inner = ip[1:-1] if ip.endswith("]") else None
        try:
            ipaddress.IPv6Address(inner or "")
        except ValueError:
            return f"{IP_VAR}={ip!r} is not a bracketed IPv6 address like [::1]"
        return None
    if ":" in ip:
        try:
            ipaddress.IPv6Address(ip)
        except ValueError:
            return f"{IP_VAR}={ip!r} is not an address; give an IPv4 address, a host name or a bracketed IPv6 address"
        return f"{IP_VAR}={ip!r} is an IPv6 address: bracket it, {IP_VAR}=[{ip}] (KerasTuner appends ':PORT')"
    if not _HOSTNAME.match(ip):
        return f"{IP_VAR}={ip!r} is not an IPv4 address or host name"
    return None


def _check_port(port: str) -> tuple[int | None, str | None]:
    if not re.fullmatch(r"[0-9]+", port):
        return None, f"{PORT_VAR}={port!r} is not an integer; give a port number 1-65535"
    value = int(port)
    if not 1 <= value <= 65535:
        return None, f"{PORT_VAR}={port} is out of range; give a port number 1-65535"
    return value, None


def _check_id(tuner_id: str) -> str | None:
    # The id is tauopt's suggestion tag and KerasTuner's file name `<id>.json`.
    if len(tuner_id) > 128 or not tuner_id.isprintable():
        return f"{ID_VAR}={tuner_id!r} must be 1-128 printable characters"
    if "/" in tuner_id or "\\" in tuner_id:
        return f"{ID_VAR}={tuner_id!r} must not contain a path separator (KerasTuner writes <id>.json)"
    if tuner_id != tuner_id.strip():
        return f"{ID_VAR}={tuner_id!r} has surrounding whitespace; remove it"
    return None


def check_env(environ: Mapping[str, str]) -> EnvCheck:
    """Classify the environment; never opens a socket."""
    present = [v for v in VARS if v in environ]
    if not present:
        return EnvCheck(True, "local")
    missing = [v for v in VARS if _blank(environ, v)]
    errors: list[str] = []
    if missing:
        blank = [v for v in missing if v in environ]
        what = ", ".join(missing)
        msg = f"set together or not at all: missing {what}"
        if blank:
            msg += f" ({', '.join(blank)} set but empty)"
        if IP_VAR in missing:
            msg += (
                f"; without {IP_VAR} KerasTuner silently runs locally and ignores the others —"
                f" set {IP_VAR} or unset {', '.join(v for v in present if v != IP_VAR)}"
            )
        errors.append(msg)
    ip = environ.get(IP_VAR) if IP_VAR not in missing else None
    port_raw = environ.get(PORT_VAR) if PORT_VAR not in missing else None
    tuner_id = environ.get(ID_VAR) if ID_VAR not in missing else None
    port = None
    if ip is not None and (err := _check_ip(ip)):
        errors.append(err)
    if port_raw is not None:
        port, err = _check_port(port_raw)
        if err:
            errors.append(err)
    if tuner_id is not None and (err := _check_id(tuner_id)):
        errors.append(err)
    role: Literal["chief", "worker"] | None = None
    if tuner_id is not None:
        role = "chief" if "chief" in tuner_id else "worker"
    return EnvCheck(not errors, "distributed", role, ip, port, tuner_id, tuple(errors))
