//! How a log line is written, in either format (`--log-format text | json`): the lines of
//! `tracing_subscriber`'s own formats, with the request a line was written in
//! (`telemetry::context`) shown as the `request` span was before it: first among the spans
//! of a text line, and as the `span` member of a JSON line written directly in the request.
//!
//! ```text
//! 2026-11-30T13:19:32.564444Z ERROR request{request_id=9f… method=POST path=/v1 resource="leads" action="get"}: genied::error: internal error error=…
//! {"timestamp":"…","level":"ERROR","fields":{"message":"internal error","error":"…"},"target":"genied::error","span":{"request_id":"9f…","method":"POST","path":"/v1","resource":"leads","action":"get","name":"request"}}
//! ```

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use super::context::{self, RequestContext};

/// The event formatter of the log layer: `Lines::text()` or `Lines::json()` (whose layer
/// must format span fields as JSON: `fmt::layer().json()`).
#[derive(Debug, Clone, Copy)]
pub struct Lines {
    json: bool,
}

impl Lines {
    pub fn text() -> Lines {
        Lines { json: false }
    }

    pub fn json() -> Lines {
        Lines { json: true }
    }
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let request = context::current();
        if self.json {
            json_line(ctx, w, event, request.as_deref())
        } else {
            text_line(ctx, w, event, request.as_deref())
        }
    }
}

fn text_line<S, N>(
    ctx: &FmtContext<'_, S, N>,
    mut w: Writer<'_>,
    event: &Event<'_>,
    request: Option<&RequestContext>,
) -> fmt::Result
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    let meta = event.metadata();
    if SystemTime.format_time(&mut w).is_err() {
        w.write_str("<unknown time>")?;
    }
    let level = meta.level().as_str();
    if w.has_ansi_escapes() {
        write!(w, " \x1b[{}m{level:>5}\x1b[0m ", colour(meta.level()))?;
    } else {
        write!(w, " {level:>5} ")?;
    }
    let mut spans = false;
    if let Some(r) = request {
        let (id, method, path) = (r.id(), r.method(), r.path());
        write!(w, "request{{request_id={id} method={method} path={path}")?;
        if let Some((resource, action)) = r.names() {
            write!(w, " resource={resource:?} action={action:?}")?;
        }
        w.write_str("}:")?;
        spans = true;
    }
    for span in ctx.event_scope().into_iter().flat_map(|s| s.from_root()) {
        w.write_str(span.metadata().name())?;
        let ext = span.extensions();
        if let Some(fields) = ext.get::<FormattedFields<N>>().filter(|f| !f.is_empty()) {
            write!(w, "{{{fields}}}")?;
        }
        w.write_char(':')?;
        spans = true;
    }
    if spans {
        w.write_char(' ')?;
    }
    write!(w, "{}: ", meta.target())?;
    ctx.format_fields(w.by_ref(), event)?;
    writeln!(w)
}

/// The ANSI colour of a level, as `tracing_subscriber` paints it.
fn colour(level: &Level) -> u8 {
    match *level {
        Level::TRACE => 35,
        Level::DEBUG => 34,
        Level::INFO => 32,
        Level::WARN => 33,
        Level::ERROR => 31,
    }
}

fn json_line<S, N>(
    ctx: &FmtContext<'_, S, N>,
    mut w: Writer<'_>,
    event: &Event<'_>,
    request: Option<&RequestContext>,
) -> fmt::Result
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    let meta = event.metadata();
    let mut time = String::new();
    if SystemTime.format_time(&mut Writer::new(&mut time)).is_err() {
        time.push_str("<unknown time>");
    }
    let mut fields = EventFields(Map::new());
    event.record(&mut fields);
    // The innermost span, as `with_current_span(true)` showed it; the request's when no other
    // span is open inside it.
    let span = match ctx.event_scope().and_then(|mut s| s.next()) {
        Some(span) => {
            let ext = span.extensions();
            let mut m = ext
                .get::<FormattedFields<N>>()
                .and_then(|f| serde_json::from_str::<Map<String, Value>>(f).ok())
                .unwrap_or_default();
            m.insert("name".into(), span.metadata().name().into());
            Some(m)
        }
        None => request.map(|r| {
            let mut m = Map::new();
            m.insert("request_id".into(), r.id().into());
            m.insert("method".into(), r.method().into());
            m.insert("path".into(), r.path().into());
            if let Some((resource, action)) = r.names() {
                m.insert("resource".into(), resource.into());
                m.insert("action".into(), action.into());
            }
            m.insert("name".into(), "request".into());
            m
        }),
    };
    let text = |s: &str| Value::from(s).to_string();
    write!(
        w,
        "{{\"timestamp\":{},\"level\":{},\"fields\":{},\"target\":{}",
        text(&time),
        text(meta.level().as_str()),
        Value::Object(fields.0),
        text(meta.target())
    )?;
    if let Some(span) = span {
        write!(w, ",\"span\":{}", Value::Object(span))?;
    }
    writeln!(w, "}}")
}

