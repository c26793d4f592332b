//! Careful statistics for noisy measurements: ratios of paired, interleaved repetitions with a
//! confidence interval, and a verdict that says "inconclusive" rather than guess.

use serde::{Deserialize, Serialize};

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The t quantile for a two-sided 95 % interval with `df` degrees of freedom.
pub fn t_975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_975[df - 1],
        _ => 1.96,
    }
}

pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation (n - 1).
pub fn stddev(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// The mean of repeated measurements with its 95 % confidence interval (Student's t).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub mean: f64,
    /// Bounds of the interval; absent with a single measurement, which has none.
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// The measurements, in the order they were taken.
    pub values: Vec<f64>,
}

impl Estimate {
    /// None when there is nothing to estimate from.
    pub fn of(values: Vec<f64>) -> Option<Estimate> {
        if values.is_empty() {
            return None;
        }
        let m = mean(&values);
        let n = values.len();
        let half = (n > 1).then(|| t_975(n - 1) * stddev(&values) / (n as f64).sqrt());
        Some(Estimate {
            mean: m,
            low: half.map(|h| m - h),
            high: half.map(|h| m + h),
            values,
        })
    }

    /// The interval's half width, when there is an interval.
    pub fn half_width(&self) -> Option<f64> {
        Some((self.high? - self.low?) / 2.0)
    }
}

/// B/A with a 95 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
}

/// Ratio of B to A from paired repetitions (A₁B₁, A₂B₂, …, run interleaved so that drift hits
/// both alike). Works on log ratios, so the interval is symmetric in the multiplicative sense and
/// B/A and A/B agree. `None` when a pair has a non-positive value.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<Ratio> {
    let n = a.len().min(b.len());
    if n == 0 {
        return None;
    }
    let logs: Option<Vec<f64>> = a[..n]
        .iter()
        .zip(&b[..n])
        .map(|(&x, &y)| (x > 0.0 && y > 0.0).then(|| (y / x).ln()))
        .collect();
    let logs = logs?;
    let m = mean(&logs);
    let half = if n > 1 {
        t_975(n - 1) * stddev(&logs) / (n as f64).sqrt()
    } else {
        f64::INFINITY
    };
    Some(Ratio {
        ratio: m.exp(),
        low: (m - half).exp(),
        high: (m + half).exp(),
    })
}

/// What a ratio of costs (lower is better) says about B against A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Exact counts, equal in every repetition.
    Identical,
    Better,
    Worse,
    NoSignificantDifference,
    Inconclusive,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Identical => "identical",
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoSignificantDifference => "no significant difference",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

impl Verdict {
    /// The verdict for a metric where more is better.
    pub fn flipped(self) -> Verdict {
        match self {
            Verdict::Better => Verdict::Worse,
            Verdict::Worse => Verdict::Better,
            v => v,
        }
    }
}

/// Differences within this band are called equal when the interval also fits inside it.
pub const EQUIVALENCE_BAND: f64 = 0.05;

/// A change smaller than this is not claimed even when the interval excludes 1: a few
/// repetitions on a shared machine can be consistently off by a percent (cache and frequency
/// state, the order of runs), as criterion's noise threshold also allows for.
pub const NOISE_THRESHOLD: f64 = 0.02;

/// A cost ratio's verdict: the interval must exclude 1 and the ratio must move more than
/// [`NOISE_THRESHOLD`] to claim a change, and the interval must fit in ±[`EQUIVALENCE_BAND`]
/// to claim there is none; anything else is noise too large to call.
pub fn verdict(r: &Ratio) -> Verdict {
    let beyond_noise = (r.ratio - 1.0).abs() > NOISE_THRESHOLD;
    if r.high < 1.0 && beyond_noise {
        Verdict::Better
    } else if r.low > 1.0 && beyond_noise {
        Verdict::Worse
    } else if r.low >= 1.0 - EQUIVALENCE_BAND && r.high <= 1.0 + EQUIVALENCE_BAND {
        Verdict::NoSignificantDifference
    } else {
        Verdict::Inconclusive
    }
}

