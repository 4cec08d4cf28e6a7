//! `memwall serve`: flags → [`ServeOptions`] → `serve_job`, printing its status lines.

use super::{default_model, physical_cores, resolve_model};
use crate::args::ServeArgs;
use anyhow::Result;
use memwall_core::experiments::serve::job::{ServeOptions, ServeStatus, serve_job};

pub(crate) async fn serve(a: ServeArgs) -> Result<()> {
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
    serve_job(o, |s| match s {
        ServeStatus::Warning(w) => eprintln!("warning: {w}"),
        ServeStatus::Listening(addr) => eprintln!("listening on http://{addr} (loading the model; /health is 503 until ready)"),
        ServeStatus::Ready {
            model_id,
            template,
            n_slots,
            n_ctx_slot,
        } => eprintln!(
            "ready: {model_id}, {n_slots} slots × {n_ctx_slot} tokens, chat template: {template}; Ctrl-C stops"
        ),
    })
    .await?;
    Ok(())
}
