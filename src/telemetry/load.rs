//! How many HTTP requests the service is answering right now: kept by a layer on every
//! request (`http::router`), read by the database to choose where a write commits
//! (`db::Lite::write_here`: on the caller's thread when it is the only request, handing the
//! thread's other work away first when it is not). One atomic add and one subtract a request.

use std::sync::atomic::{AtomicUsize, Ordering};

static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Counts one request in flight until it is dropped (also when the request is cancelled).
#[must_use = "the request counts only while the guard lives"]
pub struct Request(());

impl Request {
    pub fn begin() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        Request(())
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Requests begun and not yet answered, this one included when asked from inside one.
pub fn requests_in_flight() -> usize {
    IN_FLIGHT.load(Ordering::Relaxed)
}
