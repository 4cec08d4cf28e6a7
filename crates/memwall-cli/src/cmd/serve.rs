//! `memwall serve`: flags → [`ServeOptions`] → `serve_job`, printing its status lines.

use super::{command_line, default_model, open_store, physical_cores, resolve_model};
use crate::args::ServeArgs;
use anyhow::Result;
use memwall_core::experiments::serve::job::{ServeOptions, ServeStatus, serve_job};

pub(crate) async fn serve(db: &std::path::Path, a: ServeArgs) -> Result<()> {
    let store = open_store(db).await?;
    let path = match &a.model {
        Some(m) => resolve_model(m)?,
        None => default_model()?,
    };
    let mut o = ServeOptions::new(path);
    o.model_name = a.model.clone();
    o.parallel = a.parallel;
    o.queue = a.queue;
    o.ctx_size = a.ctx_size;
    o.threads = a.threads.unwrap_or_else(physical_cores);
    o.host = a.host;
    o.port = a.port;
    o.api_key = a.api_key.clone();
    o.cors_origins = a.cors_origin.clone();
    o.sampler = !a.no_sampler;
    o.batch = a.batch_size;
    o.burst_gap = std::time::Duration::try_from_secs_f64(a.burst_gap_ms / 1e3)
        .map_err(|_| anyhow::anyhow!("--burst-gap-ms {}: use 0..=1000 ms", a.burst_gap_ms))?;
    o.engine = memwall_core::experiments::bench::BenchEngine::parse(&a.engine)?;
    let engine = o.engine.name();
    let done = serve_job(&store, &command_line(), o, move |s| match s {
        ServeStatus::Warning(w) => eprintln!("warning: {w}"),
        ServeStatus::Listening(addr) => eprintln!("listening on http://{addr} (loading the model; /health is 503 until ready)"),
        ServeStatus::Ready {
            model_id,
            template,
            n_slots,
            n_ctx_slot,
        } => eprintln!(
            "ready: {model_id} on {engine}, {n_slots} slots × {n_ctx_slot} tokens, chat template: {template}; Ctrl-C or SIGTERM stops (-v logs each request)"
        ),
    })
    .await?;
    use memwall_core::units::or_dash;
    if let Some(id) = done.run_id {
        let e = done.energy.as_ref();
        eprintln!(
            "stopped: {} tokens generated; mean power {} W, {} J/token over the session (idle included){}; sampler series stored as run {id} in {}",
            done.tokens_predicted,
            or_dash(e.and_then(|e| e.mean_power_w), 1),
            or_dash(e.and_then(|e| e.j_per_token), 4),
            e.and_then(|e| e.reason.as_deref())
                .map_or(String::new(), |r| format!(" (energy —: {r})")),
            db.display()
        );
    } else {
        eprintln!(
            "stopped: {} tokens generated; no sampler series stored (--no-sampler)",
            done.tokens_predicted
        );
    }
    Ok(())
}
