//! Citations against the notes as they are now: the full id of the version a citation names
//! (locally, or in the team's shared tier), the note's current version, where a citation stands
//! (current, drifted, moved, unknown), and cited versions materialised read-only for a door to
//! open. Plain data: the language server turns a state into a diagnostic.

use std::collections::HashMap;
use std::sync::Arc;

use lode_store::Store;

/// The citation with the full id of the version it names: lode writes the first 12 hex digits
/// (more where two versions share them; a full id is read as well). `Ok(Err(why))` when the
/// prefix names no version of this vault, or several.
/// A version this vault never had may be the team's: with `shared`, it is looked up there and
/// its bytes kept beside the store (checked against the id).
pub fn full_id(
    store: &Store,
    c: &lode_core::citation::CitationLink,
    shared: Option<&lode_retrieval::shared::SharedTier>,
) -> Result<Result<lode_core::citation::CitationLink, String>, String> {
    let written = c.version_id.to_ascii_lowercase();
    let found = store.versions_with_prefix(&written, 2).map_err(|e| e.to_string())?;
    if let (true, Some(tier)) = (found.is_empty(), shared) {
        let from_tier = tier.get().and_then(|ix| ix.version_body(&written).map_err(|e| e.detail));
        match from_tier {
            Ok(Some((vid, body))) => {
                store.cache_shared_body(&vid, &body)?;
                return Ok(Ok(lode_core::citation::CitationLink { version_id: vid, ..c.clone() }));
            }
            Ok(None) => return Ok(Err(format!("cited version {written} is neither in this vault's history nor in the shared index"))),
            Err(why) => {
                return Ok(Err(format!(
                    "cited version {written} is not in this vault's history, and the shared index could not be read ({why})"
                )))
            }
        }
    }
    Ok(match found.as_slice() {
        [one] => Ok(lode_core::citation::CitationLink { version_id: one.clone(), ..c.clone() }),
        [] => Err(format!("cited version {written} is not in this vault's history")),
        _ => Err(format!("cited version {written} is ambiguous: more than one version starts with it; write more of its digits")),
    })
}

/// Version texts read for one publication, by id.
#[derive(Default)]
pub struct Bodies(HashMap<String, Option<Arc<Vec<u8>>>>);

impl Bodies {
    fn get(&mut self, store: &Store, id: &str) -> Result<Option<Arc<Vec<u8>>>, String> {
        if let Some(b) = self.0.get(id) {
            return Ok(b.clone());
        }
        let b = store.version_body(id).map_err(|e| e.to_string())?.map(Arc::new);
        self.0.insert(id.to_owned(), b.clone());
        Ok(b)
    }
}

/// The note a cited version belongs to and that note's current version: in the vault's history,
/// or, for a citation into the team's shared tier (`shared_uri`), as the tier last showed it
/// (remembered when an answer or a hover read the tier: no request is made here). The path of
/// a tier note is its address (`s3://…/runbook.md`).
pub fn current_head(
    store: &Store,
    c: &lode_core::citation::CitationLink,
    shared_uri: Option<&str>,
) -> Result<Option<(String, String)>, String> {
    if let Some(local) = store.head_for_version(&c.version_id).map_err(|e| e.to_string())? {
        return Ok(Some(local));
    }
    let Some(uri) = shared_uri.filter(|u| lode_retrieval::shared::in_tier(&c.target, u)) else { return Ok(None) };
    let Some(rel) = tier_rel(&c.target, uri) else { return Ok(None) };
    Ok(store.shared_head(uri, &rel).and_then(|(head, _)| head).map(|h| (format!("{}/{rel}", uri.trim_end_matches('/')), h)))
}

/// The note of the tier a citation's target names, decoded as citations write it.
pub fn tier_rel(target: &str, uri: &str) -> Option<String> {
    lode_retrieval::shared::rel_in_tier(target, uri).map(lode_core::nav::percent_decode)
}

/// Asks the tier which version of the cited note it holds now, remembers it and keeps its
/// text, so the citation is checked like a local one (hover and goto: the network is allowed
/// there, not on the diagnostics path). Failures leave things as they were.
pub fn learn_tier_head(store: &Store, c: &lode_core::citation::CitationLink, tier: &lode_retrieval::shared::SharedTier) {
    let uri = tier.config().uri.clone();
    if !lode_retrieval::shared::in_tier(&c.target, &uri) {
        return;
    }
    let Some(rel) = tier_rel(&c.target, &uri) else { return };
    let Ok(ix) = tier.get() else { return };
    if let Ok(head) = ix.head_of(&rel) {
        if let Some(h) = &head {
            let _ = ix.keep_bodies(store, std::slice::from_ref(h));
        }
        let _ = store.remember_shared_heads(&uri, ix.publish().seq, &[(rel, head)]);
    }
}

