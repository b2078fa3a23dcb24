//! Store errors, classified so a user sees what happened to which file.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path} is locked by another process (another `lode index` or editor?); try again when it finishes")]
    Locked { path: PathBuf },
    #[error("database {path} is corrupt or not a lode database ({detail}); it was left untouched — move it aside and run `lode index` to rebuild (note history in it is not recovered)")]
    Corrupt { path: PathBuf, detail: String },
    #[error("database {path} has schema version {found}, newer than this lode supports ({supported}); upgrade lode")]
    TooNew { path: PathBuf, found: i64, supported: i64 },
    #[error("database {path} has schema version {found}, older than this lode's ({supported}); the next `lode index` (or the language server) upgrades it")]
    Outdated { path: PathBuf, found: i64, supported: i64 },
    #[error("database {path} is not a lode index: it holds tables lode did not make ({tables}); it was left untouched — point lode at another file, or move it aside and run `lode index`")]
    Foreign { path: PathBuf, tables: String },
    #[error("database {path} is a half-made lode index (schema version {found}, but {missing} missing); it was left untouched — move it aside and run `lode index` to rebuild (note history in it is not recovered)")]
    Incomplete { path: PathBuf, found: i64, missing: String },
    #[error("the disk holding {} is full ({free} bytes free): lode wrote nothing; free some space and run it again", dir.display())]
    DiskFull { dir: PathBuf, free: u64 },
    #[error("cannot open database {path}: {source}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("no note at {0}")]
    UnknownNote(String),
    #[error("a note already exists at {0}")]
    PathTaken(String),
    #[error("database {path}: {source}")]
    Sqlite { path: PathBuf, source: rusqlite::Error },
}

impl StoreError {
    pub(crate) fn from_sqlite(path: &std::path::Path, e: rusqlite::Error) -> StoreError {
        use rusqlite::ErrorCode::*;
        let path = path.to_path_buf();
        let dir = path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
        match e.sqlite_error_code() {
            Some(DiskFull) => StoreError::DiskFull { free: free_bytes(&dir).unwrap_or(0), dir },
            // An I/O error while growing the shared-memory index or writing (SQLite says "disk
            // I/O error … xShmMap") is a full disk when the disk is full: say that, not the code.
            Some(SystemIoFailure) if free_bytes(&dir).is_some_and(|f| f < FULL_BELOW) => {
                StoreError::DiskFull { free: free_bytes(&dir).unwrap_or(0), dir }
            }
            Some(DatabaseBusy | DatabaseLocked) => StoreError::Locked { path },
            Some(NotADatabase | DatabaseCorrupt) => StoreError::Corrupt { path, detail: e.to_string() },
            _ => StoreError::Sqlite { path, source: e },
        }
    }
}

/// Below this many free bytes, an I/O error on the disk is taken for a full disk.
const FULL_BELOW: u64 = 1 << 20;

/// Free bytes (for an unprivileged user) on the file system holding `dir`.
#[cfg(not(unix))]
fn free_bytes(_dir: &std::path::Path) -> Option<u64> {
    None
}

/// Free bytes (for an unprivileged user) on the file system holding `dir`.
#[cfg(unix)]
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    let free = st.f_bavail as u64 * st.f_frsize as u64;
    (rc == 0).then_some(free)
}
