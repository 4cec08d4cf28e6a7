//! The prediction job: a sheet for a planned bench, from this machine's *stored*
//! roof, recorded (hashed, chained) before anything is measured.

use super::{PredictError, Sheet, build_payload, record_sheet};
use crate::experiments::bench::BenchPlan;
use crate::experiments::machine_roof;
use crate::probe::model::ModelFacts;
use crate::store::Store;

/// Computes the predictions for `plan` from this host's stored STREAM triad and
/// peaks (at the plan's largest thread count), at `efficiency` × the ceiling, and
/// records them as a sheet; `command` is stored as the sheet's note. Nothing is
/// measured. What `memwall predict make` and `memwall bench --predict` call.
///
/// # Errors
/// [`PredictError::Efficiency`] outside (0, 1.5]; [`PredictError::Roof`] when no
/// STREAM triad is stored for this host; [`PredictError::Gguf`] or
/// [`PredictError::Hash`] naming a model file; [`PredictError::Store`].
pub async fn sheet_job(
    store: &Store,
    plan: &BenchPlan,
    efficiency: f64,
    command: &str,
) -> Result<Sheet, PredictError> {
    if !(efficiency > 0.0 && efficiency <= 1.5) {
        return Err(PredictError::Efficiency(efficiency));
    }
    let host = crate::probe::hw::host_info();
    let threads = plan.n_threads.iter().copied().max().unwrap_or(1) as usize;
    let roof = machine_roof::machine_roof(store, &host, threads, true, command)
        .await
        .map_err(|e| PredictError::Roof(Box::new(e)))?;
    let mut models = Vec::new();
    for p in &plan.models {
        let f = ModelFacts::open(p)?;
        let sha = crate::util::sha256_file(p).map_err(|source| PredictError::Hash {
            path: p.display().to_string(),
            source,
        })?;
        models.push((f, sha));
    }
    let payload = build_payload(
        plan,
        &models,
        &roof.roof,
        &roof.provenance,
        &host.hostname,
        efficiency,
        command,
    );
    record_sheet(store, &payload).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::predict::tests::{plan_of, q8_gguf};
    use crate::experiments::predict::{list_sheets, load_sheet};
    use crate::measure::stream::{Kernel, KernelResult, StreamConfig, StreamResult};
    use crate::probe::model::CacheType;
    use crate::store::NewRun;
    use crate::units::Gbps;

    /// A one-layer Q8_0 model written to `dir`; returns its path and bytes.
    fn model_file(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
        let b = q8_gguf();
        let p = dir.join("q8.gguf");
        std::fs::write(&p, &b).unwrap();
        (p, b)
    }

    fn plan(model: std::path::PathBuf) -> BenchPlan {
        plan_of(model, vec![], vec![1, 2])
    }

    /// Stores a STREAM triad of `gbps` at 2 threads for this host (typed, not measured).
    async fn store_triad(store: &Store, gbps: f64) {
        let res = StreamResult {
            config: StreamConfig {
                n_elements: 4096,
                threads: 2,
                passes: 2,
                kernels: vec![Kernel::Triad],
            },
            kernels: vec![KernelResult {
                kernel: Kernel::Triad,
                best_gbps: Gbps(gbps),
                avg_gbps: Gbps(gbps),
                worst_gbps: Gbps(gbps),
                samples_ns: vec![1000, 1000],
            }],
            validated: true,
            isa: None,
        };
        let run = NewRun {
            kind: "stream".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:01:00Z".into(),
            command: "memwall stream".into(),
            host: crate::probe::hw::host_info(),
            notes: String::new(),
            guard: None,
        };
        store.insert_stream_run(&run, &[res], &[]).await.unwrap();
    }

    #[tokio::test]
    async fn a_sheet_is_recorded_from_the_stored_roof() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("m.db")).await.unwrap();
        let (model, bytes) = model_file(d.path());
        store_triad(&store, 40.0).await;
        let sheet = sheet_job(&store, &plan(model.clone()), 0.8, "memwall predict make")
            .await
            .unwrap();
        let p = &sheet.payload;
        assert_eq!(p.roof.bandwidth, Gbps(40.0));
        assert!(
            p.roof_source.starts_with("stored STREAM triad #"),
            "{}",
            p.roof_source
        );
        assert_eq!(
            (p.hostname.as_str(), p.note.as_str(), p.efficiency),
            (
                crate::probe::hw::host_info().hostname.as_str(),
                "memwall predict make",
                0.8
            )
        );
        // One tg test per thread count, keyed by the file's sha256.
        assert_eq!(p.tests.len(), 2);
        let sha = crate::util::sha256_bytes(&bytes);
        let facts = ModelFacts::open(&model).unwrap();
        // tg128 from depth 0: each step reads the weights plus at most 128 tokens of KV.
        let w = facts.streamed_bytes.0 as f64;
        let kv = facts.kv_bytes_read_at_depth(128, CacheType::F16).0 as f64;
        for t in &p.tests {
            assert_eq!(
                (t.model_sha256.as_str(), t.test.as_str()),
                (sha.as_str(), "tg128")
            );
            let c = t.ceiling_tps.unwrap();
            assert!(40e9 / (w + kv) <= c && c <= 40e9 / w, "{c}");
            assert_eq!(t.predicted_tps, Some(0.8 * c));
        }
        // Recorded, chained and verifiable.
        assert_eq!(load_sheet(&store, sheet.id).await.unwrap(), sheet);
        let text = crate::experiments::predict::sheet_text(&sheet);
        assert!(
            text.contains(&format!("sheet {} at {}", sheet.id, sheet.created_at)),
            "{text}"
        );
        assert!(text.contains("(40.0 GB/s); efficiency 0.8"), "{text}");
    }

    #[tokio::test]
    async fn no_sheet_without_a_stored_roof_or_with_a_bad_efficiency() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("m.db")).await.unwrap();
        let (model, _) = model_file(d.path());
        let e = sheet_job(&store, &plan(model.clone()), 0.5, "t")
            .await
            .unwrap_err();
        assert!(matches!(e, PredictError::Roof(_)), "{e:?}");
        let cause = std::error::Error::source(&e).unwrap().to_string();
        assert!(
            e.to_string().contains("run `memwall stream` once first")
                && cause.starts_with("no stored STREAM triad for host"),
            "{e}: {cause}"
        );
        store_triad(&store, 40.0).await;
        for bad in [0.0, -0.1, 1.6, f64::NAN] {
            let e = sheet_job(&store, &plan(model.clone()), bad, "t")
                .await
                .unwrap_err();
            assert!(e.to_string().contains("in (0, 1.5]"), "{bad}: {e}");
        }
        assert!(list_sheets(&store).await.unwrap().is_empty());
    }
}
