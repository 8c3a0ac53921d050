//! Which live generations step in a tick: the least served first.
//!
//! A tick steps its generations one after another, so a tick lasts as long as all their
//! steps together. A generation over a wide language (a mask or a reserve search among
//! tens of thousands of names), or one deep into a long answer, would otherwise make every
//! other generation of its loop wait for its steps at every tick. So each generation's
//! steps are timed ([`Service::attained`]), and a generation that has taken more than a
//! slice beyond the least-served live generation is *held*: it skips ticks, up to
//! [`HOLD_MAX`] at a time, until the others have caught up or the time is up. A short ask
//! that arrives beside long ones therefore runs nearly as it would alone, and the long ones
//! still step at least once per [`HOLD_MAX`].
//!
//! Invariants: the least-served generation is never held, so every tick steps at least one
//! generation; holding changes when a generation steps, never what it writes (its steps
//! read its own state only; see the decode tests that compare outputs with and without).

use std::time::{Duration, Instant};

/// The longest a generation is held before it steps anyway.
pub(crate) const HOLD_MAX: Duration = Duration::from_secs(1);

/// A live generation's service so far.
#[derive(Clone, Debug, Default)]
pub(super) struct Service {
    /// The time its steps (mask, plan, sampled token's check) have taken.
    pub(crate) attained: Duration,
    /// Since when it has been held, while it is.
    held_since: Option<Instant>,
}

/// Whether each generation is held this tick (see the module documentation): one that has
/// attained more than `slice` beyond the least-served of `services`, held for less than
/// [`HOLD_MAX`] so far at `now`.
pub(super) fn holds(services: &mut [&mut Service], slice: Duration, now: Instant) -> Vec<bool> {
    let least = services.iter().map(|s| s.attained).min();
    services
        .iter_mut()
        .map(|s| {
            let over = least.is_some_and(|m| s.attained > m.saturating_add(slice));
            let held = over && {
                let since = *s.held_since.get_or_insert(now);
                now.saturating_duration_since(since) < HOLD_MAX
            };
            if !held {
                s.held_since = None;
            }
            held
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(ms: &[u64]) -> Vec<Service> {
        ms.iter()
            .map(|&m| Service {
                attained: Duration::from_millis(m),
                held_since: None,
            })
            .collect()
    }

    fn held(services: &mut [Service], slice_ms: u64, now: Instant) -> Vec<bool> {
        let mut refs: Vec<&mut Service> = services.iter_mut().collect();
        holds(&mut refs, Duration::from_millis(slice_ms), now)
    }

    #[test]
    fn the_least_served_is_never_held() {
        let now = Instant::now();
        assert_eq!(held(&mut served(&[5]), 0, now), [false]);
        assert_eq!(
            held(&mut served(&[900, 3, 40, 20]), 20, now),
            [true, false, true, false]
        );
        assert_eq!(held(&mut served(&[7, 7, 7]), 0, now), [false, false, false]);
        assert!(held(&mut [], 20, now).is_empty());
    }

    #[test]
    fn a_held_generation_steps_once_held_for_hold_max() {
        let start = Instant::now();
        let mut s = served(&[500, 0]);
        assert_eq!(held(&mut s, 20, start), [true, false]);
        assert_eq!(held(&mut s, 20, start + HOLD_MAX / 2), [true, false]);
        // Its hold is over: it steps this tick, and a new hold starts at the next.
        assert_eq!(held(&mut s, 20, start + HOLD_MAX), [false, false]);
        assert_eq!(held(&mut s, 20, start + HOLD_MAX * 2), [true, false]);
        // Once the other has caught up, it is not held at all.
        s[1].attained = Duration::from_millis(490);
        assert_eq!(held(&mut s, 20, start + HOLD_MAX * 2), [false, false]);
    }
}
