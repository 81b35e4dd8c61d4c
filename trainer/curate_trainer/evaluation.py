"""A reward model's evaluation figures from plain numbers: Pearson's
correlation and the calibration of its pairwise preference probabilities.

Standard library only, so the arithmetic is tested anywhere.

Calibration: a Bradley-Terry reward model says that reply a is preferred to
reply b with probability sigmoid(r_a - r_b). For each evaluation pair that is
p = sigmoid(r_chosen - r_rejected), whose outcome is "preferred" (1); the
same pair read the other way round says 1 - p for the rejected reply, whose
outcome is 0. Both readings go into ten bins of equal width over [0, 1],
so the chart is symmetric about (0.5, 0.5) and a calibrated model lies on
the diagonal: of the pairs it gives 0.8, four in five went its way.
"""

import math

N_BINS = 10


def pearson(xs, ys):
    """Pearson's r of two equally long sequences; None when either is
    constant or shorter than two."""
    n = len(xs)
    if n < 2 or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def calibration(margins, n_bins=N_BINS):
    """Calibration bins from the pairs' score margins r_chosen - r_rejected.

    Returns (bins, error): bins is a list of n_bins dicts with ``lower``,
    ``upper``, ``count`` (readings in the bin), ``predicted`` (their mean
    probability) and ``observed`` (the share that were the preferred
    reply), the last two None for an empty bin; error is the expected
    calibration error, sum over bins of count / total * |observed -
    predicted|, or None without pairs. A probability of exactly 1 falls in
    the last bin."""
    sums = [0.0] * n_bins
    wins = [0] * n_bins
    counts = [0] * n_bins
    for m in margins:
        p = sigmoid(m)
        for prob, outcome in ((p, 1), (1.0 - p, 0)):
            i = min(int(prob * n_bins), n_bins - 1)
            sums[i] += prob
            wins[i] += outcome
            counts[i] += 1
    total = sum(counts)
    bins, error = [], 0.0
    for i in range(n_bins):
        b = {"lower": round(i / n_bins, 6), "upper": round((i + 1) / n_bins, 6), "count": counts[i],
             "predicted": None, "observed": None}
        if counts[i]:
            b["predicted"] = sums[i] / counts[i]
            b["observed"] = wins[i] / counts[i]
            error += counts[i] / total * abs(b["observed"] - b["predicted"])
        bins.append(b)
    return bins, (error if total else None)
