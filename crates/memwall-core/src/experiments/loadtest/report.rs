//! The printed tables: the metric definitions, the load points, and the stored runs.
//! Printers only format; every number comes computed in [`LoadPoint`].

use super::metrics::{Dist, LoadPoint};
use super::plan::Load;
use super::store::{LoadProvenance, StoredPoint};

/// The definitions table printed with every report (vLLM's names and meanings).
pub fn definitions() -> String {
    let rows = [
        (
            "TTFT",
            "time to first token: send → first chunk with output text (reasoning text counts), ms",
        ),
        (
            "TPOT",
            "time per output token, per request: (E2EL − TTFT) ÷ (output tokens − 1), ms; requests of 1 token have none",
        ),
        (
            "ITL",
            "inter-token latency: every gap between consecutive output chunks, all requests pooled, ms",
        ),
        ("E2EL", "end-to-end latency: send → end of the stream, ms"),
        (
            "req/s",
            "completed requests ÷ duration (level start → last request's end)",
        ),
        (
            "out tok/s",
            "output tokens of all completed requests ÷ duration",
        ),
        (
            "goodput",
            "requests meeting every --slo bound ÷ duration, req/s",
        ),
        (
            "p50/p90/p99",
            "percentiles with linear interpolation between closest ranks (numpy's default, as vLLM)",
        ),
        (
            "B/token",
            "bytes one token's decode reads alone: weights + its KV at the mean depth, at the server's KV-cache type (memwall serve publishes it; --cache-type for another server)",
        ),
        (
            "implied GB/s",
            "out tok/s × B/token: the bandwidth needed if every token read the weights once",
        ),
        (
            "roof GB/s",
            "the server's roof: the STREAM triad of the memory its weights stream from, as memwall serve publishes it (/memwall/facts) or as --roof names it; never the client's by default",
        ),
        (
            "% roof",
            "implied ÷ the server's roof; above 100 % the server read each weight once for several tokens (batching)",
        ),
    ];
    let mut s = String::from("| metric | definition |\n| --- | --- |\n");
    for (m, d) in rows {
        s.push_str(&format!("| {m} | {d} |\n"));
    }
    s
}

fn ms(x: Option<f64>) -> String {
    x.map_or("—".into(), |v| format!("{v:.1}"))
}

fn level(l: &Load) -> String {
    match l {
        Load::Closed { concurrency } => format!("c={concurrency}"),
        Load::Open {
            rate_rps,
            burstiness,
        } if *burstiness == 1.0 => format!("{rate_rps}/s"),
        Load::Open {
            rate_rps,
            burstiness,
        } => format!("{rate_rps}/s b={burstiness}"),
    }
}

fn dist3(d: &Dist) -> [String; 3] {
    [ms(d.median_ms), ms(d.p90_ms), ms(d.p99_ms)]
}

/// The provenance lines above a table.
pub fn header(prov: &LoadProvenance) -> String {
    let w = &prov.workload;
    format!(
        "target {} {} (model sent {:?}, server reports {}; Server: {}; fingerprint {})\nworkload: {} input words{} + {} output tokens (max_tokens{}), seed {}{}\n",
        prov.url,
        prov.endpoint.path(),
        prov.request_model,
        prov.server_model.as_deref().unwrap_or("—"),
        prov.server_header.as_deref().unwrap_or("—"),
        prov.system_fingerprint.as_deref().unwrap_or("—"),
        w.input_tokens,
        if w.shared_prefix_tokens > 0 {
            format!(" after a shared {}-word prefix", w.shared_prefix_tokens)
        } else {
            String::new()
        },
        w.output_tokens,
        if w.ignore_eos { ", ignore_eos" } else { "" },
        w.seed,
        if prov.slo.is_empty() {
            String::new()
        } else {
            format!(", SLO {}", prov.slo.label())
        },
    )
}

