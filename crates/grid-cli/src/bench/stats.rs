//! Statistics the benchmarks print: nearest-rank percentiles of step times, and the least
//! squares line of a series (slope, its 95% confidence interval, R²).

use serde_json::{json, Value};

/// Percentiles of a set of step times.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub n: usize,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Percentiles {
    /// From nanosecond times in any order; microseconds rounded to 0.01.
    pub fn of(mut ns: Vec<u64>) -> Percentiles {
        ns.sort_unstable();
        let at = |p: usize| -> f64 {
            if ns.is_empty() {
                return 0.0;
            }
            let rank = (p * ns.len()).div_ceil(100).clamp(1, ns.len());
            round_us(ns[rank - 1])
        };
        Percentiles {
            n: ns.len(),
            p50_us: at(50),
            p90_us: at(90),
            p99_us: at(99),
            max_us: ns.last().map_or(0.0, |&x| round_us(x)),
        }
    }

    pub fn to_json(self) -> Value {
        json!({"p50_us": self.p50_us, "p90_us": self.p90_us, "p99_us": self.p99_us,
               "max_us": self.max_us})
    }
}

fn round_us(ns: u64) -> f64 {
    (ns as f64 / 10.0).round() / 100.0
}

/// The least squares line `y = a + b·x`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fit {
    pub slope: f64,
    /// Half-width of the 95% confidence interval of the slope (normal quantile: the series
    /// are thousands of points long).
    pub slope_ci95: f64,
    pub intercept: f64,
    pub r2: f64,
}

/// Fits `ys` against their positions `0..n`. `None` under 3 points.
pub fn fit_by_position(ys: &[f64]) -> Option<Fit> {
    let n = ys.len();
    if n < 3 {
        return None;
    }
    let nf = n as f64;
    let mx = (nf - 1.0) / 2.0;
    let my = ys.iter().sum::<f64>() / nf;
    let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
    for (i, &y) in ys.iter().enumerate() {
        let dx = i as f64 - mx;
        let dy = y - my;
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let sse = (syy - slope * sxy).max(0.0);
    let se = (sse / (nf - 2.0) / sxx).sqrt();
    let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
    Some(Fit {
        slope,
        slope_ci95: 1.96 * se,
        intercept,
        r2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_in_microseconds() {
        let p = Percentiles::of((1..=100).rev().map(|i| i * 1000).collect());
        assert_eq!(
            (p.p50_us, p.p90_us, p.p99_us, p.max_us),
            (50.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(Percentiles::of(vec![1234]).p99_us, 1.23);
        assert_eq!(Percentiles::of(Vec::new()), Percentiles::default());
    }

    #[test]
    fn fit_recovers_a_line_and_its_noise() {
        let ys: Vec<f64> = (0..1000).map(|i| 3.0 + 0.5 * i as f64).collect();
        let f = fit_by_position(&ys).unwrap();
        assert!((f.slope - 0.5).abs() < 1e-12 && (f.intercept - 3.0).abs() < 1e-9);
        assert!(f.slope_ci95 < 1e-9 && (f.r2 - 1.0).abs() < 1e-12);
        // Alternating noise around a flat line: slope near 0, interval covering it.
        let flat: Vec<f64> = (0..1000)
            .map(|i| if i % 2 == 0 { 1.0 } else { 3.0 })
            .collect();
        let g = fit_by_position(&flat).unwrap();
        assert!(g.slope.abs() <= g.slope_ci95 && g.r2 < 0.01);
        assert!(fit_by_position(&[1.0, 2.0]).is_none());
    }
}
