//! The trust boundary between the user and the folders lode reads (docs/security.md): where the
//! user's own files live, which vault folders the user approved (`lode trust`), and whose a
//! store is (a `lode.db` that came with a folder is never cited from).
//!
//! Invariants: every record this module reads or writes lives in the user's own directories,
//! never in a vault; an approval holds for one canonical folder and one hash of its guarded
//! settings, so any change to them asks again; a store is ours only when the token written into
//! it matches the record kept for its canonical path.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::Digest;

/// `$XDG_CONFIG_HOME/lode/config.toml`, else `~/.config/lode/config.toml` (`%APPDATA%\lode` on
/// Windows): the user's own settings, trusted like a command-line flag.
pub fn user_config_path() -> Option<PathBuf> {
    if cfg!(windows) {
        if let Some(a) = std::env::var_os("APPDATA").map(PathBuf::from).filter(|p| p.is_absolute()) {
            return Some(a.join("lode").join("config.toml"));
        }
    }
    Some(lode_models::xdg_dir("XDG_CONFIG_HOME", ".config")?.join("config.toml"))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A record file named for `key` under `<data>/lode/<kind>/`.
fn record_path(kind: &str, key: &Path) -> Result<PathBuf> {
    let data = lode_models::user_data_dir().context("neither XDG_DATA_HOME nor HOME is set: lode has no data directory for its records")?;
    Ok(data.join(kind).join(format!("{}.toml", sha256_hex(key.as_os_str().as_encoded_bytes()))))
}

/// Writes `text` to `path` whole (a temporary file renamed into place), creating its folder.
fn write_record(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().context("a record has a folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

fn read_record(path: &Path) -> Option<toml::Table> {
    std::fs::read_to_string(path).ok()?.parse::<toml::Table>().ok()
}

// ---- approvals ----------------------------------------------------------------------------

/// The user's approval of a folder's guarded settings, as recorded by `lode trust`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Approved with exactly these guarded settings.
    Current,
    /// Approved once, but the guarded settings changed since (a `git pull`).
    Changed,
    Never,
}

/// Whether `folder` (canonical) is approved with guarded settings hashing to `settings`.
pub fn approval(folder: &Path, settings: &str) -> Approval {
    let Ok(path) = record_path("trust", folder) else { return Approval::Never };
    match read_record(&path) {
        Some(t) if t.get("folder").and_then(|f| f.as_str()) == folder.to_str() => {
            if t.get("settings").and_then(|s| s.as_str()) == Some(settings) {
                Approval::Current
            } else {
                Approval::Changed
            }
        }
        _ => Approval::Never,
    }
}

/// Where the approval of `folder` (canonical) is recorded, if lode has a data directory.
pub fn approval_record(folder: &Path) -> Option<PathBuf> {
    record_path("trust", folder).ok()
}

/// Records the user's approval of `folder` with guarded settings hashing to `settings`.
pub fn approve(folder: &Path, settings: &str) -> Result<PathBuf> {
    let path = record_path("trust", folder)?;
    let folder_s = folder.to_str().context("lode approves only folders whose path is UTF-8")?;
    let when = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let text = format!(
        "# Written by `lode trust`: the user approved this folder's guarded settings (docs/security.md).\nfolder = {}\nsettings = \"{settings}\"\napproved_at = {when}\n",
        serde_json::to_string(folder_s)?
    );
    write_record(&path, &text)?;
    Ok(path)
}

/// Withdraws an approval; whether there was one.
pub fn revoke(folder: &Path) -> Result<bool> {
    let path = record_path("trust", folder)?;
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

// ---- store binding ------------------------------------------------------------------------

/// The `meta` key holding the store's owner token.
const OWNER_KEY: &str = "owner_token";

/// Whose the store at a path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// No file (or an empty one): lode makes a new store there.
    Missing,
    /// Made by lode for this user at this path.
    Ours,
    /// A lode store lode did not make here: it came with the folder, was copied or moved from
    /// elsewhere, or was made by a lode older than the binding.
    Foreign,
    /// Not a lode store lode can read (corrupt, another program's): opening it says what it is.
    Unreadable,
}

fn canonical_db(db: &Path) -> PathBuf {
    // The file may not exist yet: its folder then.
    if let Ok(c) = db.canonicalize() {
        return c;
    }
    match (db.parent().and_then(|p| p.canonicalize().ok()), db.file_name()) {
        (Some(dir), Some(name)) => dir.join(name),
        _ => db.to_path_buf(),
    }
}

/// Reads the owner token of the store at `db`, read-only (nothing written to a foreign file).
fn token_in(db: &Path) -> std::result::Result<Option<String>, ()> {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = rusqlite::Connection::open_with_flags(db, flags).map_err(|_| ())?;
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
    let has_meta: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('meta', 'notes', 'versions', 'passages')",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n == 4)
        .map_err(|_| ())?;
    if !has_meta {
        return Err(());
    }
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [OWNER_KEY], |r| r.get::<_, String>(0)).map(Some).or_else(|e| match e {
        rusqlite::Error::QueryReturnedNoRows => Ok(None),
        _ => Err(()),
    })
}

/// The files SQLite keeps beside a database.
const SIDECARS: [&str; 3] = ["-wal", "-shm", "-journal"];

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether the store at `db`, or a file SQLite keeps beside it, is a link: a write through it
/// would land wherever the folder pointed it.
fn linked(db: &Path) -> bool {
    is_link(db) || SIDECARS.iter().any(|s| is_link(&PathBuf::from(format!("{}{s}", db.display()))))
}

/// Checks that lode's state folder (`<vault>/.lode`, or the folder of `--db`) holds no link
/// where lode writes: the folder itself, the vector tables' folder and everything in it (tables,
/// their manifests, data and `serving.json`), and the shared versions. A clone can plant any of
/// them; lode writes through none (docs/security.md). SQLite's own files beside the store are
/// checked by [`owner`] (a linked one makes the store foreign).
pub fn check_state_dir(dir: &Path) -> Result<()> {
    if is_link(dir) {
        return Err(link_error(dir));
    }
    let mut seen = 0usize;
    for name in ["vectors", "shared-versions"] {
        let p = dir.join(name);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => return Err(link_error(&p)),
            Ok(m) if m.is_dir() => walk_for_links(&p, &mut seen)?,
            _ => {}
        }
    }
    Ok(())
}

