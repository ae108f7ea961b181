"""A space that grows as workers teach it, and the points valid in it.

Workers of a trial-based door may know parameters the search does not yet: what
they send is merged into the search's space (`merge_space`), and a point they
ran is stored as the point of today's space it stands for (`assignments_for`:
a parameter the worker did not send takes its default, `default_value`, which
for a range is its lower bound as in KerasTuner).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from ..errors import ApiError
from ..models import Parameter, Value
from ..space import Space, _canonical

__all__ = ["Learned", "merge_space", "assignments_for", "default_value"]


@dataclass(frozen=True)
class Learned:
    """A worker's space in tauopt terms; `skipped` names what tauopt cannot represent and why."""

    parameters: tuple[Parameter, ...]
    skipped: tuple[str, ...] = ()


def merge_space(current: Space, learned: Iterable[Parameter]) -> tuple[Space, list[str]]:
    """`current` plus the learned parameters it lacks (by name), parents before children;
    additions that would make the space invalid are skipped with the reason."""
    params = list(current.parameters)
    names = {p.name for p in params}
    pending = [p for p in learned if p.name not in names]
    skipped: list[str] = []
    progress = True
    while pending and progress:
        progress = False
        for p in list(pending):
            if any(c.parent not in names for c in p.conditions):
                continue  # its parent may come later in the list
            try:
                Space(tuple(params) + (p,))
            except ApiError as exc:
                skipped.append(f"{p.name!r}: {exc.message}")
            else:
                params.append(p)
                names.add(p.name)
            pending.remove(p)
            progress = True
    skipped += [f"{p.name!r}: its condition names an unknown parent" for p in pending]
    return Space(tuple(params)), skipped


def assignments_for(space: Space, values: Mapping[str, Value]) -> dict[str, Value]:
    """A valid point of `space` from a worker's values: active parameters take the worker's
    value when it is in their domain, else their default; inactive and unknown ones are dropped."""
    out: dict[str, Value] = {}
    for p in space.order:
        if not space.is_active(p, out):
            continue
        v = values.get(p.name)
        if v is not None:
            try:
                out[p.name] = _canonical(p, v, p.name)
                continue
            except ApiError:
                pass
        out[p.name] = default_value(p)
    return space.validate({p.name: out[p.name] for p in space.parameters if p.name in out})


def default_value(p: Parameter) -> Value:
    if p.default is not None:
        return p.default
    if p.type == "fixed":
        return p.value  # type: ignore[return-value]
    if p.type == "boolean":
        return False
    if p.type == "categorical":
        return (p.values or ())[0]
    return p.bounds[0]  # type: ignore[index]  # KerasTuner's own default is min_value
