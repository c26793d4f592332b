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


def on_off_summary(path, digits):
    """Prints the uprobes on/off pairs of lib.sh's on_off_pairs (columns: pair, no-tls
    requests, ns/request, events, tls the same), µs with `digits` decimals; returns the rows."""
    rows = [list(map(float, l.split())) for l in open(path)]
    mean, low, high = mean_ci([r[5] / r[2] for r in rows])
    print(f"uprobes off median {statistics.median(r[2] for r in rows) / 1000:.{digits}f} "
          "µs CPU/request")
    print(f"uprobes on  median {statistics.median(r[5] for r in rows) / 1000:.{digits}f} "
          "µs CPU/request")
    print(f"on/off CPU per request {mean:.3f} (95% CI {low:.3f} .. {high:.3f}), "
          f"{statistics.median(r[5] - r[2] for r in rows) / 1000:+.{digits}f} µs per request "
          "(median of pairs)")
    return rows


def events_per_request(rows):
    """The events per request of on_off_summary's rows, without and with the uprobes."""
    print(f"events per request: off {sum(r[3] for r in rows) / sum(r[1] for r in rows):.3f}, "
          f"on {sum(r[6] for r in rows) / sum(r[4] for r in rows):.3f}")
