//! The vector index: one LanceDB table per embedding model (named by model id and dimensions,
//! so vectors of different models are never mixed), holding one row per embedding window,
//! keyed by the window's first passage (`passage_id`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::types::Float32Type;
use arrow_array::{Array, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase};
use lancedb::{DistanceType, Table};

use crate::RetrievalError;

/// Budget of each LanceDB cache (index, metadata), in bytes.
const CACHE_BYTES: usize = 16 << 20;

/// Longest a read of the table (a search, a count, a check) may take, and a write (which may
/// read: a delete scans, a compaction rewrites): far above what a healthy table needs (a search
/// of 100k vectors takes tens of ms), so only a stalled operation reaches it.
const READ_LIMIT: std::time::Duration = std::time::Duration::from_secs(15);
const WRITE_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);
/// Training an approximate index over millions of vectors takes minutes on two cores.
const INDEX_LIMIT: std::time::Duration = std::time::Duration::from_secs(3 * 3600);

/// Rows from which the table gets an approximate index (IVF-PQ, cosine). Below it a flat search
/// reads every vector and is exact: tens of milliseconds for 100,000 vectors of 384 floats.
/// Above it a flat search grows with the table (2.3 s at a million vectors here); the index
/// keeps a question to the partitions it probes (docs/benchmarks.md, "Dense queries at scale").
pub const ANN_MIN_ROWS: usize = 100_000;
/// IVF partitions a question reads, and how many more candidates than asked for are re-scored
/// with their exact vectors (PQ distances are approximate).
pub const ANN_NPROBES: usize = 24;
pub const ANN_REFINE: u32 = 25;

/// One vector to store.
pub struct VectorRow {
    pub passage_id: i64,
    pub note_id: i64,
    pub version_id: String,
    pub vector: Vec<f32>,
}

pub struct VectorIndex {
    rt: tokio::runtime::Runtime,
    db: lancedb::Connection,
    table: Table,
    name: String,
    dims: usize,
    path: PathBuf,
    /// The table could not be read when it was opened: why, and where it was moved aside (a
    /// fresh, empty one replaced it; the worker rebuilds it from the passages).
    mended: Option<String>,
}

/// Moves the table `name` under `dir` aside (if anything is left of it) and creates an empty one
/// in its place, on a fresh connection (the old one caches the lost table's manifest). Returns
/// the sentence that tells the user, with the new connection and table.
async fn replace_table(dir: &Path, name: &str, dims: usize, cause: &str) -> Result<(String, lancedb::Connection, Table), lancedb::Error> {
    let from = dir.join(format!("{name}.lance"));
    let why = if from.exists() {
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let to = dir.join(format!("{name}.lance.broken-{stamp}"));
        std::fs::rename(&from, &to).map_err(|io| lancedb::Error::Runtime { message: format!("{cause}; moving it aside failed: {io}") })?;
        format!("the vector table could not be read ({cause}); it was moved aside to {} and is rebuilt from the passages", to.display())
    } else {
        format!("the vector table {} was deleted; it is rebuilt from the passages", from.display())
    };
    std::fs::create_dir_all(dir).map_err(|io| lancedb::Error::Runtime { message: format!("creating {}: {io}", dir.display()) })?;
    let session = Arc::new(lancedb::Session::new(CACHE_BYTES, CACHE_BYTES, Arc::new(lancedb::ObjectStoreRegistry::default())));
    let db = lancedb::connect(&dir.to_string_lossy()).session(session).execute().await?;
    let table = db.create_empty_table(name, schema(dims)).execute().await?;
    Ok((why, db, table))
}

/// The model whose table answers questions, recorded beside the tables (`serving.json`) once
/// its table is complete. When `[models] embedder` names another model, the language server goes
/// on embedding questions with this one and searching its table while the new model's table is
/// filled, and swaps once that is complete: changing the embedder never leaves questions without
/// vectors.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Serving {
    pub id: String,
    /// The model's folder (to load it again after a restart mid-switch); empty for a server's.
    pub path: PathBuf,
    pub dims: usize,
}

impl Serving {
    fn file(dir: &Path) -> PathBuf {
        dir.join("serving.json")
    }

