//! memwall's desktop app: a thin Tauri 2 shell over memwall-core. A window with the
//! Machine, Benchmarks, Roofline, Frontier, Speculative, Serve, Chat and History pages (`ui/`), and a
//! tray with live status. Every number comes from memwall-core through the commands
//! in [`commands`]; [`state::AppState`] holds the store and the single measuring slot
//! ([`job`]); [`events`] names everything sent to the window besides command results.
//!
//! Environment: `MEMWALL_DB` (the store), `MEMWALL_EXPORTS` (where exports and
//! results go), `MEMWALL_TRAY_ONLY=1` (start with no window, as after closing it).

pub mod commands;
pub mod error;
pub mod events;
pub mod job;
pub mod serve;
pub mod speculative;
pub mod state;
pub mod tray;

use tauri::RunEvent;

/// Starts the app; returns when the user quits from the tray.
pub fn run() {
    let state = state::AppState::new(
        memwall_core::store::default_path(),
        memwall_core::present::views::exports_dir(),
    );
    let tray_only = std::env::var("MEMWALL_TRAY_ONLY").as_deref() == Ok("1");
    let app = tauri::Builder::default()
        .manage(state)
        .invoke_handler(tauri::generate_handler![
            commands::machine,
            commands::live,
            commands::models,
            commands::measure_bandwidth,
            commands::fetch_model,
            commands::run_bench,
            commands::cancel_job,
            commands::chat_start,
            commands::chat_stop,
            commands::runs,
            commands::run_rows,
            commands::compare_runs,
            commands::delete_run,
            commands::roofline_view,
            commands::frontier_view,
            commands::chart_svg,
            commands::export_chart,
            commands::export_rows,
            commands::export_report,
            commands::spec_gate,
            commands::spec_bench,
            commands::serve_start,
            commands::serve_state,
            commands::serve_stop,
            commands::loadtest_run,
            commands::loadtest_view,
            commands::chat_url_start,
        ])
        .setup(move |app| {
            tray::setup(app)?;
            if !tray_only {
                tray::open_window(app.handle())?;
            }
            Ok(())
        })
        .build(tauri::generate_context!())
        .unwrap_or_else(|e| {
            eprintln!("memwall: cannot start the app: {e}");
            std::process::exit(1)
        });
    app.run(|_app, event| {
        // Closing the window keeps the tray running; "Quit memwall" exits.
        if let RunEvent::ExitRequested {
            api, code: None, ..
        } = event
        {
            api.prevent_exit();
        }
    });
}
