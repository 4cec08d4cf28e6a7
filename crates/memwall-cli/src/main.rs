//! `memwall`: measure how close local LLM inference gets to the memory wall.
//!
//! The binary only parses flags, calls `memwall-core` and prints; every number is
//! computed in the core.

mod args;
mod cmd;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    let filter = if cli.verbose {
        "memwall=debug,info"
    } else {
        "warn"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| filter.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // A panic is a bug; report it as one instead of a backtrace dump.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("memwall: internal error (a bug, please report it): {info}");
    }));
    let result = std::panic::catch_unwind(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(cmd::dispatch(cli))
    });
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("memwall: error: {e:#}");
            ExitCode::from(1)
        }
        Err(_) => ExitCode::from(101),
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
