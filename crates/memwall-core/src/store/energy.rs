//! The columns every energy table shares (`row_energy`, `loadtest_energy`,
//! `spec_bench_energy`, `spec_synth_energy`): one list, one binder, one reader, so a
//! figure added to [`EnergySummary`] reaches every table the same way.

use crate::measure::sampler::session::EnergySummary;
use sqlx::Row;
use sqlx::sqlite::{Sqlite, SqliteArguments, SqliteRow};

/// The energy columns, in the order [`bind`] binds them.
pub const COLUMNS: [&str; 20] = [
    "samples",
    "mean_power_w",
    "energy_j",
    "j_per_token",
    "tokens_per_wh",
    "energy_source",
    "energy_scope",
    "reason",
    "tokens",
    "timed_ns",
    "covered_ns",
    "idle_power_w",
    "j_per_token_above_idle",
    "peak_temp_c",
    "throttled",
    "live_dram_gbps",
    "gpu_mem_util_pct",
    "other_cpu_cores",
    "steal_cores",
    "other_gpu_util_pct",
];

/// `samples, mean_power_w, …` for an INSERT's column list.
pub fn column_list() -> String {
    COLUMNS.join(", ")
}

/// `?, ?, …`, one per column.
pub fn placeholders() -> String {
    vec!["?"; COLUMNS.len()].join(", ")
}

/// `e.samples AS e_samples, …`: the columns of table alias `alias`, renamed with the
/// prefix `alias_` (for a join beside another table's columns).
pub fn aliased(alias: &str) -> String {
    COLUMNS
        .iter()
        .map(|c| format!("{alias}.{c} AS {alias}_{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Binds `e`'s figures in [`COLUMNS`] order.
pub fn bind<'q>(
    q: sqlx::query::Query<'q, Sqlite, SqliteArguments>,
    e: &EnergySummary,
) -> sqlx::query::Query<'q, Sqlite, SqliteArguments> {
    q.bind(e.samples as i64)
        .bind(e.mean_power_w)
        .bind(e.energy_j)
        .bind(e.j_per_token)
        .bind(e.tokens_per_wh)
        .bind(e.energy_source.clone())
        .bind(e.energy_scope.clone())
        .bind(e.reason.clone())
        .bind(e.tokens as i64)
        .bind(e.timed_ns as i64)
        .bind(e.covered_ns as i64)
        .bind(e.idle_power_w)
        .bind(e.j_per_token_above_idle)
        .bind(e.peak_temp_c)
        .bind(e.throttled)
        .bind(e.live_dram_gbps)
        .bind(e.gpu_mem_util_pct)
        .bind(e.other_cpu_cores)
        .bind(e.steal_cores)
        .bind(e.other_gpu_util_pct)
}

/// The summary in row `r`, its columns named with `prefix` (`""`, or `e_` after
/// [`aliased`]). Rows stored before a column existed read it as unknown (0 for the
/// counts, `None`/empty otherwise).
pub fn read(r: &SqliteRow, prefix: &str) -> EnergySummary {
    let c = |n: &str| format!("{prefix}{n}");
    let f = |n: &str| r.try_get::<Option<f64>, _>(c(n).as_str()).ok().flatten();
    let u = |n: &str| {
        r.try_get::<Option<i64>, _>(c(n).as_str())
            .ok()
            .flatten()
            .unwrap_or(0)
            .max(0) as u64
    };
    let t = |n: &str| r.try_get::<Option<String>, _>(c(n).as_str()).ok().flatten();
    EnergySummary {
        samples: u("samples"),
        mean_power_w: f("mean_power_w"),
        energy_j: f("energy_j"),
        j_per_token: f("j_per_token"),
        tokens_per_wh: f("tokens_per_wh"),
        energy_source: t("energy_source").unwrap_or_default(),
        energy_scope: t("energy_scope").unwrap_or_default(),
        reason: t("reason"),
        tokens: u("tokens"),
        timed_ns: u("timed_ns"),
        covered_ns: u("covered_ns"),
        idle_power_w: f("idle_power_w"),
        j_per_token_above_idle: f("j_per_token_above_idle"),
        peak_temp_c: f("peak_temp_c"),
        throttled: r
            .try_get::<Option<bool>, _>(c("throttled").as_str())
            .ok()
            .flatten(),
        live_dram_gbps: f("live_dram_gbps"),
        gpu_mem_util_pct: f("gpu_mem_util_pct"),
        other_cpu_cores: f("other_cpu_cores"),
        steal_cores: f("steal_cores"),
        other_gpu_util_pct: f("other_gpu_util_pct"),
    }
}
