//! Progress lines on a terminal: one line rewritten in place, at most ~20 times a second, and
//! nothing at all when stderr is not a terminal (logs and scripts stay clean).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    enabled: bool,
    last: Option<Instant>,
    drawn: bool,
}

impl Progress {
    pub fn new(enabled: bool) -> Progress {
        Progress { enabled: enabled && std::io::stderr().is_terminal(), last: None, drawn: false }
    }

    pub fn update(&mut self, label: &str, done: usize, total: usize, item: &str) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if done < total && self.last.is_some_and(|t| now - t < Duration::from_millis(50)) {
            return;
        }
        self.last = Some(now);
        let item: String = item.chars().take(60).collect();
        // A total of 0: a step with no count (the end of a scan).
        let _ = if total == 0 {
            write!(std::io::stderr(), "\r\x1b[K{label}…")
        } else {
            write!(std::io::stderr(), "\r\x1b[K{label} {done}/{total} {item}")
        };
        self.drawn = true;
    }

    pub fn finish(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
            self.drawn = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
