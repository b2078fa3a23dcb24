//! Links resolved against the vault's index: where a wiki link or a markdown link leads (a note,
//! a section of this note, a file, nowhere), and whether a link leads to a given note and
//! section. Plain data; the language server's navigation turns targets into locations.

use lode_core::nav::{self, Dest, NavKind, NavLink, NoteKey, Section};
use lode_store::Store;

/// Where a link leads, in vault terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A note of the vault, and the heading fragment the link names (if any).
    Note {
        path: String,
        fragment: Option<String>,
        ambiguous: Vec<String>,
    },
    /// A heading of the same note.
    Here {
        fragment: String,
    },
    /// A file that is not a note (exists or not).
    File {
        path: String,
    },
    External,
    /// No note by that name or path.
    Missing {
        name: String,
    },
    /// Nothing to resolve (tags, footnotes, definitions: handled by their own rules).
    None,
}

/// Resolves a link of the note at `src` through the store.
pub fn resolve(store: &Store, src: &str, link: &NavLink) -> Target {
    let fragment = link.heading.as_ref().map(|h| h.text.clone()).filter(|h| !h.trim().is_empty());
    match (link.kind, link.dest) {
        (_, Dest::External) => Target::External,
        (NavKind::WikiLink, _) => {
            let Some(name) = link.note.as_ref().map(|n| n.text.trim().to_owned()).filter(|n| !n.is_empty()) else {
                return match fragment {
                    Some(f) => Target::Here { fragment: f },
                    None => Target::None,
                };
            };
            let candidates = store.wiki_candidates(&name).unwrap_or_default();
            let keys: Vec<NoteKey> = candidates.into_iter().map(|(path, title, aliases)| NoteKey { path, title, aliases }).collect();
            let r = nav::resolve_wiki(&name, &keys);
            match r.note {
                Some(i) => Target::Note {
                    path: keys[i].path.clone(),
                    fragment,
                    ambiguous: r.others.iter().map(|&o| keys[o].path.clone()).collect(),
                },
                None => Target::Missing { name },
            }
        }
        (NavKind::InlineLink | NavKind::RefDef, Dest::Note) => {
            let Some(raw) = link.note.as_ref().map(|n| n.text.clone()).filter(|n| !n.trim().is_empty()) else {
                return match fragment {
                    Some(f) => Target::Here { fragment: f },
                    None => Target::None,
                };
            };
            let path = nav::resolve_markdown(src, &raw, false);
            for p in [path.clone(), format!("{path}.md")] {
                if store.note_exists(&p).unwrap_or(false) {
                    return Target::Note { path: p, fragment, ambiguous: Vec::new() };
                }
            }
            Target::Missing { name: path }
        }
        (NavKind::InlineLink | NavKind::RefDef, Dest::File) => match &link.note {
            Some(raw) => Target::File { path: nav::resolve_markdown(src, &raw.text, false) },
            None => Target::None,
        },
        (NavKind::InlineLink | NavKind::RefDef, Dest::SameNote) => match fragment {
            Some(f) => Target::Here { fragment: f },
            None => Target::None,
        },
        _ => Target::None,
    }
}

/// Whether `link` (in the note at `src`) leads to the note at `path`, and to `heading` when given.
pub fn links_to(
    store: &Store,
    src: &str,
    link: &NavLink,
    path: &str,
    heading: Option<&Section>,
    cache: &mut std::collections::HashMap<String, Target>,
) -> bool {
    let key = format!("{:?}|{}|{}", link.kind, link.note.as_ref().map_or("", |n| n.text.as_str()), src);
    let target = match cache.get(&key) {
        Some(t) => t.clone(),
        None => {
            let t = resolve(store, src, link);
            cache.insert(key, t.clone());
            t
        }
    };
    let (to_path, fragment) = match (&target, link.heading.as_ref()) {
        (Target::Note { path: p, .. }, h) => (p.as_str(), h.map(|h| h.text.clone())),
        (Target::Here { fragment }, _) => (src, Some(fragment.clone())),
        _ => return false,
    };
    if to_path != path {
        return false;
    }
    match heading {
        None => true,
        Some(s) => fragment.is_some_and(|f| {
            let one = [s.clone()];
            nav::find_section(&one, &f).is_some()
        }),
    }
}
