//! A fixed-bucket histogram of atomics, for what the writers measure per
//! batch. The store depends on no metrics crate: the daemon reads a
//! `Snapshot` when it is scraped and exports it in its own format.
//!
//! Values are whole units (nanoseconds, requests), so the sum is exact and
//! `observe` is two relaxed atomic adds: no lock on the writer's path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (inclusive) of the latency buckets, in nanoseconds: 1-2-5
/// steps from 50 µs (a sync on a fast device) to 10 s (past the daemon's
/// 3 s commit budget: a batch that slow is an outage, not a latency).
pub const LATENCY_BOUNDS_NS: [u64; 17] = [
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Upper bounds (inclusive) of the requests-per-batch buckets: powers of
/// two up to the writers' `BATCH_MAX` (4096).
pub const BATCH_BOUNDS: [u64; 13] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// Counts of observations per bucket and their sum. A value lands in the
/// first bucket whose bound is at least the value (Prometheus's `le`); one
/// above every bound lands in the last, unbounded bucket.
pub struct Histogram {
    bounds: &'static [u64],
    /// One per bound, then the unbounded bucket.
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Histogram {
    /// A histogram over `bounds`, which must ascend strictly.
    pub fn new(bounds: &'static [u64]) -> Histogram {
        assert!(bounds.windows(2).all(|w| w[0] < w[1]), "histogram bounds must ascend strictly");
        Histogram { bounds, counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(), sum: AtomicU64::new(0) }
    }

    pub fn observe(&self, value: u64) {
        let bucket = self.bounds.partition_point(|&bound| bound < value);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Observes a duration in nanoseconds (saturating past ~584 years).
    pub fn observe_duration(&self, d: Duration) {
        self.observe(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// What the histogram holds now. Observations running meanwhile may be
    /// in the counts and not yet in the sum (or the other way round); the
    /// count is the counts' total, so a scrape's buckets always add up to it.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            bounds: self.bounds,
            counts: self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// A histogram's counts at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The buckets' inclusive upper bounds; the last bucket has none.
    pub bounds: &'static [u64],
    /// Observations per bucket (not cumulative): `bounds.len() + 1` of them.
    pub counts: Vec<u64>,
    pub sum: u64,
}

impl Snapshot {
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_equal_to_a_bound_lands_in_that_bucket() {
        static BOUNDS: [u64; 3] = [10, 20, 40];
        let h = Histogram::new(&BOUNDS);
        for v in [0, 10, 11, 20, 40, 41, u64::MAX / 2] {
            h.observe(v);
        }
        let s = h.snapshot();
        // ≤10: 0, 10; ≤20: 11, 20; ≤40: 40; above: 41, MAX/2.
        assert_eq!(s.counts, vec![2, 2, 1, 2]);
        assert_eq!(s.count(), 7);
        assert_eq!(s.sum, 10 + 11 + 20 + 40 + 41 + u64::MAX / 2);
        assert_eq!(s.bounds, &BOUNDS);
    }

    #[test]
    fn durations_are_counted_in_nanoseconds() {
        let h = Histogram::new(&LATENCY_BOUNDS_NS);
        h.observe_duration(Duration::from_micros(50));
        h.observe_duration(Duration::from_micros(51));
        h.observe_duration(Duration::from_secs(60));
        let s = h.snapshot();
        assert_eq!((s.counts[0], s.counts[1], s.counts[LATENCY_BOUNDS_NS.len()]), (1, 1, 1));
        assert_eq!(s.sum, 101_000 + 60_000_000_000);
        assert_eq!(s.count(), 3);
    }

    #[test]
    fn the_batch_buckets_reach_the_largest_batch() {
        let h = Histogram::new(&BATCH_BOUNDS);
        h.observe(crate::writer::BATCH_MAX as u64);
        assert_eq!(h.snapshot().counts[BATCH_BOUNDS.len() - 1], 1, "a full batch is in the last bounded bucket");
    }

    #[test]
    #[should_panic(expected = "ascend")]
    fn bounds_out_of_order_are_refused() {
        static BOUNDS: [u64; 2] = [2, 2];
        Histogram::new(&BOUNDS);
    }
}
