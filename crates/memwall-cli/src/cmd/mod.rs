//! One module per subcommand group: validate flags into core types, call core,
//! print. Shared helpers live here.

mod bench;
mod calc;
mod evidence;
mod frontier;
mod hw;
mod loadtest;
mod mlx;
mod model;
mod models;
mod predict;
mod push;
mod quant;
mod report;
mod roofline;
mod sample;
mod serve;
mod speculative;
mod store;
mod stream;

use crate::args::*;
use anyhow::{Context, Result, bail};
use memwall_core::probe::catalog::Catalog;
use memwall_core::probe::model::CacheType;
use memwall_core::store::Store;
use std::path::PathBuf;

/// Runs the parsed command. A PostgreSQL `--db` (or `MEMWALL_DB`) is worked on
/// through a local copy ([`memwall_core::store::postgres::through_copy`]): the command
/// runs on the copy and the runs and rows it adds are pushed back; `memwall report`
/// reads the shared store itself.
pub async fn dispatch(cli: Cli) -> Result<()> {
    use memwall_core::store::postgres::{is_postgres_url, redact, through_copy};
    let db = cli
        .db
        .clone()
        .unwrap_or_else(memwall_core::store::default_path);
    let text = db.to_string_lossy().to_string();
    if !is_postgres_url(&text) {
        return run(&db, cli.command).await;
    }
    match on_shared_store(&cli.command) {
        Shared::Direct => run(&db, cli.command).await,
        Shared::Refused(name, why) => bail!(
            "memwall {name}: --db (or MEMWALL_DB) names a PostgreSQL store ({}): {why}",
            redact(&text)
        ),
        Shared::ThroughCopy => {
            let command = cli.command;
            through_copy(
                &text,
                |m| eprintln!("{m}"),
                async |copy| run(copy, command).await,
            )
            .await?
        }
    }
}

/// How a command works on a PostgreSQL store.
enum Shared {
    /// It reads the shared store itself (`report`), or uses no store.
    Direct,
    /// Through a local copy whose new runs and rows are pushed back.
    ThroughCopy,
    /// Refused: the command and why.
    Refused(&'static str, &'static str),
}

fn on_shared_store(c: &Command) -> Shared {
    match c {
        Command::Bench(_)
        | Command::Stream(_)
        | Command::Peak(_)
        | Command::Roofline(_)
        | Command::Export(_)
        | Command::Kv { .. }
        | Command::Analyze(_)
        | Command::Frontier(_)
        | Command::Spec { .. }
        | Command::Serve(_)
        | Command::Loadtest(_)
        | Command::Calc(_)
        | Command::Predict { .. } => Shared::ThroughCopy,
        Command::History(a) if a.delete.is_some() => Shared::Refused(
            "history --delete",
            "deleting a shared run is not carried back to the shared store (runs are only ever added there): delete it with psql (DELETE FROM runs WHERE uuid = …; its rows go with it), or delete it in the SQLite store it came from",
        ),
        Command::History(_) => Shared::ThroughCopy,
        Command::Push(_) => Shared::Refused(
            "push",
            "push copies a SQLite store into a shared one: pass the local file with --db PATH and the shared store with --to",
        ),
        Command::Report(_)
        | Command::Model { .. }
        | Command::Models { .. }
        | Command::Quant { .. }
        | Command::Datasets { .. }
        | Command::Perplexity(_)
        | Command::Hw { .. }
        | Command::Mlx { .. }
        | Command::Sample(_) => Shared::Direct,
    }
}

/// Runs `command` on the SQLite store `db` (or, for `report`, any store).
async fn run(db: &std::path::Path, command: Command) -> Result<()> {
    let db = db.to_path_buf();
    match command {
        Command::Bench(a) => bench::bench(&db, a).await,
        Command::Stream(a) => stream::stream(&db, a).await,
        Command::Peak(a) => stream::peak_cmd(&db, a).await,
        Command::Model {
            cmd:
                ModelCmd::Info {
                    file,
                    json,
                    cache_type,
                },
        } => model::model_info(&file, json, &cache_type),
        Command::Model {
            cmd: ModelCmd::Synth(a),
        } => calc::synth_cmd(a),
        Command::Models { cmd } => models::models(cmd),
        Command::Roofline(a) => roofline::roofline_cmd(&db, a).await,
        Command::Export(a) => store::export(&db, a).await,
        Command::History(a) => store::history(&db, a).await,
        Command::Kv {
            cmd: KvCmd::Verify(a),
        } => evidence::kv_verify(&db, a).await,
        Command::Analyze(a) => evidence::analyze(&db, a).await,
        Command::Quant { cmd } => quant::quant(cmd),
        Command::Datasets { cmd } => quant::datasets(cmd),
        Command::Frontier(a) => frontier::frontier(&db, a).await,
        Command::Perplexity(a) => frontier::perplexity(a).await,
        Command::Spec { cmd } => speculative::spec(&db, cmd).await,
        Command::Serve(a) => serve::serve(&db, a).await,
        Command::Loadtest(a) => loadtest::loadtest(&db, a).await,
        Command::Report(a) => report::report(&db, a).await,
        Command::Push(a) => push::push(&db, a).await,
        Command::Hw { json } => hw::hw_cmd(json),
        Command::Mlx { cmd } => mlx::mlx(cmd),
        Command::Sample(a) => sample::sample(a).await,
        Command::Calc(a) => calc::calc_cmd(&db, a).await,
        Command::Predict { cmd } => predict::predict(&db, cmd).await,
    }
}

pub(crate) fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

pub(crate) async fn open_store(db: &std::path::Path) -> Result<Store> {
    Store::open(db)
        .await
        .with_context(|| format!("opening the store {}", db.display()))
}

pub(crate) fn parse_cache(s: &str) -> Result<CacheType> {
    CacheType::parse(s)
        .with_context(|| format!("unknown cache type {s:?}: use f16, bf16, f32, q8_0 or q4_0"))
}

/// A path, or a catalogue name resolved to its fetched file.
pub(crate) fn resolve_model(s: &str) -> Result<PathBuf> {
    let p = PathBuf::from(s);
    if p.exists() {
        return Ok(p);
    }
    let cat = Catalog::builtin()?;
    if let Ok(e) = cat.get(s) {
        let p = e.path();
        if p.exists() {
            return Ok(p);
        }
        bail!(
            "{} is in the catalogue but not fetched yet: run `memwall models fetch {}`",
            e.name,
            e.name
        );
    }
    bail!("{s}: no such file, and no catalogue model of that name (`memwall models list`)")
}

pub(crate) fn default_model() -> Result<PathBuf> {
    let cat = Catalog::builtin()?;
    let e = cat.default_model();
    let p = e.path();
    if !p.exists() {
        bail!(
            "the default model {} is not fetched: run `memwall models fetch` (or ./scripts/setup.sh), or pass --model FILE",
            e.name
        );
    }
    Ok(p)
}

/// One line for reports: power, thermal and swap-outs before → after, and the warnings.
pub(crate) fn guard_line(r: &memwall_core::measure::guard::GuardReport) -> String {
    r.line()
}

/// Prints the guard's warnings (battery, swapping, thermal, skipped capacity check) on stderr.
pub(crate) fn print_guard(report: &memwall_core::measure::guard::GuardReport) {
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
}

pub(crate) fn physical_cores() -> u32 {
    let h = memwall_core::probe::hw::host_info();
    h.cores_physical.max(1) as u32
}
