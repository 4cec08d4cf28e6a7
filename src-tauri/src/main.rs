//! memwall's desktop app entry point: everything lives in the library.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    memwall_app::run();
}
