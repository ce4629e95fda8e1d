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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

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
    task: AtomicWaker,
}

impl<F: Future> Repoll<F> {
    pub fn new(inner: F) -> Repoll<F> {
        let state = Arc::new(State {
            polling: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            task: AtomicWaker::new(),
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
        self.task.wake();
    }
}

impl<F: Future> Future for Repoll<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.state.task.register(cx.waker());
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

    /// One poll of a `Selfish` inside `Repoll`: its answer, the wakes the runtime got, and
    /// how many times the inner future was polled.
    fn poll_selfish(selfish: usize) -> (Poll<usize>, usize, usize) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut f = Repoll::new(Selfish { selfish, polls: 0 });
        let r = Pin::new(&mut f).poll(&mut Context::from_waker(&waker));
        (r, count.0.load(SeqCst), f.inner.polls)
    }

    #[test]
    fn a_wake_during_the_poll_polls_again_without_the_runtime() {
        assert_eq!(poll_selfish(2), (Poll::Ready(3), 0, 3));
    }

    #[test]
    fn a_future_that_keeps_waking_itself_is_handed_back_to_the_runtime() {
        assert_eq!(poll_selfish(100), (Poll::Pending, 1, REPOLLS));
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
