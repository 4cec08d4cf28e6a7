//! Generates the allow/deny permissions for the app's own commands (so the
//! capability file can grant exactly these and nothing else).

const COMMANDS: &[&str] = &[
    "machine",
    "live",
    "models",
    "measure_bandwidth",
    "run_bench",
    "cancel_job",
    "chat_start",
    "chat_stop",
    "runs",
    "run_rows",
    "compare_runs",
    "delete_run",
    "roofline_view",
    "frontier_view",
    "chart_svg",
    "export_chart",
    "export_rows",
];

fn main() {
    tauri_build::try_build(
        tauri_build::Attributes::new()
            .app_manifest(tauri_build::AppManifest::new().commands(COMMANDS)),
    )
    .expect("tauri build script failed");
}
