//! The one backoff of the operator's writes (jobs, Workloads and queue
//! status, pods given their places): exponential, doubling from a first
//! wait to a cap, computed by `backon`. Each writer keeps its own count of
//! failures in a row per object and asks [`WriteBackoff::delay`] how long to wait.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// A first wait, doubled per failure in a row up to a cap.
#[derive(Clone, Copy, Debug)]
pub struct WriteBackoff {
    pub first: Duration,
    pub max: Duration,
}

/// Job writes, Workload and queue status writes.
pub const WRITES: WriteBackoff = WriteBackoff {
    first: Duration::from_millis(500),
    max: Duration::from_secs(30),
};

impl WriteBackoff {
    /// How long to wait after `failures` failures in a row (the first
    /// failure waits [`WriteBackoff::first`]).
    pub fn delay(&self, failures: u32) -> Duration {
        ExponentialBuilder::new()
            .with_min_delay(self.first)
            .with_max_delay(self.max)
            .with_factor(2.0)
            .without_max_times()
            .build()
            .nth(failures.saturating_sub(1).min(32) as usize)
            .unwrap_or(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_from_the_first_to_the_cap() {
        let policy = WriteBackoff {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
        };
        let secs: Vec<u64> = (1..=9).map(|n| policy.delay(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(policy.delay(0), policy.first);
        assert_eq!(policy.delay(u32::MAX), policy.max);
        let ms: Vec<u128> = (1..=8).map(|n| WRITES.delay(n).as_millis()).collect();
        assert_eq!(ms, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]);
    }
}