    /// The record, if there is one whose model folder is an absolute path (lode writes no
    /// other: a relative one would be resolved against wherever the server was started), or
    /// that names a server's model (`openai:…`, no folder).
    pub fn read(dir: &Path) -> Option<Serving> {
        let file = Self::file(dir);
        if std::fs::symlink_metadata(&file).map_or(true, |m| !m.file_type().is_file() || m.len() > 64 << 10) {
            return None;
        }
        let rec: Serving = serde_json::from_slice(&std::fs::read(file).ok()?).ok()?;
        (rec.path.is_absolute() || rec.id.starts_with("openai:")).then_some(rec)
    }

    /// Written whole: a temporary file of its own, created new (a planted link is refused, not
    /// written through), renamed over the old one (which replaces a link, never follows it).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        use std::io::Write;
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".serving.json.{}.{n}.tmp", std::process::id()));
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let r = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&bytes))
            .and_then(|()| std::fs::rename(&tmp, Self::file(dir)));
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }
}

/// Table name for a model: letters, digits and `_` only.
/// The `version_id` prefix of a placeholder row: a window whose passages may not go to an
/// embedder off this machine holds a fixed vector under it, so the bookkeeping stays whole (every
/// window has its row) while the text never left; searches skip these rows.
pub const WITHHELD: &str = "withheld:";

/// A placeholder row's vector: the first axis, the same for every such window.
pub fn placeholder_vector(dims: usize) -> Vec<f32> {
    let mut v = vec![0f32; dims];
    if let Some(x) = v.first_mut() {
        *x = 1.0;
    }
    v
}

pub fn table_name(model_id: &str, dims: usize) -> String {
    let id: String = model_id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    format!("passages_{id}_{dims}")
}

fn schema(dims: usize) -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("passage_id", DataType::Int64, false),
        Field::new("note_id", DataType::Int64, false),
        Field::new("version_id", DataType::Utf8, false),
        Field::new("vector", DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), dims as i32), false),
    ]))
}

impl VectorIndex {
    /// Opens (creating if needed) the table for `model_id` under `dir`. A table that cannot be
    /// read (damaged, truncated, half-deleted) is moved aside and replaced by an empty one, which
    /// the embedding worker then fills from the passages; [`VectorIndex::mended`] says so.
    pub fn open(dir: &Path, model_id: &str, dims: usize) -> Result<VectorIndex, RetrievalError> {
        Self::open_with(dir, model_id, dims, true).map(|i| i.expect("a created table is always there"))
    }

    /// Opens the table for `model_id` under `dir` for reading, creating nothing: `None` when
    /// there is none (no vectors were ever made), an error when it cannot be read.
    pub fn open_existing(dir: &Path, model_id: &str, dims: usize) -> Result<Option<VectorIndex>, RetrievalError> {
        if !dir.join(format!("{}.lance", table_name(model_id, dims))).exists() {
            return Ok(None);
        }
        Self::open_with(dir, model_id, dims, false)
    }

    fn open_with(dir: &Path, model_id: &str, dims: usize, create: bool) -> Result<Option<VectorIndex>, RetrievalError> {
        let err = |e: lancedb::Error| RetrievalError::Index { path: dir.to_path_buf(), detail: e.to_string() };
        if create {
            std::fs::create_dir_all(dir).map_err(|e| RetrievalError::Index { path: dir.to_path_buf(), detail: e.to_string() })?;
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| RetrievalError::Index { path: dir.to_path_buf(), detail: e.to_string() })?;
        let uri = dir.to_string_lossy().into_owned();
        let name = table_name(model_id, dims);
        let mut mended = None;
        let opened = rt.block_on(async {
            // Small caches: LanceDB's defaults (1 GB of metadata) keep every version's manifest a
            // pass of hundreds of rounds makes, and RSS grew with the rounds.
            let session = Arc::new(lancedb::Session::new(CACHE_BYTES, CACHE_BYTES, Arc::new(lancedb::ObjectStoreRegistry::default())));
            let db = lancedb::connect(&uri).session(session).execute().await?;
            let names = db.table_names().execute().await?;
            if !names.contains(&name) {
                if !create {
                    return Ok(None);
                }
                let table = db.create_empty_table(&name, schema(dims)).execute().await?;
                return Ok(Some((db, table)));
            }
            // Opened is not read: count the rows and read one, so a damaged table fails here.
            let checked = async {
                let t = db.open_table(&name).execute().await?;
                t.count_rows(None).await?;
                let _: Vec<RecordBatch> = t.query().limit(1).execute().await?.try_collect().await?;
                Ok::<_, lancedb::Error>(t)
            }
            .await;
            match checked {
                Ok(t) => Ok(Some((db, t))),
                Err(e) if create => {
                    let (why, db, table) = replace_table(dir, &name, dims, &e.to_string()).await?;
                    mended = Some(why);
                    Ok(Some((db, table)))
                }
                Err(e) => Err(e),
            }
        });
        let Some((db, table)) = opened.map_err(err)? else { return Ok(None) };
        Ok(Some(VectorIndex { rt, db, table, name, dims, path: dir.to_path_buf(), mended }))
    }

