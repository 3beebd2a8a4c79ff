"""Statistical checks shared by the sampler tests."""

from __future__ import annotations

import numpy as np
from scipy import stats


def chi2_pvalue(samples: np.ndarray, p: np.ndarray) -> float:
    """Chi-square goodness of fit of ``samples`` (output ids) to the distribution ``p``; cells with
    an expected count below 5 are pooled. Fails at once if an output of probability 0 was drawn."""
    obs = np.bincount(samples, minlength=p.size).astype(float)
    assert obs[p == 0].sum() == 0, "sampled an output of probability 0"
    exp = p * samples.size
    small = exp < 5
    o = np.r_[obs[~small], obs[small].sum()]
    e = np.r_[exp[~small], exp[small].sum()]
    keep = e > 0
    o, e = o[keep], e[keep]
    if o.size < 2:
        return 1.0
    return float(stats.chisquare(o, e * o.sum() / e.sum()).pvalue)
