//! How the engine tells its user things, whichever door it was opened through: the language
//! server's client (`window/showMessage`, `$/progress`), the MCP server's log, a terminal.
//!
//! Invariant: nothing here waits on the door for long. A door that does not answer within its
//! own bound (the language server waits 2 s for a progress token) gets the bar anyway; a door
//! that refuses a bar gets none.

use std::sync::Arc;

use parking_lot::Mutex;

/// How much a message matters to the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Warning,
    Error,
}

/// A door's way of telling its user. Called from the engine's own threads (blocking is fine,
/// briefly), never from an async task.
pub trait Reporter: Send + Sync {
    /// A message the user should see.
    fn say(&self, level: Level, message: String);
    /// Starts a progress bar named `token` (unique per bar); `None`: the door wants none.
    fn begin(&self, token: &str, title: &str, message: String) -> Option<Box<dyn Bar>>;
}

/// One progress bar, ended whenever it was begun.
pub trait Bar: Send {
    fn report(&mut self, message: String, percent: u32);
    fn end(self: Box<Self>, message: String);
}

/// Where a vault's engine reports: set when a door starts the vault, cleared when it goes.
/// Until then (and after), messages go to the log only.
#[derive(Clone, Default)]
pub struct Slot(Arc<Mutex<Option<Arc<dyn Reporter>>>>);

impl Slot {
    pub fn set(&self, reporter: Option<Arc<dyn Reporter>>) {
        *self.0.lock() = reporter;
    }

    pub fn say(&self, level: Level, message: String) {
        let r = self.0.lock().clone();
        if let Some(r) = r {
            r.say(level, message);
        }
    }

    pub fn begin(&self, token: &str, title: &str, message: String) -> Option<Box<dyn Bar>> {
        let r = self.0.lock().clone();
        r?.begin(token, title, message)
    }
}