    /// Why the table was replaced when it was opened or mended, if it was (see
    /// [`VectorIndex::open`], [`VectorIndex::mend`]).
    pub fn mended(&self) -> Option<&str> {
        self.mended.as_deref()
    }

    /// Whether the table can still be read whole: its folder is there and every row reads back,
    /// all columns decoded. A table deleted or damaged under a running process still counts its
    /// rows (the manifest is cached) and still takes writes; it fails only when its data is
    /// read, and a damaged page of one column leaves the others readable, so this reads it all
    /// (run after a failure, not on every use).
    pub fn check(&self) -> Result<(), RetrievalError> {
        let folder = self.table_dir();
        if !folder.is_dir() {
            return Err(self.err(format!("{} is gone", folder.display())));
        }
        let counted = self.count()?;
        let batches: Vec<RecordBatch> =
            self.bounded(READ_LIMIT, "reading the table", async { self.table.query().execute().await?.try_collect::<Vec<_>>().await })?;
        let read: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if read != counted {
            return Err(self.err(format!("{read} of {counted} rows could be read")));
        }
        Ok(())
    }

    /// Replaces a table that [`VectorIndex::check`] found unreadable (`cause`) with an empty one:
    /// what is left of it is moved aside (never deleted), and the caller rebuilds the vectors
    /// from the passages. Returns what happened, in a sentence for the user (also kept as
    /// [`VectorIndex::mended`]).
    pub fn mend(&mut self, cause: &str) -> Result<String, RetrievalError> {
        let (dir, name, dims) = (self.path.clone(), self.name.clone(), self.dims);
        let (why, db, table) = self.rt.block_on(replace_table(&dir, &name, dims, cause)).map_err(|e| self.err(e))?;
        (self.db, self.table) = (db, table);
        self.mended = Some(why.clone());
        Ok(why)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The table's own folder (`<dir>/<name>.lance`).
    pub fn table_dir(&self) -> PathBuf {
        self.path.join(format!("{}.lance", self.name))
    }

    /// Runs one LanceDB operation, for at most `limit`. A damaged data file can panic inside
    /// one of LanceDB's own tasks (a decode assertion), and the operation then never ends: it
    /// fails here instead, as a table that cannot be read, and the caller mends it.
    fn bounded<T>(
        &self,
        limit: std::time::Duration,
        what: &str,
        op: impl std::future::Future<Output = Result<T, lancedb::Error>>,
    ) -> Result<T, RetrievalError> {
        match self.rt.block_on(async { tokio::time::timeout(limit, op).await }) {
            Ok(r) => r.map_err(|e| self.err(e)),
            Err(_) => Err(self.err(format!("{what} did not finish within {} s (damaged data?)", limit.as_secs()))),
        }
    }

    fn err(&self, e: impl std::fmt::Display) -> RetrievalError {
        RetrievalError::Index { path: self.path.clone(), detail: e.to_string() }
    }

    /// Adds vectors, replacing any rows these keys already had.
    pub fn upsert(&self, rows: &[VectorRow]) -> Result<(), RetrievalError> {
        self.delete(&rows.iter().map(|r| r.passage_id).collect::<Vec<_>>())?;
        self.add(rows)
    }

    /// Appends vectors. The caller knows no row with these keys exists (a delete scans the whole
    /// table, so the embedding worker deletes only keys it has queued for deletion).
    pub fn add(&self, rows: &[VectorRow]) -> Result<(), RetrievalError> {
        if rows.is_empty() {
            return Ok(());
        }
        if let Some(bad) = rows.iter().find(|r| r.vector.len() != self.dims) {
            return Err(self.err(format!(
                "passage {} has a {}-dimensional vector, the index holds {}",
                bad.passage_id,
                bad.vector.len(),
                self.dims
            )));
        }
        let batch = RecordBatch::try_new(
            schema(self.dims),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.passage_id))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.note_id))),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.version_id.as_str()))),
                Arc::new(FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
                    rows.iter().map(|r| Some(r.vector.iter().map(|&x| Some(x)).collect::<Vec<_>>())),
                    self.dims as i32,
                )),
            ],
        )
        .map_err(|e| self.err(e))?;
        self.bounded(WRITE_LIMIT, "adding vectors", self.table.add(batch).execute())?;
        Ok(())
    }

    pub fn delete(&self, passage_ids: &[i64]) -> Result<(), RetrievalError> {
        if passage_ids.is_empty() {
            return Ok(());
        }
        for chunk in passage_ids.chunks(500) {
            let list = chunk.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            self.bounded(WRITE_LIMIT, "deleting vectors", self.table.delete(format!("passage_id IN ({list})").as_str()))?;
        }
        Ok(())
    }

    /// The placeholder rows ([`WITHHELD`]): `(passage_id, note_id)` of each.
    pub fn withheld_rows(&self) -> Result<Vec<(i64, i64)>, RetrievalError> {
        use lancedb::query::Select;
        let filter = format!("version_id LIKE '{WITHHELD}%'");
        let batches: Vec<RecordBatch> = self.bounded(READ_LIMIT, "reading placeholder rows", async {
            self.table
                .query()
                .only_if(filter.as_str())
                .select(Select::columns(&["passage_id", "note_id"]))
                .execute()
                .await?
                .try_collect::<Vec<_>>()
                .await
        })?;
        let mut out = Vec::new();
        for b in &batches {
            let ids = b.column_by_name("passage_id").and_then(|c| c.as_any().downcast_ref::<Int64Array>());
            let notes = b.column_by_name("note_id").and_then(|c| c.as_any().downcast_ref::<Int64Array>());
            let (Some(ids), Some(notes)) = (ids, notes) else { return Err(self.err("placeholder rows lack passage_id or note_id")) };
            out.extend((0..ids.len()).map(|i| (ids.value(i), notes.value(i))));
        }
        Ok(out)
    }

    /// Deletes every row (the bookkeeping no longer matches the table: it is rebuilt).
    pub fn clear(&self) -> Result<(), RetrievalError> {
        self.bounded(WRITE_LIMIT, "clearing the table", self.table.delete("true"))?;
        Ok(())
    }

    /// Merges the small files every add leaves (one per embedding round) and drops versions older
    /// than an hour: a search reads every file, so a table made in hundreds of rounds is slower
    /// to search until compacted. Versions are kept an hour because another process (a second
    /// editor, a `lode search`) may be reading one.
    pub fn compact(&self) -> Result<(), RetrievalError> {
        use lancedb::table::{CompactionOptions, OptimizeAction};
        self.bounded(
            WRITE_LIMIT,
            "compacting the table",
            self.table.optimize(OptimizeAction::Compact { options: CompactionOptions::default(), remap_options: None }),
        )?;
        self.bounded(
            WRITE_LIMIT,
            "pruning old versions",
            self.table.optimize(OptimizeAction::Prune {
                older_than: Some(lancedb::table::Duration::hours(1)),
                delete_unverified: None,
                error_if_tagged_old_versions: None,
            }),
        )?;
        Ok(())
    }

    /// Whether the vector column has an approximate index.
    pub fn has_ann(&self) -> Result<bool, RetrievalError> {
        let indices = self.bounded(READ_LIMIT, "listing indexes", self.table.list_indices())?;
        Ok(indices.iter().any(|i| i.columns.iter().any(|c| c == "vector")))
    }

    /// Keeps the approximate index in step with the table: builds it once the table holds
    /// [`ANN_MIN_ROWS`] vectors, and afterwards folds rows added since into it (rows not yet in
    /// it are still searched, exactly). Returns what it did.
    pub fn maintain_ann(&self) -> Result<Option<String>, RetrievalError> {
        self.maintain_ann_from(ANN_MIN_ROWS)
    }

    /// [`VectorIndex::maintain_ann`] with another threshold (tests build an index over a few
    /// thousand vectors).
    pub fn maintain_ann_from(&self, min_rows: usize) -> Result<Option<String>, RetrievalError> {
        use lancedb::index::vector::IvfPqIndexBuilder;
        use lancedb::index::Index;
        use lancedb::table::{OptimizeAction, OptimizeOptions};
        if self.has_ann()? {
            self.bounded(INDEX_LIMIT, "updating the vector index", self.table.optimize(OptimizeAction::Index(OptimizeOptions::default())))?;
            return Ok(Some("vector index updated".into()));
        }
        let rows = self.count()?;
        if rows < min_rows {
            return Ok(None);
        }
        // About √n partitions; sub-vectors of 8 dimensions (16 for wide models), so PQ codes
        // stay a sixteenth to a thirty-second of the floats.
        let partitions = ((rows as f64).sqrt() as u32).clamp(64, 8192);
        let sub = if self.dims.is_multiple_of(16) && self.dims >= 768 {
            self.dims / 16
        } else if self.dims.is_multiple_of(8) {
            self.dims / 8
        } else {
            1
        };
        let builder =
            IvfPqIndexBuilder::default().distance_type(DistanceType::Cosine).num_partitions(partitions).num_sub_vectors(sub as u32);
        self.bounded(INDEX_LIMIT, "building the vector index", self.table.create_index(&["vector"], Index::IvfPq(builder)).execute())?;
        Ok(Some(format!("vector index built: IVF-PQ, {partitions} partitions, {sub} sub-vectors, over {rows} vectors")))
    }

    pub fn count(&self) -> Result<usize, RetrievalError> {
        self.bounded(READ_LIMIT, "counting rows", self.table.count_rows(None))
    }

    /// The `k` nearest passages by cosine distance, nearest first: `(passage_id, distance)`.
    pub fn nearest(&self, query: &[f32], k: usize) -> Result<Vec<(i64, f32)>, RetrievalError> {
        self.nearest_with(query, k, ANN_NPROBES, ANN_REFINE)
    }

    /// [`VectorIndex::nearest`] with other probe and refinement settings (benchmarks).
    pub fn nearest_with(&self, query: &[f32], k: usize, nprobes: usize, refine: u32) -> Result<Vec<(i64, f32)>, RetrievalError> {
        if query.len() != self.dims {
            return Err(self.err(format!("query vector has {} dimensions, the index holds {}", query.len(), self.dims)));
        }
        let batches: Vec<RecordBatch> = self.bounded(READ_LIMIT, "a vector search", async {
            // Probes and refinement apply only when the table has an approximate index.
            let q =
                self.table.query().nearest_to(query)?.distance_type(DistanceType::Cosine).nprobes(nprobes)?.refine_factor(refine).limit(k);
            q.execute().await?.try_collect::<Vec<_>>().await
        })?;
        let mut out = Vec::with_capacity(k);
        for b in &batches {
            let ids = b.column_by_name("passage_id").and_then(|c| c.as_any().downcast_ref::<Int64Array>());
            let dist = b.column_by_name("_distance").and_then(|c| c.as_any().downcast_ref::<Float32Array>());
            let versions = b.column_by_name("version_id").and_then(|c| c.as_any().downcast_ref::<StringArray>());
            let (Some(ids), Some(dist)) = (ids, dist) else {
                return Err(self.err("search result lacks passage_id or _distance"));
            };
            for i in 0..ids.len() {
                // A placeholder stands for text that was not sent to the embedder: it is no hit.
                if versions.is_some_and(|v| v.value(i).starts_with(WITHHELD)) {
                    continue;
                }
                out.push((ids.value(i), dist.value(i)));
            }
        }
        out.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        out.truncate(k);
        Ok(out)
    }

    /// Drops the tables of other models (after this one is complete).
    pub fn drop_other_tables(&self) -> Result<Vec<String>, RetrievalError> {
        let names = self.rt.block_on(self.db.table_names().execute()).map_err(|e| self.err(e))?;
        let mut dropped = Vec::new();
        for n in names.into_iter().filter(|n| *n != self.name && n.starts_with("passages_")) {
            self.rt.block_on(self.db.drop_table(&n, &[])).map_err(|e| self.err(e))?;
            dropped.push(n);
        }
        Ok(dropped)
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}
