//! A request from outside to stop what runs (Ctrl-C, SIGTERM), which a run answers by
//! rolling back and recording itself as interrupted instead of being cut off mid-way.
//!
//! The library never installs signal handlers: whoever embeds it decides what stops a
//! run (the CLI fires one on SIGINT and SIGTERM) and hands the same [`Interrupt`] to
//! the runs it starts.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// A cloneable flag that, once fired, stays fired; every clone sees it.
#[derive(Clone, Debug, Default)]
pub struct Interrupt {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    fired: AtomicBool,
    notify: Notify,
    /// Work that answers the interrupt itself (see [`Interrupt::answering`]).
    answering: AtomicUsize,
    /// Work past the point of no return (see [`Interrupt::mark_committing`]).
    committing: AtomicBool,
}

/// Held by work that answers an interrupt itself (rolls back, records that it was
/// interrupted): while one is held, whoever fired it waits for that answer instead of
/// dropping the work.
#[derive(Debug)]
pub struct Answering {
    inner: Arc<Inner>,
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.inner.answering.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The span of one piece of work that may commit (a run): from
/// [`Interrupt::mark_committing`] to the end of this span, an interrupt no longer stops
/// the work, and whoever fires one can say so rather than promise a rollback.
#[derive(Debug)]
pub struct CommitScope {
    inner: Arc<Inner>,
}

impl Drop for CommitScope {
    fn drop(&mut self) {
        self.inner.committing.store(false, Ordering::SeqCst);
    }
}

impl Interrupt {
    /// A flag not fired yet.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Asks everything that holds a clone to stop.
    pub fn fire(&self) {
        self.inner.fired.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    /// Whether [`Interrupt::fire`] was called.
    pub fn is_fired(&self) -> bool {
        self.inner.fired.load(Ordering::SeqCst)
    }

    /// Marks work that answers this interrupt itself, until the guard is dropped.
    pub fn answering(&self) -> Answering {
        self.inner.answering.fetch_add(1, Ordering::SeqCst);
        Answering {
            inner: self.inner.clone(),
        }
    }

    /// Opens the span of work that may commit; it ends, and the mark with it, when the
    /// guard is dropped (after the work has returned, so a signal between the commit
    /// and the end of the work is not promised a rollback).
    pub fn commit_scope(&self) -> CommitScope {
        self.inner.committing.store(false, Ordering::SeqCst);
        CommitScope {
            inner: self.inner.clone(),
        }
    }

    /// Marks the work of the open [`CommitScope`] as committing: past the point of no
    /// return.
    pub fn mark_committing(&self) {
        self.inner.committing.store(true, Ordering::SeqCst);
    }

    /// Whether the work under way has begun to commit: an interrupt fired now is
    /// answered by finishing, not by rolling back.
    pub fn is_committing(&self) -> bool {
        self.inner.committing.load(Ordering::SeqCst)
    }

    /// Whether some work holds an [`Answering`] guard now.
    pub fn is_answered(&self) -> bool {
        self.inner.answering.load(Ordering::SeqCst) > 0
    }

    /// Completes once fired (at once if it already was).
    pub async fn fired(&self) {
        loop {
            // Registered before the flag is read, so a fire in between is not missed.
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_fired() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Interrupt;
    use std::time::Duration;

    #[tokio::test]
    async fn a_fire_reaches_every_clone_waiting_or_not() {
        let i = Interrupt::new();
        let waiting = i.clone();
        let waiter = tokio::spawn(async move { waiting.fired().await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!i.is_fired());
        i.fire();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter wakes")
            .expect("no panic");
        assert!(!i.is_answered());
        let guard = i.answering();
        assert!(i.clone().is_answered(), "seen by every clone");
        drop(guard);
        assert!(!i.is_answered());
        let late = i.clone();
        tokio::time::timeout(Duration::from_secs(5), late.fired())
            .await
            .expect("fired before it waited: returns at once");
    }
}
