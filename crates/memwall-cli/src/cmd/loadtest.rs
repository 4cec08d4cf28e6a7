//! `memwall loadtest`: flags → a [`LoadPlan`], the load-test job, the printed table.

use super::{command_line, open_store, resolve_model};
use crate::args::LoadtestArgs;
use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use memwall_core::experiments::loadtest::job::{LoadProgress, history_job, loadtest_job};
use memwall_core::experiments::loadtest::plan::{
    Endpoint, Load, LoadPlan, RoofChoice, Slo, Target, Workload,
};
use memwall_core::experiments::loadtest::report;
use memwall_core::probe::model::CacheType;
use std::sync::Arc;

fn plan_of(a: &LoadtestArgs) -> Result<LoadPlan> {
    let Some(url) = a.url.clone() else {
        bail!("give --url (the server's base URL), or --list");
    };
    let mut loads: Vec<Load> = a
        .concurrency
        .iter()
        .map(|&c| Load::Closed { concurrency: c })
        .collect();
    loads.extend(a.rate.iter().map(|&r| Load::Open {
        rate_rps: r,
        burstiness: a.burstiness,
    }));
    if loads.is_empty() {
        loads.push(Load::Closed { concurrency: 1 });
    }
    let model_file = match &a.model_file {
        Some(m) => Some(resolve_model(m)?),
        None => None,
    };
    Ok(LoadPlan {
        target: Target {
            url,
            model: a.model.clone(),
            api_key: a.api_key.clone(),
            endpoint: Endpoint::parse(&a.endpoint)?,
            timeout_s: a.timeout,
        },
        workload: Workload {
            input_tokens: a.input_tokens,
            output_tokens: a.output_tokens,
            shared_prefix_tokens: a.shared_prefix_tokens,
            ignore_eos: !a.no_ignore_eos,
            seed: a.seed,
        },
        loads,
        num_requests: a.num_requests,
        duration_s: a.duration,
        warmup: a.warmup,
        slo: match &a.slo {
            Some(s) => Slo::parse(s)?,
            None => Slo::default(),
        },
        model_file,
        sampler: !a.no_sampler,
        roof: match &a.roof {
            Some(r) => RoofChoice::parse(r)?,
            None => RoofChoice::Unknown,
        },
        cache_type: match &a.cache_type {
            Some(c) => Some(CacheType::parse(c).with_context(|| {
                format!("--cache-type {c:?}: use f16, bf16, f32, q8_0 or q4_0")
            })?),
            None => None,
        },
    })
}

pub(crate) async fn loadtest(db: &std::path::Path, a: LoadtestArgs) -> Result<()> {
    let store = open_store(db).await?;
    if a.list {
        let pts = history_job(&store, a.run).await?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&pts)?);
        } else if let Some(run) = a.run {
            let Some(p0) = pts.first() else {
                bail!("no load-test run {run} in {}", db.display());
            };
            print!("{}", report::header(&p0.prov));
            let points: Vec<_> = pts.iter().map(|p| p.point.clone()).collect();
            print!("{}", report::table(&points));
        } else {
            print!("{}", report::runs_table(&pts));
        }
        return Ok(());
    }
    let plan = plan_of(&a)?;
    let pb = ProgressBar::new(plan.num_requests as u64);
    pb.set_style(
        ProgressStyle::with_template("{msg:24} {bar:30} {pos}/{len} requests {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let pb2 = pb.clone();
    let progress = Arc::new(move |e: LoadProgress| match e {
        LoadProgress::Server { model_ids } => pb2.println(format!("server lists {model_ids:?}")),
        LoadProgress::Level {
            label, n_requests, ..
        } => {
            pb2.reset();
            pb2.set_length(n_requests as u64);
            pb2.set_message(label);
        }
        LoadProgress::Request { done, .. } => pb2.set_position(done as u64),
    });
    let out = loadtest_job(&store, plan, &command_line(), a.out.as_deref(), progress).await;
    pb.finish_and_clear();
    let out = out?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{}", out.report);
    println!("stored as run {} in {}", out.run_id, db.display());
    for c in &out.charts {
        println!("chart: {}", c.display());
    }
    Ok(())
}
