//! The `genied` binary: parse the command line, start logging, run the subcommand.

use std::process::ExitCode;

use clap::Parser;
use genied::cli::{self, Cli, Command, LogFormat};
use tracing_subscriber::filter::Targets;

fn init_logging(cli: &Cli, to_stdout: bool) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let level = cli
        .log_level
        .as_deref()
        .unwrap_or(if to_stdout { "info" } else { "warn" });
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
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(tty)
        .with_writer(writer);
    let registry = tracing_subscriber::registry().with(filter);
    match cli.log_format {
        LogFormat::Json => registry
            .with(fmt.json().with_current_span(true).with_span_list(false))
            .init(),
        LogFormat::Text => registry.with(fmt).init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli, matches!(cli.command, Command::Serve(_)));
    let result = match cli.command {
        Command::Serve(config) => {
            let mut config = *config;
            config.data_dir = cli.data_dir.clone();
            // Uploaded files are read by this same binary in a child process.
            if config.extract_exe.is_none() {
                config.extract_exe = std::env::current_exe().ok();
            }
            tokio::runtime::Runtime::new()
                .map_err(anyhow::Error::from)
                .and_then(|rt| rt.block_on(serve(config)))
        }
        Command::Migrate => cli::migrate(&cli.data_dir),
        Command::ExtractWorker {
            filename,
            memory_mb,
            cpu_seconds,
        } => genied::knowledge::extract::sandbox::child_main(&filename, memory_mb, cpu_seconds),
        Command::Admin(cmd) => cli::admin(&cli.data_dir, cli.create_data_dir, cmd),
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
    let app = genied::build_app(config)?;
    if let Some(message) = genied::app::bootstrap_first_admin(&app.state)? {
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
