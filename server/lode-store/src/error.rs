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
        match e.sqlite_error_code() {
            Some(DatabaseBusy | DatabaseLocked) => StoreError::Locked { path },
            Some(NotADatabase | DatabaseCorrupt) => StoreError::Corrupt { path, detail: e.to_string() },
            _ => StoreError::Sqlite { path, source: e },
        }
    }
}