/// The points as a Markdown table: counts, throughput, latency percentiles, goodput,
/// and the bandwidth columns; notes below for `—` and the token source.
pub fn table(points: &[LoadPoint]) -> String {
    let mut s = String::from(
        "| load | done/sent | 429 | fail | req/s | out tok/s | TTFT p50 | p90 | p99 | TPOT p50 | p90 | p99 | ITL p50 | p90 | p99 | E2EL p50 | goodput | cached | B/token | implied GB/s | roof GB/s | % roof |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut notes: Vec<String> = Vec::new();
    for p in points {
        let [t50, t90, t99] = dist3(&p.ttft);
        let [o50, o90, o99] = dist3(&p.tpot);
        let [i50, i90, i99] = dist3(&p.itl);
        let b = &p.bandwidth;
        let f = |x: Option<f64>, d: usize| x.map_or("—".to_string(), |v| format!("{v:.d$}"));
        s.push_str(&format!(
            "| {} | {}/{} | {} | {} | {:.2} | {:.1} | {t50} | {t90} | {t99} | {o50} | {o90} | {o99} | {i50} | {i90} | {i99} | {} | {} | {} | {} | {} | {} | {} |\n",
            level(&p.load),
            p.n_completed,
            p.n_sent,
            p.n_rejected,
            p.n_failed,
            p.request_throughput_rps,
            p.output_throughput_tps,
            ms(p.e2el.median_ms),
            f(p.goodput_rps, 2),
            f(p.mean_cached_tokens, 0),
            b.bytes_per_token.map_or("—".into(), |v| format!("{:.1} MB", v / 1e6)),
            f(b.implied_gbps, 1),
            f(b.stream_gbps, 1),
            f(b.pct_of_stream, 0),
        ));
        let mut n = format!(
            "{}: output tokens counted by {}",
            level(&p.load),
            p.token_source.name()
        );
        if let Some(r) = p.retry_after_max_s {
            n.push_str(&format!(
                "; 429s carried Retry-After up to {r} s (honoured before the client's next request)"
            ));
        }
        if let Some(src) = &b.roof_source {
            n.push_str(&format!("; roof: {src}"));
        }
        if let Some(kv) = &b.kv_type {
            n.push_str(&format!("; KV cache {kv}"));
        }
        if let Some(note) = &b.note {
            n.push_str(&format!("; bandwidth —: {note}"));
        }
        if let Some(e) = &p.first_error {
            n.push_str(&format!("; first error: {e}"));
        }
        let stopped = p
            .samples
            .iter()
            .filter(|q| q.finish_reason.as_deref() == Some("stop"))
            .count();
        if stopped > 0 {
            n.push_str(&format!(
                "; {stopped} of {} requests ended at end-of-generation (finish_reason stop), short of their output length: a server sent ignore_eos that does not honour it serves fewer tokens per request, and its clients fall out of step",
                p.n_completed
            ));
        }
        notes.push(n);
    }
    for n in notes {
        s.push_str(&format!("- {n}\n"));
    }
    s
}

/// The live sampler's figures per level: mean power, energy, J per output token,
/// output tokens per Wh, peak temperature, live DRAM bandwidth beside the implied
/// one; `—` where unmeasured, each reason once below. Empty when no level has a
/// recording (the sampler was off).
pub fn energy_table(points: &[LoadPoint]) -> String {
    use crate::units::or_dash;
    if points.iter().all(|p| p.energy.is_none()) {
        return String::new();
    }
    let mut s = String::from(
        "\n| load | out tok/s | mean W | energy J | J/out token | out tokens/Wh | peak °C | live GB/s | implied GB/s | energy from |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let mut reasons: Vec<String> = Vec::new();
    for p in points {
        let Some(e) = &p.energy else {
            continue;
        };
        if let Some(why) = &e.reason
            && !reasons.contains(why)
        {
            reasons.push(why.clone());
        }
        s.push_str(&format!(
            "| {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            level(&p.load),
            p.output_throughput_tps,
            or_dash(e.mean_power_w, 1),
            or_dash(e.energy_j, 1),
            or_dash(e.j_per_token, 4),
            or_dash(e.tokens_per_wh, 0),
            or_dash(e.peak_temp_c, 1),
            or_dash(e.live_dram_gbps, 1),
            or_dash(p.bandwidth.implied_gbps, 1),
            if e.energy_source.is_empty() {
                "—"
            } else {
                &e.energy_source
            },
        ));
    }
    for why in reasons {
        s.push_str(&format!("- energy —: {why}\n"));
    }
    s.push_str("- energy is the whole machine's (server and client together when both run here)\n");
    s
}

/// One line per stored run: id, time, target, levels, best output tok/s.
pub fn runs_table(points: &[StoredPoint]) -> String {
    let mut s = String::from(
        "| run | measured | url | model | levels | best out tok/s | memwall |\n|---:|---|---|---|---|---:|---|\n",
    );
    let mut i = 0;
    while i < points.len() {
        let run = points[i].run_id;
        let group: Vec<&StoredPoint> = points[i..].iter().take_while(|p| p.run_id == run).collect();
        i += group.len();
        let p0 = group[0];
        let best = group
            .iter()
            .map(|p| p.point.output_throughput_tps)
            .fold(0.0, f64::max);
        s.push_str(&format!(
            "| {run} | {} | {} | {} | {} | {best:.1} | {} |\n",
            p0.measured_at,
            p0.prov.url,
            p0.prov
                .server_model
                .as_deref()
                .unwrap_or(&p0.prov.request_model),
            group
                .iter()
                .map(|p| level(&p.point.load))
                .collect::<Vec<_>>()
                .join(" "),
            p0.build_commit,
        ));
    }
    s
}
