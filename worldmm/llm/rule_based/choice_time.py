"""Options that are times ("About four hours ago", "Yesterday afternoon"): the evidence's own
moment decides, not its words.

Each option comes read as a range of hours before the question (:class:`OptionNote`'s
``hours_before``, from the time parser). Each evidence unit fits an option by its distance
to the option's range in log elapsed time (3 h against "about 2 hours ago" is as far as
30 h against "about 20 hours ago"; 0 inside), plus a tenth of its distance to the range's
middle, so that of two overlapping ranges the one centred nearer wins: fit =
exp(-distance). An option scores the fits weighed by the units' relevance to the question
(the answerer's attention), so a far-off unit the question barely attends to cannot outweigh
the attended one. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

import numpy as np

MIDDLE_WEIGHT = 0.1  # the pull of a range's middle, next to its edges
MIN_ELAPSED_H = 1 / 60  # a moment at the question's own minute is a minute before it


def elapsed_h(now: datetime, moment: datetime) -> float:
    """Hours from ``moment`` to ``now``, at least a minute."""
    return max((now - moment).total_seconds() / 3600, MIN_ELAPSED_H)


def time_scores(
    ranges: Sequence[tuple[float, float]], hours: Sequence[float], attention: np.ndarray
) -> np.ndarray:
    """Per option range ``(nearest, farthest)`` hours before the question: the
    attention-weighted fit of the units' elapsed ``hours`` to it."""
    logs = np.log(np.maximum(np.asarray(hours, dtype=np.float64), MIN_ELAPSED_H))
    out = np.zeros(len(ranges))
    for i, (near, far) in enumerate(ranges):
        near, far = max(near, MIN_ELAPSED_H), max(far, MIN_ELAPSED_H)
        lo, hi = math.log(near), math.log(far)
        outside = np.maximum(lo - logs, 0.0) + np.maximum(logs - hi, 0.0)
        middle = np.abs(logs - math.log((near + far) / 2))
        out[i] = float(attention @ np.exp(-(outside + MIDDLE_WEIGHT * middle)))
    return out