/// Most entries [`check_state_dir`] reads under one state folder: far more than lode's own
/// vector tables hold, bounded so a folder stuffed with files cannot make every command slow.
const MAX_STATE_ENTRIES: usize = 200_000;

fn link_error(p: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "{} is a link to {}: lode writes its index only into real folders and files it made; remove the link (lode makes what it needs)",
        p.display(),
        std::fs::read_link(p).map(|t| t.display().to_string()).unwrap_or_default()
    )
}

/// The first link anywhere under `d` (see [`check_state_dir`]). Past [`MAX_STATE_ENTRIES`]
/// it fails closed: a folder that large is not lode's, and what is not checked is not trusted.
fn walk_for_links(d: &Path, seen: &mut usize) -> Result<()> {
    let rd = std::fs::read_dir(d).with_context(|| format!("cannot read {}", d.display()))?;
    for e in rd.flatten() {
        *seen += 1;
        if *seen > MAX_STATE_ENTRIES {
            anyhow::bail!(
                "{} holds more than {MAX_STATE_ENTRIES} entries: more than lode's own index ever holds, so lode does not check or write it; \
                 move it aside and lode rebuilds it",
                d.display()
            );
        }
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_symlink() {
            return Err(link_error(&p));
        }
        if ft.is_dir() {
            walk_for_links(&p, seen)?;
        }
    }
    Ok(())
}

/// Whose the store at `db` is.
pub fn owner(db: &Path) -> Owner {
    if linked(db) {
        return Owner::Foreign;
    }
    match std::fs::metadata(db) {
        Err(_) => return Owner::Missing,
        Ok(m) if m.len() == 0 => return Owner::Missing,
        Ok(_) => {}
    }
    let Ok(token) = token_in(db) else { return Owner::Unreadable };
    let recorded = record_path("stores", &canonical_db(db))
        .ok()
        .and_then(|p| read_record(&p))
        .and_then(|t| t.get("token")?.as_str().map(str::to_owned));
    match (token, recorded) {
        (Some(t), Some(r)) if !t.is_empty() && t == r => Owner::Ours,
        _ => Owner::Foreign,
    }
}

/// What lode does with the store at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// None there yet: lode makes one.
    New,
    /// Made by lode here for this user.
    Ours,
    /// One lode must not cite from.
    NotOurs,
}

/// Whose the store at `db` is, as lode acts on it. A file whose owner cannot be read is opened
/// the usual way: if that fails, its error says what the file is (corrupt, another program's,
/// half made) and nothing is moved; if it opens, it is a lode store that is not ours (an owner
/// row of the wrong type, no `meta` table: a forgery).
pub fn judge(db: &Path, opts: &lode_store::StoreOptions) -> Result<Verdict> {
    Ok(match owner(db) {
        Owner::Missing => Verdict::New,
        Owner::Ours => Verdict::Ours,
        Owner::Foreign => Verdict::NotOurs,
        Owner::Unreadable => {
            drop(lode_store::Store::open(db, opts.clone())?);
            Verdict::NotOurs
        }
    })
}

/// Readies the store at `db` for a command or server that writes, as [`judge`] found it: one
/// that is not ours is moved aside, and a new one is made, cleared of what came with the folder
/// beside it, bound to this user and kept out of version control. The line to tell the user,
/// when a store was moved aside.
pub fn ready_for_writing(db: &Path, vectors: &Path, opts: &lode_store::StoreOptions, verdict: Verdict) -> Result<Option<String>> {
    let mut said = None;
    if verdict == Verdict::NotOurs {
        let moved = move_aside(db, vectors)?;
        said = Some(moved_aside_line(db, &moved));
    }
    if verdict != Verdict::Ours {
        if let Some(dir) = db.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        clear_orphan_state(db, vectors)?;
        drop(lode_store::Store::open(db, opts.clone())?);
        bind(db)?;
        if let Some(dir) = db.parent().filter(|d| d.file_name().is_some_and(|n| n == ".lode")) {
            ignore_state(dir);
        }
    }
    Ok(said)
}