/// Exact counts per request that differ by less than this share are not called different:
/// what moves them that little is the edges of a phase (a timer's wakeup, one more `epoll_wait`
/// over thousands of requests), while a change in what the server does per request moves them
/// by a whole call in the tens or hundreds a request makes.
pub const COUNT_THRESHOLD: f64 = 0.005;

/// B against A for a count per request, lower is better, that was the same in every
/// repetition of each: no statistics are needed, only [`COUNT_THRESHOLD`].
pub fn count_verdict(a: f64, b: f64) -> Verdict {
    if a == b {
        Verdict::Identical
    } else if a > 0.0 && (b / a - 1.0).abs() <= COUNT_THRESHOLD {
        Verdict::NoSignificantDifference
    } else if b < a {
        Verdict::Better
    } else {
        Verdict::Worse
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_series_have_no_difference() {
        let a = [10.0, 11.0, 9.5, 10.2, 10.1];
        let r = paired_ratio(&a, &a).unwrap();
        assert_eq!(r.ratio, 1.0);
        assert_eq!(verdict(&r), Verdict::NoSignificantDifference);
    }

    #[test]
    fn consistent_doubling_is_worse() {
        let a = [10.0, 11.0, 9.5, 10.2, 10.1];
        let b: Vec<f64> = a.iter().map(|x| x * 2.0 + 0.1).collect();
        let r = paired_ratio(&a, &b).unwrap();
        assert!(r.low > 1.9 && r.high < 2.1, "{r:?}");
        assert_eq!(verdict(&r), Verdict::Worse);
        let back = paired_ratio(&b, &a).unwrap();
        assert_eq!(verdict(&back), Verdict::Better);
    }

    #[test]
    fn noise_larger_than_difference_is_inconclusive() {
        let a = [10.0, 10.0, 10.0, 10.0];
        let b = [6.0, 15.0, 8.0, 14.0];
        let r = paired_ratio(&a, &b).unwrap();
        assert_eq!(verdict(&r), Verdict::Inconclusive);
    }

    #[test]
    fn consistent_change_within_noise_threshold_is_not_claimed() {
        let a = [10.0, 11.0, 9.5, 10.2, 10.1];
        let b: Vec<f64> = a.iter().map(|x| x * 1.01).collect();
        let r = paired_ratio(&a, &b).unwrap();
        assert!(r.low > 1.0, "the interval excludes 1: {r:?}");
        assert_eq!(verdict(&r), Verdict::NoSignificantDifference);
    }

    #[test]
    fn single_pair_never_claims_anything() {
        let r = paired_ratio(&[10.0], &[20.0]).unwrap();
        assert_eq!(verdict(&r), Verdict::Inconclusive);
    }

    #[test]
    fn counts_differ_beyond_their_threshold_only() {
        assert_eq!(count_verdict(11.0, 11.0), Verdict::Identical);
        assert_eq!(
            count_verdict(11.0, 11.00011),
            Verdict::NoSignificantDifference
        );
        assert_eq!(count_verdict(11.0, 11.1), Verdict::Worse);
        assert_eq!(count_verdict(11.0, 10.9), Verdict::Better);
        assert_eq!(count_verdict(0.0, 0.01), Verdict::Worse);
    }

    #[test]
    fn estimates_carry_a_t_interval_when_repeated() {
        let e = Estimate::of(vec![10.0, 12.0, 14.0]).unwrap();
        assert_eq!(e.mean, 12.0);
        // sd 2, n 3: 4.303 * 2 / sqrt(3)
        let half = 4.303 * 2.0 / 3f64.sqrt();
        assert!((e.low.unwrap() - (12.0 - half)).abs() < 1e-9, "{e:?}");
        assert!((e.half_width().unwrap() - half).abs() < 1e-9, "{e:?}");
        let once = Estimate::of(vec![10.0]).unwrap();
        assert_eq!((once.mean, once.low, once.high), (10.0, None, None));
        assert!(Estimate::of(Vec::new()).is_none());
    }

    #[test]
    fn t_quantiles() {
        assert_eq!(t_975(4), 2.776);
        assert_eq!(t_975(100), 1.96);
    }
}
