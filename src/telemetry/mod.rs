//! What the service tells an operator about itself: its log lines (`logs`) and the request
//! each is written in (`context`), Prometheus metrics (`prom`), OpenTelemetry traces
//! (`trace`) and the requests in flight (`load`). It sits at the bottom of the layers (it
//! imports nothing of the crate), so the database, the job worker, the LLM client and the
//! HTTP layer can all record into it.

pub mod context;
pub mod load;
pub mod logs;
pub mod prom;
pub mod trace;
