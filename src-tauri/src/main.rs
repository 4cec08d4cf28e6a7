//! memwall's desktop app entry point: everything lives in the library.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    #[cfg(target_os = "linux")]
    disable_gdk_gl();
    memwall_app::run();
}

/// Linux: the app never draws through a `GdkGLContext` (WebKitGTK composites with its
/// own EGL context), but GTK initialises GL at start-up anyway, which under Mesa's
/// software rasteriser maps `libLLVM` (≈ 44 MB of the idle tray's RSS, measured with
/// `tests/e2e/footprint.sh`). `GDK_GL=disable` skips that; a value the user set wins.
#[cfg(target_os = "linux")]
fn disable_gdk_gl() {
    if std::env::var_os("GDK_GL").is_none() {
        // SAFETY: called first thing in `main`, before any other thread exists.
        unsafe { std::env::set_var("GDK_GL", "disable") };
    }
}