/// Binds the store at `db` (made by this process, with lode's schema) to this user: a fresh
/// random token in its `meta` table and in a record under `<data>/lode/stores/`. The record is
/// written first, so a crash between the two leaves a store lode treats as foreign (rebuilt),
/// never a foreign one taken as ours.
pub fn bind(db: &Path) -> Result<()> {
    let token = random_token();
    let canonical = canonical_db(db);
    let record = record_path("stores", &canonical)?;
    write_record(
        &record,
        &format!(
            "# Written by lode: the store at this path was made by lode for this user (docs/security.md).\ndb = {}\ntoken = \"{token}\"\n",
            serde_json::to_string(&canonical.to_string_lossy())?
        ),
    )?;
    let conn = rusqlite::Connection::open(db).with_context(|| format!("cannot open {}", db.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [OWNER_KEY, &token],
    )
    .with_context(|| format!("cannot record the owner of {}", db.display()))?;
    Ok(())
}

/// Moves a foreign store aside with its WAL files and vector tables (`<name>.foreign-<time>`),
/// keeping every byte; returns where the database went.
pub fn move_aside(db: &Path, vectors: &Path) -> Result<PathBuf> {
    let when = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let aside = |p: &Path| p.with_file_name(format!("{}.foreign-{when}", p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
    let moved = aside(db);
    // A link is moved as a link: nothing is written through it.
    if std::fs::symlink_metadata(db).is_ok() {
        std::fs::rename(db, &moved).with_context(|| format!("cannot move {} aside", db.display()))?;
    }
    for suffix in SIDECARS {
        let side = PathBuf::from(format!("{}{suffix}", db.display()));
        if std::fs::symlink_metadata(&side).is_ok() {
            std::fs::rename(&side, PathBuf::from(format!("{}{suffix}", moved.display())))
                .with_context(|| format!("cannot move {} aside", side.display()))?;
        }
    }
    if std::fs::symlink_metadata(vectors).is_ok() {
        let _ = std::fs::rename(vectors, aside(vectors));
    }
    Ok(moved)
}

/// Keeps lode's state out of version control: when lode makes a store, it writes a
/// `.gitignore` beside it (if there is none) that ignores everything there but the config. An
/// index holds every version of every note, and state committed to a repository is state a
/// clone can forge (docs/security.md). Written new, never through a link; a failure is no error.
pub fn ignore_state(state_dir: &Path) {
    use std::io::Write;
    let file = state_dir.join(".gitignore");
    if std::fs::symlink_metadata(&file).is_ok() {
        return;
    }
    if let Ok(mut f) = std::fs::OpenOptions::new().write(true).create_new(true).open(&file) {
        let _ = f.write_all(
            b"# Written by lode: its index, vectors and caches are local state, never to be committed\n# (they hold every version of every note; see docs/security.md). Only the config is shared.\n*\n!.gitignore\n!config.toml\n",
        );
    }
}

/// Moves aside state that lies beside a store lode is about to make at `db`: vector tables and
/// their `serving.json`, and SQLite's journal or WAL files, that came with the folder (SQLite
/// would replay a journal into the new store). Every byte kept, nothing of it read.
pub fn clear_orphan_state(db: &Path, vectors: &Path) -> Result<()> {
    let when = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let sidecars = SIDECARS.iter().map(|s| PathBuf::from(format!("{}{s}", db.display())));
    for p in std::iter::once(vectors.to_path_buf()).chain(sidecars) {
        if std::fs::symlink_metadata(&p).is_ok() {
            let aside = p.with_file_name(format!("{}.foreign-{when}", p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
            std::fs::rename(&p, &aside).with_context(|| format!("cannot move {} aside", p.display()))?;
        }
    }
    Ok(())
}

/// The one line said when a foreign store is moved aside.
pub fn moved_aside_line(db: &Path, moved: &Path) -> String {
    format!(
        "lode: {} was not made by lode for you at this path (it came with the folder, was copied, or predates store binding); \
         moved it aside to {} and rebuilding the index from the notes: nothing is cited from it",
        db.display(),
        moved.display()
    )
}

/// The error a reading command gives for a foreign store.
pub fn foreign_error(db: &Path, vault: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "{} was not made by lode for you at this path (it came with the folder, was copied, or predates store binding), \
         so nothing is cited from it; `lode index --vault {}` moves it aside and rebuilds the index from the notes",
        db.display(),
        vault.display()
    )
}

fn random_token() -> String {
    let mut bytes = [0u8; 16];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if from_os.is_err() {
        // No /dev/urandom (Windows): the hasher's per-process random keys, twice.
        use std::hash::{BuildHasher, Hasher};
        for half in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
            h.write_u32(std::process::id());
            half.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tokens_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
