//! A generated vault for scale benchmarks and soak runs: `n` notes in nested folders, with
//! frontmatter on some, headings, lists, wiki and markdown links to other notes, tags, and sizes
//! spread like a real vault's (most notes a few hundred bytes to a few KB, a long tail to ~40 KB).
//! Deterministic for a seed, so figures are comparable between runs.

use std::path::Path;

use anyhow::{Context, Result};

/// xorshift64*: enough randomness for test data, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "review",
    "budget",
    "incident",
    "release",
    "migration",
    "design",
    "retro",
    "meeting",
    "draft",
    "plan",
    "server",
    "cluster",
    "backup",
    "policy",
    "roadmap",
    "customer",
    "invoice",
    "latency",
    "garden",
    "recipe",
    "reading",
    "travel",
    "training",
    "hiring",
    "onboarding",
    "security",
    "certificate",
    "rotation",
    "database",
    "index",
    "cache",
    "queue",
    "deadline",
    "quarter",
    "estimate",
    "partner",
    "contract",
    "renewal",
    "audit",
    "experiment",
    "hypothesis",
    "result",
    "protein",
    "enzyme",
    "sample",
    "dataset",
    "model",
    "baseline",
    "metric",
    "threshold",
    "alert",
    "dashboard",
    "runbook",
    "outage",
    "capacity",
    "storage",
    "network",
    "firewall",
    "gateway",
    "compiler",
    "parser",
    "schema",
    "ticket",
    "sprint",
];

const FILLER: &[&str] = &[
    "the", "team", "agreed", "that", "we", "should", "check", "every", "week", "before", "after", "with", "for", "and", "notes", "from",
    "last", "time", "show", "a", "small", "large", "change", "in", "on", "is", "was", "will", "be", "needs", "owner", "follow", "up",
    "because", "of", "it", "this", "next", "days", "hours", "percent", "about",
];

fn sentence(rng: &mut Rng, out: &mut String) {
    let n = 8 + rng.below(14);
    for i in 0..n {
        let w = if rng.below(4) == 0 { *rng.pick(WORDS) } else { *rng.pick(FILLER) };
        if i == 0 {
            let mut c = w.chars();
            if let Some(f) = c.next() {
                out.extend(f.to_uppercase());
                out.push_str(c.as_str());
            }
        } else {
            out.push(' ');
            out.push_str(w);
        }
        if rng.below(40) == 0 {
            out.push_str(&format!(" {}", rng.below(1000)));
        }
    }
    out.push_str(". ");
}

/// The vault-relative path of note `i` of `n`.
pub fn note_path(i: usize) -> String {
    format!("area-{:02}/topic-{:03}/note-{i:06}.md", i % 37, (i / 37) % 120)
}

/// A section name of note `i`: what `workspace/symbol` queries type.
pub fn heading(rng: &mut Rng, i: usize) -> String {
    let first: &str = rng.pick::<&str>(WORDS);
    format!("{} {} {}", capital(first), rng.pick(WORDS), i % 997)
}

fn capital(w: &str) -> String {
    let mut c = w.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// Note `i` of `n`, deterministic for `seed`.
pub fn note(seed: u64, i: usize, n: usize) -> String {
    let mut rng = Rng::new(seed ^ (i as u64).wrapping_mul(0x100_0000_01B3));
    // Size classes: 60% short, 30% medium, 9% long, 1% very long.
    let target = match rng.below(100) {
        0..=59 => 200 + rng.below(1200),
        60..=89 => 1400 + rng.below(4000),
        90..=98 => 5400 + rng.below(12_000),
        _ => 17_400 + rng.below(24_000),
    };
    let mut s = String::with_capacity(target + 512);
    if rng.below(3) == 0 {
        s.push_str(&format!(
            "---\ntags: [{}, {}]\nstatus: {}\n---\n\n",
            rng.pick(WORDS),
            rng.pick(WORDS),
            rng.pick(&["draft", "done", "open"])
        ));
    }
    let first: &str = rng.pick::<&str>(WORDS);
    s.push_str(&format!("# {} {} {i}\n\n", capital(first), rng.pick(WORDS)));
    while s.len() < target {
        match rng.below(10) {
            0 | 1 => s.push_str(&format!("\n## {}\n\n", heading(&mut rng, i))),
            2 => {
                for _ in 0..(2 + rng.below(4)) {
                    s.push_str("- ");
                    sentence(&mut rng, &mut s);
                    s.push('\n');
                }
                s.push('\n');
            }
            3 => {
                let j = rng.below(n);
                let stem = note_path(j).rsplit('/').next().unwrap_or_default().trim_end_matches(".md").to_owned();
                if rng.below(2) == 0 {
                    s.push_str(&format!("See [[{stem}]] and #{}.\n\n", rng.pick(WORDS)));
                } else {
                    s.push_str(&format!("Related: [{stem}](/{}).\n\n", note_path(j)));
                }
            }
            _ => {
                for _ in 0..(1 + rng.below(4)) {
                    sentence(&mut rng, &mut s);
                }
                s.push_str("\n\n");
            }
        }
    }
    s
}

/// Writes (or completes) a generated vault of `n` notes under `dir`. Existing files with the
/// right content are left alone, so a second run costs a read per note.
pub fn write_vault(dir: &Path, n: usize, seed: u64, mut progress: impl FnMut(usize, usize)) -> Result<u64> {
    let mut bytes = 0u64;
    for i in 0..n {
        let path = dir.join(note_path(i));
        let body = note(seed, i, n);
        bytes += body.len() as u64;
        if std::fs::read(&path).is_ok_and(|b| b == body.as_bytes()) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
        if i % 1000 == 999 {
            progress(i + 1, n);
        }
    }
    progress(n, n);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn generated_notes_are_deterministic_and_varied() {
        let a = super::note(7, 3, 100);
        assert_eq!(a, super::note(7, 3, 100));
        assert_ne!(a, super::note(8, 3, 100));
        let sizes: Vec<usize> = (0..2000).map(|i| super::note(1, i, 2000).len()).collect();
        let mut sorted = sizes.clone();
        sorted.sort();
        assert!(sorted[1000] > 500 && sorted[1000] < 3000, "median {}", sorted[1000]);
        assert!(sorted[1990] > 15_000, "a long tail: {}", sorted[1990]);
        let links = (0..200).filter(|&i| super::note(1, i, 2000).contains("[[")).count();
        assert!(links > 50, "{links}");
    }
}