/// Where a citation stands against its note now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CitationState {
    /// The quote is in its note's current version (or the note is gone: nothing to compare).
    Current,
    /// The cited version is of the team's shared tier and not kept here yet: not checked (the
    /// network stays off the diagnostics path; a hover fetches it).
    SharedUnchecked { version_id: String },
    /// The cited version is not known here, or is ambiguous: why.
    UnknownVersion(String),
    /// The quoted text is no longer in the note's current version.
    Drifted { path: String, version_id: String },
    /// The note changed since, and the quote is still there: where, and the id to cite now.
    Moved { path: String, head: String, cite_as: String, range: std::ops::Range<usize>, line: usize },
}

/// Where a citation stands now. A citation of the team's shared tier (`shared_uri`) whose
/// version is not kept here yet is not fetched (the network stays off this path).
pub fn citation_state(
    store: &Store,
    c: &lode_core::citation::CitationLink,
    bodies: &mut Bodies,
    shared_uri: Option<&str>,
) -> Result<CitationState, String> {
    let of_tier = shared_uri.is_some_and(|u| lode_retrieval::shared::in_tier(&c.target, u));
    let unknown = |why: String| {
        if of_tier {
            CitationState::SharedUnchecked { version_id: c.version_id.clone() }
        } else {
            CitationState::UnknownVersion(why)
        }
    };
    let c = &match full_id(store, c, None)? {
        Ok(c) => c,
        Err(why) => return Ok(unknown(why)),
    };
    let Ok(Some(body)) = bodies.get(store, &c.version_id) else {
        return Ok(unknown(format!("cited version {} is not in this vault's history", &c.version_id[..12])));
    };
    let quote = String::from_utf8_lossy(body.get(c.span.clone()).unwrap_or(&[])).into_owned();
    let Some((path, head)) = current_head(store, c, shared_uri)? else {
        return Ok(CitationState::Current);
    };
    if head == c.version_id {
        return Ok(CitationState::Current);
    }
    // The tier's current version of the note is known but not kept here: not checked (a hover
    // fetches it), never called drifted for want of its text.
    let Some(head_body) = bodies.get(store, &head)? else {
        return Ok(if of_tier { unknown(String::new()) } else { CitationState::Current });
    };
    let head_text = String::from_utf8_lossy(&head_body);
    Ok(match lode_core::gate::locate(&head_text, &quote) {
        None => CitationState::Drifted { path, version_id: c.version_id.clone() },
        Some((r, _)) => CitationState::Moved {
            path,
            cite_as: store.short_version_id(&head).map_err(|e| e.to_string())?,
            line: lode_core::text::line_of(&head_body, r.start),
            head,
            range: r,
        },
    })
}

/// Writes a version's bytes read-only to `<cache>/lode/versions/<id>.md`, where goto opens text
/// that has no file of its own, without following any link (docs/security.md): never inside the
/// vault, whose `.lode/` may come with a clone; the folder is lode's own (created 0700, checked
/// to be a real directory); the file is written under a fresh name (`O_EXCL` refuses a planted
/// link) and renamed into place, which replaces a link rather than writing through it; a file
/// found there already is used only if it is a regular file holding exactly these bytes.
pub fn materialize(version_id: &str, body: &[u8]) -> Result<std::path::PathBuf, String> {
    use std::io::Write;
    if version_id.is_empty() || !version_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("version id {version_id:?} is not hex"));
    }
    let dir =
        lode_models::user_cache_dir().ok_or("neither XDG_CACHE_HOME nor HOME is set: no folder to open the version from")?.join("versions");
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir);
    }
    #[cfg(not(unix))]
    let _ = std::fs::create_dir_all(&dir);
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    if !meta.file_type().is_dir() {
        return Err(format!("{} is not a directory lode made (a link or a file): nothing is written there", dir.display()));
    }
    let file = dir.join(format!("{version_id}.md"));
    match std::fs::symlink_metadata(&file) {
        Ok(m) if m.file_type().is_file() && std::fs::read(&file).is_ok_and(|b| b == body) => return Ok(file),
        _ => {}
    }
    // A name of this call's own: two go-tos at once never share a temporary file.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{version_id}.{}.{n}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp).and_then(|mut f| f.write_all(body));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", tmp.display()));
    }
    if let Ok(m) = std::fs::metadata(&tmp) {
        let mut perms = m.permissions();
        perms.set_readonly(true);
        let _ = std::fs::set_permissions(&tmp, perms);
    }
    std::fs::rename(&tmp, &file).map_err(|e| format!("cannot move {} into place: {e}", file.display()))?;
    Ok(file)
}
