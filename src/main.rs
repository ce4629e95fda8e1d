//! The `genied` binary: parse the command line, start logging, run the subcommand.

use std::process::ExitCode;

use clap::Parser;
use genied::cli::{self, Cli, Command, LogFormat};
use tracing_subscriber::filter::Targets;

/// Starts logging; with `traces` (the OTLP provider of `--otlp-endpoint`), also the layer
/// that exports spans, with a filter of its own so the log level does not decide which spans
/// are exported.
fn init_logging(
    log_level: Option<&str>,
    log_format: LogFormat,
    to_stdout: bool,
    traces: Option<&opentelemetry_sdk::trace::SdkTracerProvider>,
) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let level = log_level.unwrap_or(if to_stdout { "info" } else { "warn" });
    // A static `target=level` filter, not `EnvFilter`: the latter takes a lock on every span
    // enter and exit to support per-span directives, which showed in profiles of cheap
    // requests, for a feature an operator of this service does not need.
    let filter = level.parse::<Targets>().unwrap_or_else(|e| {
        eprintln!("genied: ignoring the log filter {level:?} ({e}); using info");
        Targets::new().with_default(tracing::Level::INFO)
    });
    use std::io::IsTerminal;
    let tty = if to_stdout {
        std::io::stdout().is_terminal()
    } else {
        std::io::stderr().is_terminal()
    };
    let writer = move || -> Box<dyn std::io::Write> {
        if to_stdout {
            Box::new(std::io::stdout())
        } else {
            Box::new(std::io::stderr())
        }
    };
    // A macro, not a value: each subscriber stack below gives the layer a different type.
    // The lines are `telemetry::logs`'s: `tracing_subscriber`'s formats, with the request a
    // line is written in shown as the request's span was.
    use genied::telemetry::logs::Lines;
    macro_rules! fmt {
        () => {
            tracing_subscriber::fmt::layer()
                .with_ansi(tty)
                .with_writer(writer)
        };
    }
    if let Some(provider) = traces {
        let spans = Targets::new().with_target("genied", tracing::Level::INFO);
        let otel = genied::telemetry::trace::layer(provider).with_filter(spans);
        let registry = tracing_subscriber::registry().with(otel);
        match log_format {
            LogFormat::Json => registry
                .with(
                    fmt!()
                        .json()
                        .event_format(Lines::json())
                        .with_filter(filter),
                )
                .init(),
            LogFormat::Text => registry
                .with(fmt!().event_format(Lines::text()).with_filter(filter))
                .init(),
        }
        return;
    }
    let registry = tracing_subscriber::registry().with(filter);
    match log_format {
        LogFormat::Json => registry
            .with(fmt!().json().event_format(Lines::json()))
            .init(),
        LogFormat::Text => registry.with(fmt!().event_format(Lines::text())).init(),
    }
}

/// SQLite keeps memory statistics unless told not to, and to keep them every allocation it
/// makes takes one process-wide mutex: connections working on different threads (the
/// runtime's, the writer, the readers) queue on it, and connections opened side by side
/// parsed the schema no faster than one after another (docs/performance.md, round
/// twenty-one). genied reads none of the statistics (it sets no soft heap limit). SQLite
/// takes this setting only before its first use, so it is made first thing here; tests that
/// build the app in-process keep SQLite's default.
#[allow(unsafe_code)]
fn sqlite_without_memory_statistics() {
    use rusqlite::ffi;
    // SAFETY: `sqlite3_config` must not run beside any other SQLite call, and only before
    // SQLite is initialised: this is the first thing `main` does, before any other thread
    // or connection exists. `SQLITE_CONFIG_MEMSTATUS` takes one int.
    let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::ffi::c_int) };
    debug_assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_config(MEMSTATUS)");
}

fn main() -> ExitCode {
    genied::malloc::keep_thresholds_fixed();
    sqlite_without_memory_statistics();
    let cli = Cli::parse();
    let (level, format) = (cli.log_level.clone(), cli.log_format);
    if !matches!(cli.command, Command::Serve(_)) {
        init_logging(level.as_deref(), format, false, None);
    }
    let result = match cli.command {
        Command::Serve(config) => {
            let mut config = *config;
            config.data_dir = cli.data_dir.clone();
            config.database_url = cli.database_url.clone();
            // Uploaded files are read by this same binary in a child process.
            if config.extract_exe.is_none() {
                config.extract_exe = std::env::current_exe().ok();
            }
            // And a rebuild of the documents search index runs in one.
            if config.index_exe.is_none() {
                config.index_exe = std::env::current_exe().ok();
            }
            tokio::runtime::Runtime::new()
                .map_err(anyhow::Error::from)
                .and_then(|rt| {
                    rt.block_on(async move {
                        // The exporter runs on this runtime, so it is made inside it.
                        let traces = match &config.otlp_endpoint {
                            Some(url) => Some(genied::telemetry::trace::provider(url)?),
                            None => None,
                        };
                        init_logging(level.as_deref(), format, true, traces.as_ref());
                        let served = serve(config).await;
                        if let Some(p) = traces
                            && let Err(e) = p.shutdown()
                        {
                            eprintln!("genied: flushing traces at exit: {e}");
                        }
                        served
                    })
                })
        }
        Command::Migrate => cli::migrate(&cli.data_dir, cli.database_url.as_ref()),
        Command::ExtractWorker {
            filename,
            memory_mb,
            cpu_seconds,
        } => genied::knowledge::extract::sandbox::child_main(&filename, memory_mb, cpu_seconds),
        Command::IndexWorker { database, index } => {
            genied::knowledge::search_index::child_main(&database, &index)
        }
        Command::Admin(cmd) => cli::admin(
            &cli.data_dir,
            cli.create_data_dir,
            cli.database_url.as_ref(),
            cmd,
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("genied: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn serve(config: genied::Config) -> anyhow::Result<()> {
    let listen = config.listen.clone();
    let early = genied::app::FirstAdmin::hash_early_if_new(&config);
    let app = genied::build_app(config)?;
    if let Some(message) = genied::app::bootstrap_first_admin_with(&app.state, early)? {
        eprint!("{message}");
    }
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    genied::serve(app, listener, shutdown_signal()).await
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
