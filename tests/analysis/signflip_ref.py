"""An independent inversion of the exact sign-flip test, for the tests: scipy's permutation test
run on the shifted differences, its accepted shifts found by bisection from both sides."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps


def _p(x: np.ndarray) -> float:
    if np.count_nonzero(x) <= 1:
        return 1.0
    res = sps.permutation_test(
        (x,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="two-sided", vectorized=True, axis=-1
    )
    return float(min(1.0, res.pvalue))


def inverted_interval(diffs: Sequence[float], level: float) -> tuple[float, float]:
    """The mean-difference interval over all tasks: ties are exact zeros, the differing tasks'
    shift accepted by scipy's test at ``1 - level``, found to 1e-9 by bisection."""
    d = np.asarray(diffs, dtype=float)
    x = d[d != 0]
    k, n = len(x), len(d)
    if k == 0:
        return (0.0, 0.0)
    alpha = 1 - level
    if 2 / 2**k >= alpha:
        return (-math.inf, math.inf)
    centre = float(x.mean())
    span = float(np.ptp(x)) + abs(centre) + 1.0

    def edge(far: float) -> float:
        inside, outside = centre, far
        assert _p(x - outside) < alpha
        while abs(outside - inside) > 1e-9:
            mid = (inside + outside) / 2
            if _p(x - mid) >= alpha:
                inside = mid
            else:
                outside = mid
        return inside

    return (edge(centre - span) * k / n, edge(centre + span) * k / n)
