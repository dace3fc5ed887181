//! PID 1's thread for blocking work (killing an exec's tree, sampling its statistics), made
//! when the agent starts: at the sandbox's process limit a new thread fails (`clone(2)` says
//! `EAGAIN`), and tokio's `spawn_blocking` then panics the task that asked, which would drop the
//! caller's connection without a word; the kills of a command that filled the limit are the
//! work that must still be done there.

use std::sync::mpsc;
use std::sync::OnceLock;

type Job = Box<dyn FnOnce() + Send>;

static WORKER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();

/// Makes the thread (once; later calls do nothing). Errors: the thread could not be made.
pub(crate) fn start() -> std::io::Result<()> {
    if WORKER.get().is_some() {
        return Ok(());
    }
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("h9sandbox-worker".into())
        .spawn(move || {
            for job in rx {
                // One job's panic must not take the thread, and every later job, with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
        })?;
    let _ = WORKER.set(tx);
    Ok(())
}

/// Runs `f` on the thread (jobs run one after another, in the order given) and returns its
/// result; without the thread ([`start`] not called or failed), on tokio's blocking pool.
/// `None`: `f` panicked.
pub(crate) async fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let Some(worker) = WORKER.get() else {
        return tokio::task::spawn_blocking(f).await.ok();
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    worker
        .send(Box::new(move || {
            let _ = tx.send(f());
        }))
        .ok()?;
    rx.await.ok()
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn jobs_run_on_the_thread_in_order_and_a_panic_spares_it() {
        super::start().unwrap();
        let name = super::run(|| std::thread::current().name().map(String::from)).await;
        assert_eq!(name, Some(Some("h9sandbox-worker".to_string())));
        assert_eq!(
            super::run(|| -> u8 { panic!("a job that panics") }).await,
            None
        );
        assert_eq!(super::run(|| 7).await, Some(7));
    }
}
