//! Externals: pages that notes link to, mirrored as snapshots lode can cite. Fetching within
//! bounds (`fetch`), HTML → markdown (`html`), storing what a fetch returned (`record`), how old
//! a snapshot may get (`Freshness`), and annotations: notes that quote a snapshot, re-anchored
//! to the same text in each new one (`annotations`).

pub mod fetch;
pub mod html;

use std::ops::Range;

use lode_core::chunk::{chunk_note, ChunkConfig, PassageKind};
use lode_store::{ExternalInfo, NewSnapshot, SnapshotSaved, Store, StoreError, Via};

pub use fetch::{fetch, FetchError, FetchOptions, Fetched};

/// What a fetch left in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    Saved(SnapshotSaved),
    /// The fetch failed; the current snapshot (if any) stays, and the failure is recorded.
    Failed(FetchError),
}

/// Stores the result of a fetch of `url`.
pub fn record(store: &mut Store, url: &str, via: Via, fetched: Result<Fetched, FetchError>) -> Result<Recorded, StoreError> {
    match fetched {
        Ok(f) => {
            let saved = store.save_snapshot(&NewSnapshot {
                url,
                final_url: &f.final_url,
                status: f.status,
                content_type: &f.content_type,
                text: f.text.as_bytes(),
                via,
            })?;
            Ok(Recorded::Saved(saved))
        }
        // A cancelled fetch says nothing about the page: no failure is recorded against it.
        Err(FetchError::Cancelled) => Ok(Recorded::Failed(FetchError::Cancelled)),
        Err(e) => {
            store.record_fetch_failure(url, via, e.status(), &e.to_string())?;
            Ok(Recorded::Failed(e))
        }
    }
}

/// Fetches `url` and stores the result.
pub fn mirror(store: &mut Store, url: &str, via: Via, opts: &FetchOptions) -> Result<Recorded, StoreError> {
    record(store, url, via, fetch(url, opts))
}

/// Stores what a tool call's fetch of `url` returned (discovered by an ask: no note links to
/// it): the URL after redirects, and the stored snapshot.
pub fn store_for_ask(store: &mut Store, url: &str, fetched: Result<Fetched, FetchError>) -> Result<(String, SnapshotSaved), String> {
    let final_url = fetched.as_ref().map(|f| f.final_url.clone()).unwrap_or_else(|_| url.to_owned());
    match record(store, url, Via::Ask, fetched).map_err(|e| e.to_string())? {
        Recorded::Saved(s) => Ok((final_url, s)),
        Recorded::Failed(e) => Err(e.to_string()),
    }
}

/// How old a snapshot may get before it is stale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Freshness {
    pub stale_days: f64,
}

impl Default for Freshness {
    fn default() -> Self {
        Freshness { stale_days: 30.0 }
    }
}

/// The state of an external, as diagnostics and hover report it.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Never mirrored.
    Missing,
    /// The latest fetch failed (a snapshot may still exist).
    Failed {
        error: String,
        status: Option<u16>,
        has_snapshot: bool,
    },
    Stale {
        age_days: f64,
    },
    Fresh {
        age_days: f64,
    },
}

impl Freshness {
    pub fn state(&self, e: &ExternalInfo, now_ms: i64) -> State {
        if let Some(err) = &e.last_error {
            return State::Failed { error: err.clone(), status: e.last_status, has_snapshot: e.snapshot_id.is_some() };
        }
        match e.age_days(now_ms) {
            None => State::Missing,
            Some(age) if age > self.stale_days => State::Stale { age_days: age },
            Some(age) => State::Fresh { age_days: age },
        }
    }
}

/// A human age: "3 hours", "12 days".
pub fn describe_age(days: f64) -> String {
    let plural = |n: u64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    if days < 1.0 / 1440.0 {
        // "fetched 4 seconds ago", not "1 minute".
        plural((days * 86_400.0).round() as u64, "second")
    } else if days < 1.0 / 24.0 {
        plural((days * 1440.0).round().max(1.0) as u64, "minute")
    } else if days < 1.0 {
        plural((days * 24.0).round() as u64, "hour")
    } else {
        plural(days.floor() as u64, "day")
    }
}

/// Annotations: a note whose frontmatter says `annotates: <url>` comments on that external's
/// snapshot; its block quotes are the spans it comments on.
pub mod annotations {
    use super::*;

    /// The URL a note annotates, from its frontmatter metadata.
    pub fn annotated_url(meta: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
        meta.iter().find(|(k, _)| k.trim().eq_ignore_ascii_case("annotates")).and_then(|(_, v)| {
            let s = v.as_str()?.trim().trim_matches(['"', '\'', '<', '>']).trim();
            lode_store::externals::is_web_url(s).then(|| s.to_owned())
        })
    }

