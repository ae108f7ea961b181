"""The scrambled Sobol' points (scipy.stats.qmc underneath): scipy-equal, restartable, stratified, any dimension."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import qmc

from tauopt.strategies._sobol_points import MAX_DIMS, MAX_POINTS, sobol_points, sobol_points_unscrambled

TABLE_DIMS = 256  # the hand-written generator's table, kept as a test size


def _stratified(x: np.ndarray, k: int) -> bool:
    """Each column has exactly one of the 2^k rows in every interval of width 2^-k."""
    cells = np.sort(np.floor(x * (1 << k)).astype(np.int64), axis=0)
    return bool((cells == np.arange(1 << k)[:, None]).all())


@pytest.mark.parametrize("d", [1, 2, 7, 64, TABLE_DIMS])
def test_unscrambled_points_equal_scipy_for_tabled_dimensions(d: int) -> None:
    expected = qmc.Sobol(d, scramble=False).random_base2(10)
    np.testing.assert_array_equal(sobol_points_unscrambled(d, 0, 1024), expected)
    np.testing.assert_array_equal(sobol_points(d, 0, 1024, 123, scramble=False), expected)


@pytest.mark.parametrize("d", [1, 5, 64])
@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3])
def test_scrambled_points_equal_scipy_lms_plus_shift(d: int, seed: int) -> None:
    # scipy 1.17 seeds Sobol(rng=int) the way we do, so the scramble itself is pinned.
    expected = qmc.Sobol(d, scramble=True, rng=seed).random_base2(9)
    np.testing.assert_array_equal(sobol_points(d, 0, 512, seed), expected)


@pytest.mark.parametrize("scramble", [True, False])
def test_start_far_along_equals_scipy_fast_forward(scramble: bool) -> None:
    start = 10**6 + 17
    engine = qmc.Sobol(6, scramble=scramble, rng=5)
    engine.fast_forward(start)
    expected = engine.random(300)
    np.testing.assert_array_equal(sobol_points(6, start, 300, 5, scramble=scramble), expected)


def test_start_continues_one_long_draw_exactly() -> None:
    long = sobol_points(9, 0, 4096, seed=11)
    for start, n in [(0, 1), (1, 1), (1, 100), (1023, 2), (1024, 1000), (3000, 1096), (4095, 1)]:
        np.testing.assert_array_equal(sobol_points(9, start, n, seed=11), long[start : start + n])
    # An experiment asking in ragged batches, restarted anywhere, gets the same sequence.
    cuts = [0, 1, 3, 4, 64, 65, 1000, 2048, 4096]
    pieces = [sobol_points(9, a, b - a, seed=11) for a, b in zip(cuts, cuts[1:])]
    np.testing.assert_array_equal(np.concatenate(pieces), long)


def test_same_seed_repeats_and_different_seeds_differ() -> None:
    a = sobol_points(4, 100, 64, seed=1)
    np.testing.assert_array_equal(a, sobol_points(4, 100, 64, seed=1))
    b = sobol_points(4, 100, 64, seed=2)
    assert np.abs(a - b).mean() > 0.1  # independent scrambles: about 1/3 apart on average
    assert not np.array_equal(a, sobol_points_unscrambled(4, 100, 64))


@pytest.mark.parametrize("d", [3, 64, 300])
@pytest.mark.parametrize("seed", [0, 99])
def test_every_one_dimensional_projection_of_first_2k_points_is_stratified(d: int, seed: int) -> None:
    x = sobol_points(d, 0, 1 << 12, seed)
    for k in range(13):
        assert _stratified(x[: 1 << k], k), f"k={k}"
    # Any aligned block of 2^k points is a net too, not just the first.
    assert _stratified(sobol_points(d, 5 * 1024, 1024, seed), 10)
    assert _stratified(sobol_points_unscrambled(d, 0, 1 << 12), 12)


def test_d_200_works_far_along() -> None:
    # speed is measured, not asserted (about 25 ms here); this pins correctness only
    x = sobol_points(200, 10**6, 10**4, seed=3)
    assert x.shape == (10**4, 200) and x.dtype == np.float64
    assert 0.0 <= x.min() and x.max() < 1.0
    assert _stratified(sobol_points(200, 0, 256, seed=3), 8)


def test_dimensions_beyond_the_table_are_deterministic_and_distinct() -> None:
    # scipy's table ends at MAX_DIMS; further dimensions are further scrambled blocks.
    d = MAX_DIMS + 60
    x = sobol_points(d, 0, 64, seed=4)
    np.testing.assert_array_equal(x[:, :MAX_DIMS], sobol_points(MAX_DIMS, 0, 64, seed=4))
    np.testing.assert_array_equal(x, sobol_points(d, 0, 64, seed=4))
    assert len({col.tobytes() for col in x[:, MAX_DIMS - 100 :].T}) == 160  # no two dimensions move in lockstep
    assert _stratified(x[:, MAX_DIMS:], 6)
    with pytest.raises(ValueError, match="sobol_points"):
        sobol_points_unscrambled(d, 0, 4)


def test_values_lie_on_the_2_to_minus_30_grid_and_never_reach_one() -> None:
    x = sobol_points(8, 0, 1 << 16, seed=8)
    assert 0.0 <= x.min() and x.max() < 1.0
    scaled = x * MAX_POINTS
    np.testing.assert_array_equal(scaled, np.floor(scaled))
    last = sobol_points(3, MAX_POINTS - 2, 2, seed=8)  # the sequence's very end still works
    assert last.shape == (2, 3) and last.max() < 1.0


def test_zero_points_and_zero_dimensions_give_empty_arrays() -> None:
    assert sobol_points(5, 10, 0, seed=1).shape == (0, 5)
    assert sobol_points(0, 10, 3, seed=1).shape == (3, 0)


@pytest.mark.parametrize(
    ("d", "start", "n", "seed"),
    [(-1, 0, 1, 0), (2, -1, 1, 0), (2, 0, -1, 0), (2, 0, 1, -5), (2, MAX_POINTS - 1, 2, 0)],
)
def test_bad_arguments_raise_value_error_naming_the_limit(d: int, start: int, n: int, seed: int) -> None:
    with pytest.raises(ValueError, match="sobol_points"):
        sobol_points(d, start, n, seed)


def test_module_imports_scipy_only_when_drawing_and_never_torch() -> None:
    code = (
        "import sys, tauopt.strategies._sobol_points as s; assert 'scipy' not in sys.modules;"
        "s.sobol_points(3, 0, 4, 1); assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_numpy_integer_arguments_give_the_same_points() -> None:
    expected = sobol_points(4, 1000, 8, seed=6)
    got = sobol_points(np.int64(4), np.int64(1000), np.int32(8), seed=np.uint64(6))
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(TypeError):
        sobol_points(4, 1000.0, 8, seed=6)  # type: ignore[arg-type]
