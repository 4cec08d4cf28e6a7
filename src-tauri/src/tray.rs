//! The tray (AppIndicator on Linux, the menu-bar extra on macOS): live lines
//! (bandwidth now beside the last STREAM, with the running decode's verdict; power;
//! temperatures and thermal state; memory and swap) refreshed every 2 s while a
//! measuring job runs and every 10 s otherwise, from the store and the live sampler
//! (a handful of small file reads and one SQLite query: no measurable load), "Measure bandwidth now"
//! (a quick STREAM, ≤ 2 s, stored), and "Open memwall". It re-reads its lines after
//! every [`events::STORE_CHANGED`], whoever wrote.

use crate::events;
use crate::state::AppState;
use memwall_core::present::views::TrayStatus;
use std::time::Duration;
use tauri::image::Image;
use tauri::menu::{Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::{App, AppHandle, Manager, Wry};

/// Time between refreshes of the status lines while a measuring job runs.
pub const REFRESH_ACTIVE: Duration = Duration::from_secs(2);
/// Time between refreshes otherwise (one live read: a few small file reads).
pub const REFRESH_IDLE: Duration = Duration::from_secs(10);

/// The menu items whose text changes.
pub struct TrayItems {
    bandwidth: MenuItem<Wry>,
    thermal: MenuItem<Wry>,
    power: MenuItem<Wry>,
    memory: MenuItem<Wry>,
}

fn set(items: &TrayItems, s: &TrayStatus) {
    let _ = items.bandwidth.set_text(&s.bandwidth);
    let _ = items.thermal.set_text(&s.thermal);
    let _ = items.power.set_text(&s.power);
    let _ = items.memory.set_text(&s.memory);
}

/// Re-reads the status and updates the menu.
pub async fn refresh(app: &AppHandle) {
    let state = app.state::<AppState>();
    let s = match state.tray_status().await {
        Ok(s) => s,
        Err(e) => TrayStatus {
            bandwidth: format!("Bandwidth: — ({e})"),
            thermal: "Thermal: —".into(),
            power: "Power: —".into(),
            memory: "Memory: —".into(),
        },
    };
    if let Some(items) = app.try_state::<TrayItems>() {
        set(&items, &s);
    }
}

/// Refreshes on a background task now.
fn refresh_soon(app: &AppHandle) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move { refresh(&app).await });
}

/// Shows the main window, creating it when it was closed.
pub fn open_window(app: &AppHandle) -> tauri::Result<()> {
    if let Some(w) = app.get_webview_window("main") {
        w.show()?;
        w.unminimize()?;
        w.set_focus()?;
        return Ok(());
    }
    tauri::WebviewWindowBuilder::new(app, "main", tauri::WebviewUrl::App("index.html".into()))
        .title("memwall")
        .inner_size(1200.0, 820.0)
        .build()?;
    Ok(())
}

fn measure_now(app: &AppHandle) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        if let Some(items) = app.try_state::<TrayItems>() {
            let _ = items.bandwidth.set_text("Bandwidth: measuring…");
        }
        let state = app.state::<AppState>();
        if let Err(e) = state.measure_bandwidth().await {
            if let Some(items) = app.try_state::<TrayItems>() {
                let _ = items.bandwidth.set_text(format!("Bandwidth: {e}"));
            }
            return;
        }
        // The tray's own listener refreshes the lines.
        events::store_changed(&app);
    });
}

/// Builds the tray and starts the refresh loop.
///
/// # Errors
/// Tauri's, when the tray cannot be created.
pub fn setup(app: &App) -> tauri::Result<()> {
    let item = |id: &str, text: &str, enabled: bool| {
        MenuItem::with_id(app, id, text, enabled, None::<&str>)
    };
    let bandwidth = item("bandwidth", "Bandwidth: …", false)?;
    let measure = item("measure", "Measure bandwidth now", true)?;
    let thermal = item("thermal", "Thermal: …", false)?;
    let power = item("power", "Power: …", false)?;
    let memory = item("memory", "Memory: …", false)?;
    let open = item("open", "Open memwall", true)?;
    let quit = item("quit", "Quit memwall", true)?;
    let menu = Menu::with_items(
        app,
        &[
            &bandwidth,
            &measure,
            &PredefinedMenuItem::separator(app)?,
            &thermal,
            &power,
            &memory,
            &PredefinedMenuItem::separator(app)?,
            &open,
            &quit,
        ],
    )?;
    TrayIconBuilder::with_id("memwall")
        .icon(Image::from_bytes(include_bytes!("../../icons/tray.png"))?)
        .tooltip("memwall")
        .menu(&menu)
        .on_menu_event(|app, ev| match ev.id().as_ref() {
            "measure" => measure_now(app),
            "open" => {
                let _ = open_window(app);
            }
            "quit" => app.exit(0),
            _ => {}
        })
        .build(app)?;
    app.manage(TrayItems {
        bandwidth,
        thermal,
        power,
        memory,
    });
    let handle = app.handle().clone();
    let on_change = handle.clone();
    events::on_store_changed(&handle, move || refresh_soon(&on_change));
    tauri::async_runtime::spawn(async move {
        loop {
            refresh(&handle).await;
            let active = handle.state::<AppState>().running().is_some();
            tokio::time::sleep(if active { REFRESH_ACTIVE } else { REFRESH_IDLE }).await;
        }
    });
    Ok(())
}
