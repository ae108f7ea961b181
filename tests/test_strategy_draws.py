"""An actor's generator of draws (strategies.Draws): one bit generator reused, each
draw reproducible from (seed, drawn) alone, the same stream a fresh rng_for gives a
pooled job in another process, whatever was drawn before."""

from __future__ import annotations

import numpy as np

from tauopt.strategies import Draws, rng_for


def test_a_draw_depends_on_seed_and_drawn_only_not_on_what_was_drawn_before() -> None:
    draws = Draws(12345)
    first = draws.at(7).random(5).tolist()
    draws.at(8).integers(0, 10, size=33)  # leave the generator mid-buffer (32-bit ints buffer half a word)
    draws.at(9).standard_normal(3)
    assert draws.at(7).random(5).tolist() == first
    assert rng_for(12345, 7).random(5).tolist() == first  # a fresh generator: the pooled job's
    assert Draws(12345).at(7).random(5).tolist() == first


def test_draws_differ_by_draw_and_by_seed_and_look_uniform() -> None:
    draws = Draws(1)
    a, b = draws.at(0).random(4).tolist(), draws.at(1).random(4).tolist()
    c = Draws(2).at(0).random(4).tolist()
    assert a != b and a != c
    u = np.concatenate([Draws(3).at(d).random(8) for d in range(2000)])
    assert 0.48 < u.mean() < 0.52 and u.min() >= 0.0 and u.max() < 1.0


def test_large_seeds_and_counts_are_accepted() -> None:
    big = Draws(2**200 + 5)  # folded into Philox's 128-bit key
    assert big.at(2**70).random(2).tolist() == rng_for(2**200 + 5, 2**70).random(2).tolist()
    assert big.at(0).random(2).tolist() != Draws(5).at(0).random(2).tolist()
