//! Generates the allow/deny permissions for the app's own commands (so the
//! capability file can grant exactly these and nothing else).

const COMMANDS: &[&str] = &[
    "machine",
    "live",
    "models",
    "measure_bandwidth",
    "fetch_model",
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
    "export_report",
    "spec_gate",
    "spec_bench",
    "serve_start",
    "serve_state",
    "serve_stop",
    "loadtest_run",
    "loadtest_view",
    "chat_url_start",
];

/// `tauri::generate_context!` embeds `ui/dist`, which only exists after
/// `npm --prefix ui run build`. So that `cargo build --workspace` works without Node,
/// a missing `ui/dist` gets a placeholder page that says how to build the real one.
fn ensure_frontend() {
    // Read at run time (not `env!`): a compiled build script is reused after the
    // workspace moves, and a baked-in path would point at the old checkout.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dist = std::path::Path::new(&manifest).join("../ui/dist");
    println!("cargo:rerun-if-changed=../ui/dist");
    if !dist.join("index.html").exists() {
        println!(
            "cargo:warning=ui/dist is missing: embedding a placeholder page; build the UI with `npm --prefix ui ci && npm --prefix ui run build`, then rebuild"
        );
        std::fs::create_dir_all(&dist).expect("create ui/dist");
        std::fs::write(
            dist.join("index.html"),
            "<!doctype html><meta charset=utf-8><title>memwall</title><p>The memwall UI was not built: run <code>npm --prefix ui ci &amp;&amp; npm --prefix ui run build</code>, then rebuild the app.</p>",
        )
        .expect("write placeholder ui/dist/index.html");
    }
}

fn main() {
    ensure_frontend();
    tauri_build::try_build(
        tauri_build::Attributes::new()
            .app_manifest(tauri_build::AppManifest::new().commands(COMMANDS)),
    )
    .expect("tauri build script failed");
}
