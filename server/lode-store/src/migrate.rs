//! Schema migrations: numbered SQL files from `migrations/`, applied forward only at open, each
//! in its own transaction. `PRAGMA user_version` records the schema version.

use rusqlite::Connection;

/// `(version, sql)`, in order. Version N is the N-th file.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../../../migrations/0001_init.sql")),
    (2, include_str!("../../../migrations/0002_egress_log.sql")),
    (3, include_str!("../../../migrations/0003_vectors.sql")),
    (4, include_str!("../../../migrations/0004_stat_symbols.sql")),
    (5, include_str!("../../../migrations/0005_nav.sql")),
    (6, include_str!("../../../migrations/0006_headings.sql")),
    (7, include_str!("../../../migrations/0007_externals.sql")),
    (8, include_str!("../../../migrations/0008_windows.sql")),
    (9, include_str!("../../../migrations/0009_fts_in_code.sql")),
    (10, include_str!("../../../migrations/0010_trigrams_without_positions.sql")),
    (11, include_str!("../../../migrations/0011_headings_path.sql")),
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

pub(crate) enum Outcome {
    UpToDate,
    Migrated,
    TooNew { found: i64 },
}

/// Applies the missing migrations; `upgrading(from)` is called once, holding the lock, before
/// the first one this process applies (none applied: `UpToDate`, even if another process just
/// migrated).
pub(crate) fn migrate(conn: &mut Connection, mut upgrading: impl FnMut(i64)) -> rusqlite::Result<Outcome> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > SCHEMA_VERSION {
        return Ok(Outcome::TooNew { found });
    }
    if found == SCHEMA_VERSION {
        return Ok(Outcome::UpToDate);
    }
    let mut applied = false;
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)?;
        // Re-read inside the lock: another process may have migrated meanwhile.
        let now: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if now >= *version {
            continue;
        }
        if !applied {
            upgrading(now);
            applied = true;
        }
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
    }
    Ok(if applied { Outcome::Migrated } else { Outcome::UpToDate })
}
