"""The inline ask's one-pass mapping of unit points (Space._sampler per parameter)
gives value_at's values to the bit, and from_unit takes it only where it applies."""

from __future__ import annotations

import numpy as np

from tauopt.space import Space, _sampler, value_at

SPACE = Space.parse(
    [
        {"name": "lin", "type": "double", "bounds": [-3.5, 7.25]},
        {"name": "lr", "type": "double", "bounds": [1e-6, 0.3], "scale": "log"},
        {"name": "n", "type": "int", "bounds": [-4, 1000]},
        {"name": "act", "type": "categorical", "values": ["relu", "tanh", "gelu", 3, 2.5]},
        {"name": "step", "type": "double", "bounds": [0, 1], "step": 0.1},
        {"name": "nlog", "type": "int", "bounds": [1, 4096], "scale": "log"},
        {"name": "flag", "type": "boolean"},
        {"name": "rev", "type": "double", "bounds": [0.5, 0.999], "scale": "reverse_log"},
    ]
)
EDGES = [0.0, 1.0, 0.5, 1 - 2**-53, 2**-60, -0.25, 1.5]


def test_each_parameters_sampler_gives_value_at_to_the_bit() -> None:
    us = [*EDGES, *np.random.default_rng(7).random(2000).tolist()]
    for p in SPACE.parameters:
        f = _sampler(p)
        for u in us:
            got, want = f(u), value_at(p, u)
            assert type(got) is type(want) and got == want, (p.name, u, got, want)


def test_from_unit_in_one_pass_equals_the_general_mapping() -> None:
    rows = np.random.default_rng(3).random((500, len(SPACE.dims)))
    general = Space(SPACE.parameters + tuple(Space.parse([{"name": "c", "type": "fixed", "value": 1}]).parameters))
    assert SPACE._dim_samplers is not None and general._dim_samplers is None  # a fixed parameter: the general path
    for row in rows:
        fast = SPACE.from_unit(row)
        slow = general.from_unit(row)
        assert fast == {k: v for k, v in slow.items() if k != "c"} and slow["c"] == 1
        assert list(fast) == [p.name for p in SPACE.parameters]
        assert all(type(fast[k]) is type(slow[k]) for k in fast)


def test_a_space_that_has_sampled_still_pickles_for_the_process_pool() -> None:
    # The pool sends the space to another process; the cached samplers are closures.
    import pickle

    SPACE.from_unit([0.5] * len(SPACE.dims))
    assert "_dim_samplers" in SPACE.__dict__
    copy = pickle.loads(pickle.dumps(SPACE))
    assert copy == SPACE and "_dim_samplers" not in copy.__dict__
    assert copy.from_unit([0.25] * len(SPACE.dims)) == SPACE.from_unit([0.25] * len(SPACE.dims))
