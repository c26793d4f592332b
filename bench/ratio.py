"""Paired ratios with a 95 % Student t interval, for the bench/ scripts' summaries."""
import math
import statistics

# Student t, 97.5th percentile, by degrees of freedom.
T_975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
         10: 2.23, 11: 2.20, 12: 2.18, 13: 2.16, 14: 2.14, 15: 2.13, 19: 2.09, 29: 2.05}


def mean_ci(ratios):
    """The mean of per-pair ratios and its 95 % interval (nan bounds for one pair)."""
    n = len(ratios)
    mean = statistics.mean(ratios)
    if n < 2:
        return mean, float("nan"), float("nan")
    half = T_975.get(n - 1, 2.0) * statistics.stdev(ratios) / math.sqrt(n)
    return mean, mean - half, mean + half
