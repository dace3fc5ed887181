//! Waiting for something that nobody announces (a socket file appearing, a container reaching
//! Running, a record being removed): look, and look again after a pause that grows, until a
//! deadline. One loop for every such wait, so each has its deadline and none spins.

use std::time::{Duration, Instant};

/// The pauses between two looks: `first`, doubling after each look up to `max` (`first == max`:
/// a fixed pace).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    /// The first pause.
    pub first: Duration,
    /// The longest pause.
    pub max: Duration,
}

impl Backoff {
    /// The same pause `every` time.
    pub(crate) const fn fixed(every: Duration) -> Backoff {
        Backoff {
            first: every,
            max: every,
        }
    }

    /// A pause of `first`, doubling up to `max`.
    pub(crate) const fn doubling(first: Duration, max: Duration) -> Backoff {
        Backoff { first, max }
    }
}

/// A deadline and the pauses before it: the loop of a wait whose looks keep state of their own
/// ([`poll_until`] is the same loop around a closure).
#[derive(Debug)]
pub(crate) struct Pacer {
    deadline: Instant,
    pause: Duration,
    backoff: Backoff,
}

impl Pacer {
    /// A wait of at most `patience` from now, paced by `backoff`.
    pub(crate) fn new(patience: Duration, backoff: Backoff) -> Pacer {
        Pacer {
            deadline: Instant::now() + patience,
            pause: backoff.first,
            backoff,
        }
    }

    /// Waits for the next look: `false` (at once) when the deadline has passed, else `true` after
    /// the next pause, cut short at the deadline (where one more look is taken).
    pub(crate) async fn pause(&mut self) -> bool {
        match self.next() {
            Some(p) => {
                tokio::time::sleep(p).await;
                true
            }
            None => false,
        }
    }

    /// [`Pacer::pause`] for a thread without an async runtime (the owner watcher): the pause
    /// blocks the thread.
    pub(crate) fn pause_blocking(&mut self) -> bool {
        match self.next() {
            Some(p) => {
                std::thread::sleep(p);
                true
            }
            None => false,
        }
    }

    /// The next pause, `None` once the deadline has passed.
    fn next(&mut self) -> Option<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let p = self.pause.min(left);
        self.pause = (self.pause * 2).min(self.backoff.max);
        Some(p)
    }
}

/// Calls `check` until it yields a value, for at most `patience`: the first look at once, the
/// next after `backoff`'s pauses (the last one cut short at the deadline, where one more look is
/// taken). Returns `Ok(Some(value))`, `Ok(None)` when the deadline passed first (the caller
/// says what did not happen in time, and what that means), or the first error of `check`,
/// which ends the wait.
pub(crate) async fn poll_until<T, E, F>(
    patience: Duration,
    backoff: Backoff,
    mut check: impl FnMut() -> F,
) -> Result<Option<T>, E>
where
    F: std::future::Future<Output = Result<Option<T>, E>>,
{
    let mut pacer = Pacer::new(patience, backoff);
    loop {
        if let Some(v) = check().await? {
            return Ok(Some(v));
        }
        if !pacer.pause().await {
            return Ok(None);
        }
    }
}

/// [`poll_until`] for a thread without an async runtime (the owner watcher): the pauses block
/// the thread.
pub(crate) fn poll_until_blocking<T, E>(
    patience: Duration,
    backoff: Backoff,
    mut check: impl FnMut() -> Result<Option<T>, E>,
) -> Result<Option<T>, E> {
    let mut pacer = Pacer::new(patience, backoff);
    loop {
        if let Some(v) = check()? {
            return Ok(Some(v));
        }
        if !pacer.pause_blocking() {
            return Ok(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_value_ends_the_wait_and_the_deadline_ends_it_with_none() {
        let mut looks = 0;
        let got: Result<_, ()> = poll_until(
            Duration::from_secs(10),
            Backoff::fixed(Duration::from_millis(1)),
            || {
                looks += 1;
                let n = looks;
                async move { Ok((n == 3).then_some(n)) }
            },
        )
        .await;
        assert_eq!(got, Ok(Some(3)));
        let started = Instant::now();
        let never: Result<Option<()>, ()> = poll_until(
            Duration::from_millis(50),
            Backoff::doubling(Duration::from_millis(1), Duration::from_millis(20)),
            || async { Ok(None) },
        )
        .await;
        assert_eq!(never, Ok(None));
        assert!(started.elapsed() >= Duration::from_millis(50));
        let failed: Result<Option<()>, &str> = poll_until(
            Duration::from_secs(10),
            Backoff::fixed(Duration::ZERO),
            || async { Err("no") },
        )
        .await;
        assert_eq!(failed, Err("no"));
    }

    #[test]
    fn the_blocking_twin_waits_the_same_way() {
        let mut looks = 0;
        let got: Result<_, ()> = poll_until_blocking(
            Duration::from_secs(10),
            Backoff::doubling(Duration::from_millis(1), Duration::from_millis(4)),
            || {
                looks += 1;
                Ok((looks == 4).then_some(()))
            },
        );
        assert_eq!((got, looks), (Ok(Some(())), 4));
        let started = Instant::now();
        let never: Result<Option<()>, ()> = poll_until_blocking(
            Duration::from_millis(30),
            Backoff::fixed(Duration::from_millis(5)),
            || Ok(None),
        );
        assert_eq!(never, Ok(None));
        assert!(started.elapsed() >= Duration::from_millis(30));
    }
}
