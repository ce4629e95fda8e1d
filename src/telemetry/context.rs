//! The request a log line is written in, kept without a `tracing` span.
//!
//! A span a request cost a cheap request about a sixth of its CPU: the log layer formats the
//! span's fields into a string when it is made and again as each is recorded, whether or not
//! anything is logged inside it, and the span is entered and left at every poll
//! (docs/performance.md, round thirty-nine). While traces are exported the span stays, since
//! it is the trace (`http::router`); otherwise the request's id, method, path, resource and
//! action live here, in a task-local that the log formatter (`telemetry::logs`) reads only
//! when a line is written. Work a request hands to another thread takes it along: `current`
//! where the work is handed over, `within` where it runs (`db::run_blocking`, the writer).

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use axum::http::{HeaderValue, Method, Uri};

tokio::task_local! {
    // `None` inside a request served with a span instead (traces exported).
    static REQUEST: Option<Arc<RequestContext>>;
}

/// A future run as a request (`scope`).
pub type Scoped<F> = tokio::task::futures::TaskLocalFuture<Option<Arc<RequestContext>>, F>;

/// What a log line says of the request it was written in.
#[derive(Debug)]
pub struct RequestContext {
    id: HeaderValue,
    method: Method,
    uri: Uri,
    /// The resource and action of an envelope request, once they are known.
    names: OnceLock<(&'static str, Cow<'static, str>)>,
}

impl RequestContext {
    pub fn new(id: Option<&HeaderValue>, method: &Method, uri: &Uri) -> Arc<RequestContext> {
        Arc::new(RequestContext {
            id: id.cloned().unwrap_or(HeaderValue::from_static("-")),
            method: method.clone(),
            uri: uri.clone(),
            names: OnceLock::new(),
        })
    }

    pub fn id(&self) -> &str {
        self.id.to_str().unwrap_or("-")
    }

    pub fn method(&self) -> &str {
        self.method.as_str()
    }

    pub fn path(&self) -> &str {
        self.uri.path()
    }

    /// The resource and action, for an envelope request that got as far as naming them.
    pub fn names(&self) -> Option<(&'static str, &str)> {
        self.names.get().map(|(r, a)| (*r, a.as_ref()))
    }
}

/// Runs `f` as the request `context`: log lines written while it is polled say so.
pub fn scope<F: Future>(context: Option<Arc<RequestContext>>, f: F) -> Scoped<F> {
    REQUEST.scope(context, f)
}

/// The request being served here: to hand to another thread with the work (`within`), and
/// for the log formatter (a line logged costs it one reference count).
pub fn current() -> Option<Arc<RequestContext>> {
    REQUEST.try_with(Clone::clone).ok().flatten()
}

/// Runs `f` as the request `context` (from `current`), on whatever thread this is.
pub fn within<R>(context: Option<Arc<RequestContext>>, f: impl FnOnce() -> R) -> R {
    match context {
        Some(c) => REQUEST.sync_scope(Some(c), f),
        None => f(),
    }
}

/// Records the resource and action of the request being served (the first naming stays).
pub fn name(resource: &'static str, action: Cow<'static, str>) {
    let _ = REQUEST.try_with(|c| c.as_ref().map(|c| c.names.set((resource, action))));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_is_seen_within_its_scope_and_on_the_thread_it_is_handed_to() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let id = HeaderValue::from_static("req-1");
        let c = RequestContext::new(Some(&id), &Method::POST, &"/v1?x=1".parse().unwrap());
        assert!(current().is_none());
        let seen = rt.block_on(scope(Some(c), async {
            name("leads", Cow::Borrowed("get"));
            name("genies", Cow::Borrowed("ignored"));
            let here = current().expect("in scope");
            std::thread::spawn(move || {
                within(Some(here), || {
                    let c = current().expect("handed over");
                    (
                        c.id().to_string(),
                        c.method().to_string(),
                        c.path().to_string(),
                        c.names().map(|(r, a)| (r, a.to_string())),
                    )
                })
            })
            .join()
            .unwrap()
        }));
        assert_eq!(
            seen,
            (
                "req-1".into(),
                "POST".into(),
                "/v1".into(),
                Some(("leads", "get".into()))
            )
        );
        assert!(current().is_none());
    }
}