/// An event's fields as JSON values, as `tracing_subscriber`'s JSON format records them.
struct EventFields(Map<String, Value>);

impl Visit for EventFields {
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.insert(f.name().into(), v.into());
    }
    fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
        self.0.insert(f.name().into(), format!("{v:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::{Arc, Mutex};

    use axum::http::{HeaderValue, Method};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// The lines `emit` logs through a log layer with `Lines` in `format`.
    fn lines(json: bool, emit: impl FnOnce()) -> Vec<String> {
        let out = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = out.clone();
        let writer = move || -> Box<dyn std::io::Write> {
            struct To(Arc<Mutex<Vec<u8>>>);
            impl std::io::Write for To {
                fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                    self.0.lock().unwrap().extend_from_slice(b);
                    Ok(b.len())
                }
                fn flush(&mut self) -> std::io::Result<()> {
                    Ok(())
                }
            }
            Box::new(To(sink.clone()))
        };
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(writer);
        if json {
            let s = tracing_subscriber::registry().with(layer.json().event_format(Lines::json()));
            tracing::subscriber::with_default(s, emit);
        } else {
            let s = tracing_subscriber::registry().with(layer.event_format(Lines::text()));
            tracing::subscriber::with_default(s, emit);
        }
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_string).collect()
    }

    /// One warning outside any request, one inside a request (named), one inside a span
    /// inside a request.
    fn emit() {
        tracing::warn!(n = 3, "outside");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let id = HeaderValue::from_static("req-7");
        let c = RequestContext::new(Some(&id), &Method::POST, &"/v1".parse().unwrap());
        rt.block_on(context::scope(Some(c), async {
            context::name("leads", Cow::Borrowed("get"));
            tracing::error!(error = "boom", "inside");
            tracing::info_span!("job", kind = "k").in_scope(|| tracing::info!("nested"));
        }));
    }

    #[test]
    fn a_text_line_shows_the_request_first_among_its_spans() {
        let l = lines(false, emit);
        assert_eq!(l.len(), 3, "{l:?}");
        assert!(
            l[0].ends_with("  WARN genied::telemetry::logs::tests: outside n=3"),
            "{}",
            l[0]
        );
        assert!(
            l[1].ends_with(
                " ERROR request{request_id=req-7 method=POST path=/v1 resource=\"leads\" action=\"get\"}: \
                 genied::telemetry::logs::tests: inside error=\"boom\""
            ),
            "{}",
            l[1]
        );
        assert!(
            l[2].contains(r#"  INFO request{request_id=req-7 method=POST path=/v1 resource="leads" action="get"}:job{kind="k"}: genied"#),
            "{}",
            l[2]
        );
        // The timestamp first, as tracing_subscriber writes it (RFC 3339, microseconds, UTC).
        let ts = l[0].split(' ').next().unwrap();
        assert!(
            chrono::DateTime::parse_from_rfc3339(ts).is_ok() && ts.ends_with('Z'),
            "{ts}"
        );
    }

    #[test]
    fn a_json_line_has_the_request_as_its_span() {
        let l: Vec<Value> = lines(true, emit)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(l.len(), 3, "{l:?}");
        assert_eq!(l[0]["level"], "WARN");
        assert_eq!(
            l[0]["fields"],
            serde_json::json!({"message": "outside", "n": 3})
        );
        assert_eq!(l[0]["target"], "genied::telemetry::logs::tests");
        assert!(l[0].get("span").is_none());
        assert_eq!(
            l[1]["fields"],
            serde_json::json!({"message": "inside", "error": "boom"})
        );
        assert_eq!(
            l[1]["span"],
            serde_json::json!({"request_id": "req-7", "method": "POST", "path": "/v1",
                "resource": "leads", "action": "get", "name": "request"})
        );
        assert_eq!(
            l[2]["span"],
            serde_json::json!({"kind": "k", "name": "job"})
        );
        assert!(chrono::DateTime::parse_from_rfc3339(l[0]["timestamp"].as_str().unwrap()).is_ok());
    }
}
