//! Polling a connection again when it wakes itself.
//!
//! hyper's HTTP/1 connection wakes its own task while tokio is polling it: the request body
//! travels from the connection's reader to the handler through a channel inside the same
//! task, and the handler's read wakes the reader's side. tokio takes a wake that arrives
//! during a poll as a yield: the task goes to the back of the worker's queue and another
//! worker is woken to take it, so at one connection a request with a body woke the second
//! worker thread as well (two context switches a request instead of one, some 25 µs of CPU
//! on the 2-core VM; docs/performance.md, round eleven). [`Repoll`] keeps such wakes inside:
//! a wake during the poll only marks the task, and the task is polled again at once; a wake
//! at any other time (a socket ready, a timer) goes to tokio as it would have.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Polls in a row for wakes during polls before the wake goes to tokio after all, so a
/// future that keeps waking itself still lets the worker's other tasks run.
const REPOLLS: usize = 4;

pub struct Repoll<F> {
    inner: Pin<Box<F>>,
    state: Arc<State>,
    /// `state` as a waker, made once.
    own: Waker,
}

struct State {
    /// Inside `inner.poll`.
    polling: AtomicBool,
    /// Woken while `polling`.
    woken: AtomicBool,
    /// The runtime's waker of the task, from its latest poll.
    task: Mutex<Option<Waker>>,
}

impl<F: Future> Repoll<F> {
    pub fn new(inner: F) -> Repoll<F> {
        let state = Arc::new(State {
            polling: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            task: Mutex::new(None),
        });
        Repoll {
            inner: Box::pin(inner),
            own: Waker::from(state.clone()),
            state,
        }
    }
}

impl Wake for State {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.polling.load(SeqCst) {
            self.woken.store(true, SeqCst);
            // Still polling: the poll loop sees the mark when the poll returns. Otherwise
            // it may have looked already, and the runtime must hear of it.
            if self.polling.load(SeqCst) {
                return;
            }
        }
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = task.as_ref() {
            w.wake_by_ref();
        }
    }
}

impl<F: Future> Future for Repoll<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        {
            let mut task = self.state.task.lock().unwrap_or_else(|p| p.into_inner());
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        let this = &mut *self;
        let mut own = Context::from_waker(&this.own);
        for _ in 0..REPOLLS {
            this.state.woken.store(false, SeqCst);
            this.state.polling.store(true, SeqCst);
            let r = this.inner.as_mut().poll(&mut own);
            this.state.polling.store(false, SeqCst);
            if r.is_ready() || !this.state.woken.swap(false, SeqCst) {
                return r;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts the wakes the runtime's side of a task gets.
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// Wakes itself in each of its first `selfish` polls, then is ready.
    struct Selfish {
        selfish: usize,
        polls: usize,
    }
    impl Future for Selfish {
        type Output = usize;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            self.polls += 1;
            if self.polls > self.selfish {
                return Poll::Ready(self.polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[test]
    fn a_wake_during_the_poll_polls_again_without_the_runtime() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut f = Repoll::new(Selfish {
            selfish: 2,
            polls: 0,
        });
        let r = Pin::new(&mut f).poll(&mut Context::from_waker(&waker));
        assert_eq!(r, Poll::Ready(3));
        assert_eq!(count.0.load(SeqCst), 0);
    }

    #[test]
    fn a_future_that_keeps_waking_itself_is_handed_back_to_the_runtime() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut f = Repoll::new(Selfish {
            selfish: 100,
            polls: 0,
        });
        let r = Pin::new(&mut f).poll(&mut Context::from_waker(&waker));
        assert_eq!(r, Poll::Pending);
        assert_eq!(count.0.load(SeqCst), 1);
        assert_eq!(f.inner.polls, REPOLLS);
    }

    #[test]
    fn a_wake_after_the_poll_reaches_the_runtime() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        // Pending until its stored waker is woken from outside.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let mut f = Repoll::new(rx);
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut f).poll(&mut cx).is_pending());
        assert_eq!(count.0.load(SeqCst), 0);
        std::thread::spawn(move || tx.send(()))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(count.0.load(SeqCst), 1);
        assert!(Pin::new(&mut f).poll(&mut cx).is_ready());
    }
}