    /// A quoted span of an annotation: where the block quote is in the note, and its text
    /// without the `>` markers.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Quote {
        pub range: Range<usize>,
        pub text: String,
    }

    /// The block quotes of a note (through the chunker, so a `>` inside code is no quote).
    pub fn quotes(note: &[u8]) -> Vec<Quote> {
        let chunked = chunk_note(note, &ChunkConfig::default());
        let mut out: Vec<Quote> = Vec::new();
        for p in chunked.passages.iter().filter(|p| p.kind == PassageKind::Quote) {
            let raw = String::from_utf8_lossy(&note[p.range.clone()]);
            let text = raw
                .lines()
                .map(|l| {
                    let t = l.trim_start();
                    let t = t.strip_prefix('>').unwrap_or(t);
                    t.strip_prefix(' ').unwrap_or(t).trim_end()
                })
                .collect::<Vec<_>>()
                .join("\n")
                .trim()
                .to_owned();
            if text.is_empty() {
                continue;
            }
            // A long quote split by the chunker is one quote.
            if let Some(last) = out.last_mut() {
                if p.split && last.range.end <= p.range.start && note[last.range.end..p.range.start].iter().all(u8::is_ascii_whitespace) {
                    last.range.end = p.range.end;
                    last.text.push('\n');
                    last.text.push_str(&text);
                    continue;
                }
            }
            out.push(Quote { range: p.range.clone(), text });
        }
        out
    }

    /// Where a quote sits in a snapshot's text.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Anchor {
        /// Found: its byte range in the snapshot, and whether it matched exactly (else with
        /// whitespace normalized).
        Anchored { range: Range<usize>, exact: bool },
        /// The snapshot no longer contains it.
        Orphaned,
    }

    /// Re-anchors a quote in a snapshot body: the same text, exactly or up to whitespace; a
    /// quote of several lines also when each line is found, in order (the page's own block
    /// quotes carry `> ` between its lines).
    pub fn anchor(quote: &str, snapshot: &str) -> Anchor {
        if let Some((range, normalised)) = lode_core::gate::locate(snapshot, quote) {
            return Anchor::Anchored { range, exact: !normalised };
        }
        let lines: Vec<&str> = quote.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        if lines.len() < 2 {
            return Anchor::Orphaned;
        }
        let (mut at, mut first) = (0, None);
        for line in lines {
            let Some((r, _)) = lode_core::gate::locate(&snapshot[at..], line) else { return Anchor::Orphaned };
            first.get_or_insert(at + r.start);
            at += r.end;
        }
        Anchor::Anchored { range: first.unwrap_or(0)..at, exact: false }
    }

    /// Every quote of an annotation note against the current snapshot of what it annotates.
    pub fn check(note: &[u8], snapshot: &str) -> Vec<(Quote, Anchor)> {
        quotes(note)
            .into_iter()
            .map(|q| {
                let a = anchor(&q.text, snapshot);
                (q, a)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::annotations::{anchor, check, Anchor};

    #[test]
    fn quotes_are_re_anchored_or_orphaned() {
        let page = "# Guide\n\n> Replicas lag by at most five seconds.\n> Alerts fire at ten.\n\nThe cluster keeps three replicas.\n";
        assert!(matches!(anchor("The cluster keeps three replicas.", page), Anchor::Anchored { exact: true, .. }));
        assert!(matches!(anchor("The cluster  keeps\nthree replicas.", page), Anchor::Anchored { exact: false, .. }), "whitespace");
        // A quote of the page's own block quote: its lines are found in order.
        let Anchor::Anchored { range, .. } = anchor("Replicas lag by at most five seconds.\nAlerts fire at ten.", page) else { panic!() };
        assert_eq!(&page[range], "Replicas lag by at most five seconds.\n> Alerts fire at ten.");
        assert_eq!(anchor("Alerts fire at ten.\nReplicas lag by at most five seconds.", page), Anchor::Orphaned, "order counts");
        assert_eq!(anchor("Replicas lag by at most one second.", page), Anchor::Orphaned);
        let note = "---\nannotates: https://x.example/guide\n---\n# Notes\n\n> The cluster keeps three replicas.\n\n```\n> not a quote\n```\n\n> Gone sentence.\n";
        let got: Vec<(String, bool)> = check(note.as_bytes(), page).into_iter().map(|(q, a)| (q.text, a != Anchor::Orphaned)).collect();
        assert_eq!(got, [("The cluster keeps three replicas.".to_owned(), true), ("Gone sentence.".to_owned(), false)]);
    }
}

#[cfg(test)]
mod age_tests {
    use super::describe_age;

    #[test]
    fn ages_read_as_a_person_would_say_them() {
        let s = 1.0 / 86_400.0;
        assert_eq!(describe_age(4.0 * s), "4 seconds");
        assert_eq!(describe_age(1.0 * s), "1 second");
        assert_eq!(describe_age(59.0 * s), "59 seconds");
        assert_eq!(describe_age(90.0 * s), "2 minutes");
        assert_eq!(describe_age(3.0 / 24.0), "3 hours");
        assert_eq!(describe_age(2.5), "2 days");
    }
}
