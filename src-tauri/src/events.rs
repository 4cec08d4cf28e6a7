//! Everything the app sends to the window besides command results, in one place:
//!
//! - Broadcast events (global Tauri events, for notices any page may act on):
//!   [`STORE_CHANGED`], sent after every write to the store. The tray listens to it
//!   too, so neither the commands nor the tray know about each other.
//! - The payloads streamed over each long command's typed `Channel`: [`Progress`]
//!   (a benchmark), [`ChatEvent`] (a chat turn), [`FetchProgress`] (a model fetch),
//!   [`LoadProgress`] (a load test), [`UrlChatEvent`] (a chat turn sent to a URL),
//!   all memwall-core's own types.
//!
//! `ui/src/types.ts` carries the same names (generated, see `tests/types_ts.rs`).

pub use memwall_core::experiments::bench::Progress;
pub use memwall_core::experiments::chat::ChatEvent;
pub use memwall_core::experiments::loadtest::job::LoadProgress;
pub use memwall_core::experiments::loadtest::url_chat::UrlChatEvent;
pub use memwall_core::probe::catalog::FetchProgress;
use tauri::{AppHandle, Emitter, Listener, Runtime};

/// Sent (with no payload) after the store changed: every page reloads, the tray
/// re-reads its status lines.
pub const STORE_CHANGED: &str = "store-changed";

/// Tells the window and the tray that the store changed.
pub fn store_changed<R: Runtime>(app: &AppHandle<R>) {
    if let Err(e) = app.emit(STORE_CHANGED, ()) {
        tracing::warn!("cannot send {STORE_CHANGED}: {e}");
    }
}

/// Calls `f` after every [`STORE_CHANGED`], whoever sent it.
pub fn on_store_changed<R: Runtime>(app: &AppHandle<R>, f: impl Fn() + Send + 'static) {
    app.listen_any(STORE_CHANGED, move |_| f());
}
