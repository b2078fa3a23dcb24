//! The team tier: a vault published as Lance tables to object storage (`s3://`) or a folder,
//! searched in place, read-only, by every member whose config names it (`[shared] index`).
//!
//! Three tables: `lode_passages` (one row per passage of each note's head version, with its
//! text, byte ranges, heading path, the note's frontmatter and, when the publisher embedded
//! them, its vector; LanceDB's own full-text index over `text`), `lode_versions` (the bytes of
//! every version ever published, by content hash, never deleted: a citation keeps verifying
//! after the team's docs changed) and `lode_publishes` (one row per complete publish, naming
//! the table versions it made).
//!
//! Invariant: **readers never see half a publish.** A publish changes the two data tables in
//! several commits, then appends its row to `lode_publishes` in one; a reader checks out the
//! table versions the newest row names, never the tables' latest versions. A publish that dies
//! half-way leaves commits no row names: the next publish restores the tables to the last
//! recorded versions before it changes anything.

pub mod s3;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::types::Float32Type;
use arrow_array::{Array, BinaryArray, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use futures::TryStreamExt;
use lancedb::index::scalar::{FtsIndexBuilder, FullTextSearchQuery};
use lancedb::index::Index;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::{DistanceType, Table};
use lode_store::{Hit, MatchMode, SharedOrigin, Source, Store};

pub const PASSAGES: &str = "lode_passages";
pub const VERSIONS: &str = "lode_versions";
pub const PUBLISHES: &str = "lode_publishes";

/// Budget of each LanceDB cache (index, metadata) for the shared tier, in bytes.
const CACHE_BYTES: usize = 32 << 20;

/// Where the shared tier is and how to reach it.
#[derive(Debug, Clone)]
pub struct SharedConfig {
    /// `s3://bucket/prefix`, or a folder.
    pub uri: String,
    /// Non-secret object-store options: `endpoint`, `region`, `allow_http`, ...
    pub options: HashMap<String, String>,
    /// Longest a question waits for the shared tier before answering without it.
    pub timeout: Duration,
}

impl SharedConfig {
    pub fn new(uri: &str) -> SharedConfig {
        SharedConfig { uri: normalize_uri(uri), options: HashMap::new(), timeout: Duration::from_secs(10) }
    }

    /// How shared passages are addressed in answers: the tier's URI, then the note's path.
    pub fn address(&self, rel: &str) -> String {
        format!("{}/{rel}", self.uri.trim_end_matches('/'))
    }
}

/// A folder becomes a `file://` URI (absolute), so a shared passage's address never looks like
/// a path inside the member's own vault; object-store URIs stay as written.
pub fn normalize_uri(uri: &str) -> String {
    if uri.contains("://") {
        return uri.trim_end_matches('/').to_owned();
    }
    let p = std::path::Path::new(uri);
    let abs =
        if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf()) };
    format!("file://{}", abs.to_string_lossy().trim_end_matches('/'))
}

/// Whether a citation's `target` names a file inside the tier at `tier_uri`: the tier's
/// address (a trailing `/` aside), then `/` and a path. Compared as written: a sibling such as
/// `…/handbook-old/x.md` is not inside `…/handbook`.
pub fn in_tier(target: &str, tier_uri: &str) -> bool {
    target.strip_prefix(tier_uri.trim_end_matches('/')).and_then(|rest| rest.strip_prefix('/')).is_some_and(|path| !path.is_empty())
}

/// The note of the tier at `tier_uri` that `address` names (`<tier>/<rel>#…`), as written (a
/// citation's target is percent-encoded; an answer's address is not).
pub fn rel_in_tier<'a>(address: &'a str, tier_uri: &str) -> Option<&'a str> {
    let rest = address.split('#').next()?.strip_prefix(tier_uri.trim_end_matches('/'))?.strip_prefix('/')?;
    (!rest.is_empty()).then_some(rest)
}

#[derive(Debug, thiserror::Error)]
#[error("shared index {uri}: {detail}")]
pub struct SharedError {
    pub uri: String,
    pub detail: String,
}

/// What an object-store or LanceDB error means to the person reading it, in one line: the
/// libraries' errors nest a dozen layers (retry state, source locations, request URLs).
pub fn brief(detail: &str) -> String {
    let has = |s: &str| detail.contains(s);
    if let Some(at) = detail.find("ConnectError(") {
        let rest = &detail[at..];
        let addr = rest.split(", ").nth(1).unwrap_or("").trim_matches('"');
        let why = rest.split("message: \"").nth(1).and_then(|m| m.split('"').next()).unwrap_or("cannot connect");
        return format!("cannot connect to {addr}: {}", why.to_lowercase());
    }
    // object_store's own: "Error performing GET http://host:port/… in 220ms, after 2 retries…
    // - HTTP error: error sending request".
    if has("error sending request") || has("Connection refused") || has("tcp connect error") || has("dns error") {
        let from = detail.find("Error performing ").unwrap_or(0);
        let addr = detail[from..].split("://").nth(1).and_then(|r| r.split(['/', ' ', '?', ')']).next()).filter(|a| !a.is_empty());
        return format!("cannot connect to {}", addr.unwrap_or("the object store"));
    }
    if has("NoSuchBucket") {
        return "the bucket does not exist".into();
    }
    if has("InvalidAccessKeyId") || has("SignatureDoesNotMatch") || has("AccessDenied") || has("status: 403") || has("Forbidden") {
        return "access denied: check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)".into();
    }
    if has("timed out") || has("TimedOut") || has("operation timed out") {
        return "the object store did not answer in time".into();
    }
    if has("builder error") || has("URL scheme is not allowed") || has("HTTP is not allowed") || has("http scheme is not allowed") {
        return "plain http is refused: set allow_http = \"true\" in [shared] options for a local test server".into();
    }
    let one_line: String = detail.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(240) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// One complete publish, as recorded in `lode_publishes`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Publish {
    pub seq: i64,
    pub passages_version: u64,
    pub versions_version: u64,
    /// The model that embedded the passages (empty: no vectors), and its dimensions.
    pub embedder: String,
    pub dims: i64,
    pub notes: i64,
    pub passages: i64,
    pub published_at: i64,
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name("lode-shared").enable_all().build().map_err(|e| e.to_string())
}

async fn connect(cfg: &SharedConfig) -> lancedb::Result<lancedb::Connection> {
    let registry = Arc::new(lancedb::ObjectStoreRegistry::default());
    registry.insert("s3", Arc::new(s3::S3Provider));
    let session = Arc::new(lancedb::Session::new(CACHE_BYTES, CACHE_BYTES, registry));
    let uri = cfg.uri.strip_prefix("file://").unwrap_or(&cfg.uri);
    lancedb::connect(uri).session(session).storage_options(cfg.options.clone()).execute().await
}

fn publishes_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("seq", DataType::Int64, false),
        Field::new("passages_version", DataType::UInt64, false),
        Field::new("versions_version", DataType::UInt64, false),
        Field::new("embedder", DataType::Utf8, false),
        Field::new("dims", DataType::Int64, false),
        Field::new("notes", DataType::Int64, false),
        Field::new("passages", DataType::Int64, false),
        Field::new("published_at", DataType::Int64, false),
    ]))
}

fn versions_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("body", DataType::Binary, false),
        Field::new("published_at", DataType::Int64, false),
    ]))
}

fn passages_schema(dims: Option<usize>) -> Arc<Schema> {
    let mut f = vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("title", DataType::Utf8, false),
        Field::new("version_id", DataType::Utf8, false),
        Field::new("start", DataType::Int64, false),
        Field::new("end", DataType::Int64, false),
        Field::new("line", DataType::Int64, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("heading", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, false),
        Field::new("parent_start", DataType::Int64, false),
        Field::new("parent_end", DataType::Int64, false),
        // The note's frontmatter (JSON): the member's egress rules read it.
        Field::new("meta", DataType::Utf8, false),
    ];
    if let Some(d) = dims {
        f.push(Field::new("vector", DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), d as i32), false));
    }
    Arc::new(Schema::new(f))
}

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> Result<&'a T, String> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| format!("column {name} is missing or of another type"))
}

async fn read_publishes(db: &lancedb::Connection) -> lancedb::Result<Vec<Publish>> {
    let names = db.table_names().execute().await?;
    if !names.iter().any(|n| n == PUBLISHES) {
        return Ok(Vec::new());
    }
    let t = db.open_table(PUBLISHES).execute().await?;
    let batches: Vec<RecordBatch> = t.query().execute().await?.try_collect().await?;
    let mut out = Vec::new();
    for b in &batches {
        let get = || -> Result<Vec<Publish>, String> {
            let (seq, pv, vv, emb, dims, notes, passages, at) = (
                col::<Int64Array>(b, "seq")?,
                col::<UInt64Array>(b, "passages_version")?,
                col::<UInt64Array>(b, "versions_version")?,
                col::<StringArray>(b, "embedder")?,
                col::<Int64Array>(b, "dims")?,
                col::<Int64Array>(b, "notes")?,
                col::<Int64Array>(b, "passages")?,
                col::<Int64Array>(b, "published_at")?,
            );
            Ok((0..b.num_rows())
                .map(|i| Publish {
                    seq: seq.value(i),
                    passages_version: pv.value(i),
                    versions_version: vv.value(i),
                    embedder: emb.value(i).to_owned(),
                    dims: dims.value(i),
                    notes: notes.value(i),
                    passages: passages.value(i),
                    published_at: at.value(i),
                })
                .collect())
        };
        out.extend(get().map_err(|m| lancedb::Error::Runtime { message: format!("{PUBLISHES}: {m}") })?);
    }
    // Two publishes that recorded at the same instant share a seq (both reported it): the
    // later one wins, deterministically.
    out.sort_by_key(|p| (p.seq, p.published_at, p.passages_version));
    Ok(out)
}

/// The shared tier as a config names it: opened on first use, opened again (to see newer
/// publishes) when the handle is older than [`REFRESH`], and, after a failure, not tried again
/// for [`RETRY_AFTER`] (a question meanwhile is answered without it at once).
pub struct SharedTier {
    cfg: SharedConfig,
    state: std::sync::Mutex<TierState>,
}

#[derive(Default)]
struct TierState {
    open: Option<(Arc<SharedIndex>, Instant)>,
    failed: Option<(String, Instant)>,
}

/// Why a publish stops when another one writes to the same tier at the same time.
const CONCURRENT: &str = "another publish wrote to this tier while this one was writing: nothing was recorded, readers keep the last publish, and the next publish rolls back the unrecorded writes (publish one at a time: a CI concurrency group)";

/// Passages written per add (per file in the table).
const ROWS_PER_ADD: usize = 16_384;
/// Files (fragments) the passages table may hold before a publish merges them.
pub const COMPACT_AFTER: usize = 24;
/// Passages from which a tier with vectors gets a vector index (unit tests: a few hundred).
const VECTOR_INDEX_MIN: usize = if cfg!(test) { 512 } else { 10_000 };
/// Deltas the vector index may hold before a publish merges them.
pub const MAX_VECTOR_DELTAS: usize = 8;

pub const REFRESH: Duration = Duration::from_secs(30);
pub const RETRY_AFTER: Duration = Duration::from_secs(15);

impl std::fmt::Debug for SharedTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTier").field("uri", &self.cfg.uri).finish()
    }
}

impl SharedTier {
    pub fn new(cfg: SharedConfig) -> SharedTier {
        SharedTier { cfg, state: Default::default() }
    }

    pub fn config(&self) -> &SharedConfig {
        &self.cfg
    }

    /// What is known of the tier without reading it (for `lode/status`, which must not wait on
    /// the network): not opened yet, the publish it has open, or why the last open failed.
    pub fn peek(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"index": self.cfg.uri});
        // A question opening the tier holds the lock for as long as the network takes.
        let st = match self.state.try_lock() {
            Ok(st) => st,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                v["state"] = "opening".into();
                return v;
            }
        };
        match (&st.open, &st.failed) {
            (Some((ix, at)), _) => {
                v["state"] = "open".into();
                v["publish"] = serde_json::to_value(&ix.publish).unwrap_or_default();
                v["opened_secs_ago"] = at.elapsed().as_secs().into();
            }
            (None, Some((why, at))) => {
                v["state"] = format!("failed: {why}").into();
                v["retry_in_secs"] = RETRY_AFTER.saturating_sub(at.elapsed()).as_secs().into();
            }
            (None, None) => v["state"] = "configured; opened by the first question".into(),
        }
        v
    }

    /// A search of the open tier failed (the bucket went away, the network is down): until the
    /// retry interval has passed, questions answer without it at once instead of each waiting
    /// out the timeout, and `lode/status` says why.
    pub fn failed_reading(&self, why: &str) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.open = None;
        st.failed = Some((why.to_owned(), Instant::now()));
    }

    /// The tier at its newest complete publish, or why it cannot be read now.
    pub fn get(&self) -> Result<Arc<SharedIndex>, String> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((ix, at)) = &st.open {
            if at.elapsed() < REFRESH {
                return Ok(ix.clone());
            }
        }
        if let Some((why, at)) = &st.failed {
            if at.elapsed() < RETRY_AFTER {
                return Err(why.clone());
            }
        }
        match SharedIndex::open(&self.cfg) {
            Ok(ix) => {
                let ix = Arc::new(ix);
                st.open = Some((ix.clone(), Instant::now()));
                st.failed = None;
                Ok(ix)
            }
            Err(e) => {
                st.open = None;
                st.failed = Some((e.detail.clone(), Instant::now()));
                Err(e.detail)
            }
        }
    }
}

/// The shared tier opened for reading at its newest complete publish.
pub struct SharedIndex {
    rt: Option<tokio::runtime::Runtime>,
    cfg: SharedConfig,
    passages: Table,
    versions: Table,
    publish: Publish,
}

impl Drop for SharedIndex {
    fn drop(&mut self) {
        // Dropped wherever its last user is, an async task included: never block there.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for SharedIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedIndex").field("uri", &self.cfg.uri).field("publish", &self.publish).finish()
    }
}

/// What a question found in the shared tier: each leg's hits, best first. Both legs give one
/// passage the same `passage_id` (negative: never a local passage's).
#[derive(Debug, Default)]
pub struct SharedFound {
    pub lexical: Vec<Hit>,
    pub dense: Vec<Hit>,
    pub ms: f64,
}

impl SharedIndex {
    /// Opens the tier at its newest complete publish. Fails when nothing was published there.
    pub fn open(cfg: &SharedConfig) -> Result<SharedIndex, SharedError> {
        let err = |detail: String| SharedError { uri: cfg.uri.clone(), detail };
        s3::refuse_secrets(&cfg.options).map_err(err)?;
        let rt = runtime().map_err(err)?;
        let opened = rt.block_on(async {
            tokio::time::timeout(cfg.timeout, async {
                let db = connect(cfg).await?;
                let Some(publish) = read_publishes(&db).await?.pop() else {
                    return Ok(None);
                };
                let passages = db.open_table(PASSAGES).execute().await?;
                passages.checkout(publish.passages_version).await?;
                let versions = db.open_table(VERSIONS).execute().await?;
                versions.checkout(publish.versions_version).await?;
                Ok::<_, lancedb::Error>(Some((passages, versions, publish)))
            })
            .await
        });
        match opened {
            Err(_) => Err(err(format!("did not answer within {} s", cfg.timeout.as_secs()))),
            Ok(Err(e)) => Err(err(brief(&e.to_string()))),
            Ok(Ok(None)) => Err(err("nothing has been published there yet (`lode publish --to` makes it)".into())),
            Ok(Ok(Some((passages, versions, publish)))) => Ok(SharedIndex { rt: Some(rt), cfg: cfg.clone(), passages, versions, publish }),
        }
    }

    pub fn config(&self) -> &SharedConfig {
        &self.cfg
    }

    pub fn publish(&self) -> &Publish {
        &self.publish
    }

    fn bounded<T>(&self, what: &str, op: impl std::future::Future<Output = Result<T, lancedb::Error>>) -> Result<T, SharedError> {
        let rt = self.rt.as_ref().expect("the runtime lives as long as the index");
        match rt.block_on(async { tokio::time::timeout(self.cfg.timeout, op).await }) {
            Ok(r) => r.map_err(|e| self.err(format!("{what}: {}", brief(&e.to_string())))),
            Err(_) => Err(self.err(format!("{what} did not finish within {} s", self.cfg.timeout.as_secs()))),
        }
    }

    fn err(&self, detail: String) -> SharedError {
        SharedError { uri: self.cfg.uri.clone(), detail }
    }

    /// Whether the dense leg can run with this model's question vectors.
    pub fn dense_with(&self, model: &str, dims: usize) -> bool {
        !self.publish.embedder.is_empty() && self.publish.embedder == model && self.publish.dims == dims as i64
    }

    /// Both legs over the shared tier: full text, and nearest vectors when `query` is a vector
    /// of the model the tier was embedded with. One passage found by both legs has one id.
    pub fn search(&self, question: &str, k: usize, query: Option<&[f32]>) -> Result<SharedFound, SharedError> {
        let t = Instant::now();
        let cols: Vec<String> =
            ["path", "title", "version_id", "start", "end", "line", "kind", "heading", "text", "parent_start", "parent_end", "meta"]
                .map(String::from)
                .to_vec();
        let words: String = lode_core::query::terms(question).join(" ");
        let (lexical, dense) = self.bounded("a search", async {
            let lexical = async {
                if words.trim().is_empty() {
                    return Ok(Vec::new());
                }
                let q = FullTextSearchQuery::new(words.clone()).with_column("text".into())?;
                self.passages
                    .query()
                    .full_text_search(q)
                    .select(Select::columns(&cols))
                    .limit(k)
                    .execute()
                    .await?
                    .try_collect::<Vec<RecordBatch>>()
                    .await
            };
            let dense = async {
                match query {
                    Some(v) => {
                        let q = self
                            .passages
                            .query()
                            .nearest_to(v)?
                            .distance_type(DistanceType::Cosine)
                            .select(Select::columns(&cols))
                            .limit(k);
                        q.execute().await?.try_collect::<Vec<RecordBatch>>().await
                    }
                    None => Ok(Vec::new()),
                }
            };
            futures::try_join!(lexical, dense)
        })?;
        let mut ids: HashMap<(String, i64, i64), i64> = HashMap::new();
        let mut notes: HashMap<String, i64> = HashMap::new();
        let lexical = self.hits(&lexical, "_score", &mut ids, &mut notes).map_err(|e| self.err(e))?;
        let dense = self.hits(&dense, "_distance", &mut ids, &mut notes).map_err(|e| self.err(e))?;
        Ok(SharedFound { lexical, dense, ms: t.elapsed().as_secs_f64() * 1000.0 })
    }

    fn hits(
        &self,
        batches: &[RecordBatch],
        score: &str,
        ids: &mut HashMap<(String, i64, i64), i64>,
        notes: &mut HashMap<String, i64>,
    ) -> Result<Vec<Hit>, String> {
        let mut out = Vec::new();
        for b in batches {
            let (path, title, vid, start, end, line, kind, heading, text, ps, pe, meta) = (
                col::<StringArray>(b, "path")?,
                col::<StringArray>(b, "title")?,
                col::<StringArray>(b, "version_id")?,
                col::<Int64Array>(b, "start")?,
                col::<Int64Array>(b, "end")?,
                col::<Int64Array>(b, "line")?,
                col::<StringArray>(b, "kind")?,
                col::<StringArray>(b, "heading")?,
                col::<StringArray>(b, "text")?,
                col::<Int64Array>(b, "parent_start")?,
                col::<Int64Array>(b, "parent_end")?,
                col::<StringArray>(b, "meta")?,
            );
            let scores = col::<Float32Array>(b, score)?;
            for i in 0..b.num_rows() {
                let next = -(ids.len() as i64) - 1;
                let id = *ids.entry((vid.value(i).to_owned(), start.value(i), end.value(i))).or_insert(next);
                let next_note = -(notes.len() as i64) - 1;
                let note_id = *notes.entry(path.value(i).to_owned()).or_insert(next_note);
                let rel = path.value(i).to_owned();
                let s = scores.value(i) as f64;
                out.push(Hit {
                    passage_id: id,
                    note_id,
                    path: self.cfg.address(&rel),
                    title: title.value(i).to_owned(),
                    version_id: vid.value(i).to_owned(),
                    start: start.value(i).max(0) as usize,
                    end: end.value(i).max(0) as usize,
                    line: line.value(i).max(0) as usize,
                    kind: kind.value(i).to_owned(),
                    heading: heading.value(i).to_owned(),
                    // Higher is better on both legs.
                    score: if score == "_distance" { 1.0 - s } else { s },
                    mode: MatchMode::Any,
                    snippet: String::new(),
                    text: text.value(i).to_owned(),
                    parent_start: ps.value(i).max(0) as usize,
                    parent_end: pe.value(i).max(0) as usize,
                    source: Source::Shared,
                    url: None,
                    fetched_at: None,
                    seen_at: None,
                    shared: Some(SharedOrigin { rel, meta: serde_json::from_str(meta.value(i)).unwrap_or_default() }),
                });
            }
        }
        Ok(out)
    }

    /// The bytes of a published version (full id, or a prefix of 12 hex digits or more that
    /// only one version has), checked against the id. `None`: no such version was published.
    pub fn version_body(&self, id: &str) -> Result<Option<(String, Vec<u8>)>, SharedError> {
        let id = id.to_ascii_lowercase();
        if id.len() < lode_core::citation::MIN_ID || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let filter = if id.len() == 64 { format!("id = '{id}'") } else { format!("id >= '{id}' AND id < '{id}g'") };
        let batches: Vec<RecordBatch> = self.bounded("reading a version", async {
            self.versions.query().only_if(filter).select(Select::columns(&["id", "body"])).limit(2).execute().await?.try_collect().await
        })?;
        let mut found: Vec<(String, Vec<u8>)> = Vec::new();
        for b in &batches {
            let ids = col::<StringArray>(b, "id").map_err(|e| self.err(e))?;
            let bodies = col::<BinaryArray>(b, "body").map_err(|e| self.err(e))?;
            for i in 0..b.num_rows() {
                if !found.iter().any(|(f, _)| f == ids.value(i)) {
                    found.push((ids.value(i).to_owned(), bodies.value(i).to_vec()));
                }
            }
        }
        match found.len() {
            0 => Ok(None),
            1 => {
                let (vid, body) = found.pop().expect("one");
                if lode_store::version_id(&body) != vid {
                    return Err(self.err(format!("the stored bytes of version {} do not hash to its id", &vid[..12])));
                }
                Ok(Some((vid, body)))
            }
            _ => Err(self.err(format!("more than one published version starts with {id}"))),
        }
    }

    /// The version of note `rel` in this publish (`None`: not published in it).
    pub fn head_of(&self, rel: &str) -> Result<Option<String>, SharedError> {
        if rel.is_empty() || rel.len() > 4096 || rel.contains('\0') {
            return Ok(None);
        }
        let filter = format!("path = '{}'", rel.replace('\'', "''"));
        let batches: Vec<RecordBatch> = self.bounded("reading a note's version", async {
            self.passages
                .query()
                .only_if(filter)
                .select(Select::columns(&["path", "version_id"]))
                .limit(1)
                .execute()
                .await?
                .try_collect()
                .await
        })?;
        for b in &batches {
            let paths = col::<StringArray>(b, "path").map_err(|e| self.err(e))?;
            let ids = col::<StringArray>(b, "version_id").map_err(|e| self.err(e))?;
            for i in 0..b.num_rows() {
                // Only an exact match names the note (the filter is built from untrusted text).
                if paths.value(i) == rel {
                    return Ok(Some(ids.value(i).to_owned()));
                }
            }
        }
        Ok(None)
    }

    /// The note a tier address names (`<tier>/<rel>`, as answers give it; a citation's target
    /// is percent-decoded first), without its `#fragment`.
    pub fn rel_of(&self, address: &str) -> Option<String> {
        rel_in_tier(address, &self.cfg.uri).map(str::to_owned)
    }

    /// Keeps the bodies of these shared versions beside `store` (see
    /// [`Store::cache_shared_body`]) so the gate, hover and goto read them like any version.
    /// Versions already kept are not fetched again. Returns the versions that could not be
    /// kept, each with why (the others are kept whatever became of those).
    pub fn keep_bodies(&self, store: &Store, ids: &[String]) -> Vec<(String, SharedError)> {
        let mut failed = Vec::new();
        let mut seen = HashSet::new();
        for id in ids {
            if !seen.insert(id) || store.version_body(id).ok().flatten().is_some() {
                continue;
            }
            let kept = match self.version_body(id) {
                Ok(Some((vid, body))) => store.cache_shared_body(&vid, &body).map_err(|e| self.err(e)),
                Ok(None) => Err(self.err(format!("version {} is not in the tier", &id[..id.len().min(12)]))),
                Err(e) => Err(e),
            };
            if let Err(e) = kept {
                failed.push((id.clone(), e));
            }
        }
        failed
    }
}

/// What a publish did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PublishReport {
    pub uri: String,
    pub seq: i64,
    pub notes: usize,
    pub changed: usize,
    pub removed: usize,
    pub unchanged: usize,
    pub passages_added: usize,
    pub versions_added: usize,
    /// Half-written commits of an interrupted publish that were rolled back first.
    pub restored: bool,
    /// The table's files were merged (more than [`COMPACT_AFTER`]).
    pub compacted: bool,
    pub embedder: Option<String>,
    pub ms: f64,
}

/// One note as the publisher sees it.
pub struct NoteToPublish {
    pub path: String,
    pub title: String,
    pub version_id: String,
    pub body: Vec<u8>,
    pub meta: serde_json::Map<String, serde_json::Value>,
    pub passages: Vec<lode_store::PassageRow>,
}

/// Embeds passages for a publish: `(model id, dims, vectors)` in the order given.
pub type EmbedFn<'a> = dyn FnMut(&[String]) -> Result<Vec<Vec<f32>>, String> + 'a;

/// Publishes `notes` (every note of the vault, head versions) to the tier. Incremental: only
/// notes whose version changed are rewritten; removed notes leave the passages table (their
/// versions stay). `embed` (model id, dims, function) adds vectors; the model must be the one
/// the tier was first published with.
pub fn publish(
    cfg: &SharedConfig,
    notes: &[NoteToPublish],
    mut embed: Option<(String, usize, &mut EmbedFn<'_>)>,
    progress: &mut dyn FnMut(&str),
) -> Result<PublishReport, SharedError> {
    let t = Instant::now();
    let err = |detail: String| SharedError { uri: cfg.uri.clone(), detail };
    s3::refuse_secrets(&cfg.options).map_err(err)?;
    let rt = runtime().map_err(err)?;
    // Lance refuses a commit that conflicts with another writer's (a roll-back under it).
    let lerr = |e: lancedb::Error| {
        let e = e.to_string();
        let conflict = ["Incompatible transaction", "concurrent transaction", "Commit conflict for version", "Too many concurrent writers"];
        err(if conflict.iter().any(|c| e.contains(c)) { CONCURRENT.into() } else { brief(&e) })
    };
    let mut report =
        PublishReport { uri: cfg.uri.clone(), notes: notes.len(), embedder: embed.as_ref().map(|e| e.0.clone()), ..Default::default() };
    rt.block_on(async {
        let db = connect(cfg).await.map_err(lerr)?;
        let names = db.table_names().execute().await.map_err(lerr)?;
        let dims = embed.as_ref().map(|e| e.1);
        let open_or_create = |name: &'static str, schema: Arc<Schema>| {
            let db = &db;
            let exists = names.iter().any(|n| n == name);
            async move {
                if exists {
                    db.open_table(name).execute().await
                } else {
                    db.create_empty_table(name, schema).execute().await
                }
            }
        };
        // The tables are opened before the record is read: a roll-back below then never
        // targets an older state than one already recorded when this publish began.
        let passages = open_or_create(PASSAGES, passages_schema(dims)).await.map_err(lerr)?;
        let versions = open_or_create(VERSIONS, versions_schema()).await.map_err(lerr)?;
        let publishes = open_or_create(PUBLISHES, publishes_schema()).await.map_err(lerr)?;
        let last = read_publishes(&db).await.map_err(lerr)?.pop();
        if let Some(l) = &last {
            let want = embed.as_ref().map(|e| (e.0.as_str(), e.1 as i64)).unwrap_or(("", 0));
            if (l.embedder.as_str(), l.dims) != want {
                return Err(err(format!(
                    "it was published with {}, this publish has {}: publish to a new location to change the model",
                    if l.embedder.is_empty() { "no vectors".to_owned() } else { format!("{} ({} dims)", l.embedder, l.dims) },
                    if want.0.is_empty() { "no vectors".to_owned() } else { format!("{} ({} dims)", want.0, want.1) },
                )));
            }
        }
        // Each commit this publish makes must come right after its previous one: another
        // publish writing at the same time interleaves its commits, and a row naming the
        // versions at the end would name a mix of both (checked again before recording).
        let step = async |t: &Table, seen: &mut u64| -> Result<(), SharedError> {
            let now = t.version().await.map_err(lerr)?;
            if now > *seen + 1 {
                return Err(err(CONCURRENT.into()));
            }
            *seen = now;
            Ok(())
        };
        // Commits an interrupted publish made after its last recorded state are rolled back.
        if let Some(l) = &last {
            for (t, v) in [(&passages, l.passages_version), (&versions, l.versions_version)] {
                if t.version().await.map_err(lerr)? != v {
                    t.checkout(v).await.map_err(lerr)?;
                    t.restore().await.map_err(lerr)?;
                    report.restored = true;
                }
            }
        } else if passages.count_rows(None).await.map_err(lerr)? > 0 || versions.count_rows(None).await.map_err(lerr)? > 0 {
            // A first publish that died: start again from empty tables.
            for t in [&passages, &versions] {
                let mut seen = t.version().await.map_err(lerr)?;
                t.delete("true").await.map_err(lerr)?;
                step(t, &mut seen).await?;
            }
            report.restored = true;
        }
        let mut pv = passages.version().await.map_err(lerr)?;
        let mut vv = versions.version().await.map_err(lerr)?;
        // What the last publish holds: note path → version.
        progress("reading what was published before");
        let mut published: BTreeMap<String, String> = BTreeMap::new();
        let batches: Vec<RecordBatch> = passages
            .query()
            .select(Select::columns(&["path", "version_id"]))
            .execute()
            .await
            .map_err(lerr)?
            .try_collect()
            .await
            .map_err(lerr)?;
        for b in &batches {
            let (p, v) = (col::<StringArray>(b, "path").map_err(err)?, col::<StringArray>(b, "version_id").map_err(err)?);
            for i in 0..b.num_rows() {
                published.insert(p.value(i).to_owned(), v.value(i).to_owned());
            }
        }
        let mut known_versions: HashSet<String> = HashSet::new();
        let batches: Vec<RecordBatch> =
            versions.query().select(Select::columns(&["id"])).execute().await.map_err(lerr)?.try_collect().await.map_err(lerr)?;
        for b in &batches {
            let ids = col::<StringArray>(b, "id").map_err(err)?;
            known_versions.extend((0..b.num_rows()).map(|i| ids.value(i).to_owned()));
        }
        let current: HashSet<&str> = notes.iter().map(|n| n.path.as_str()).collect();
        let changed: Vec<&NoteToPublish> = notes.iter().filter(|n| published.get(&n.path) != Some(&n.version_id)).collect();
        let removed: Vec<&String> = published.keys().filter(|p| !current.contains(p.as_str())).collect();
        report.changed = changed.len();
        report.removed = removed.len();
        report.unchanged = notes.len() - changed.len();
        let now = lode_store::now_ms();

        // Versions first: a passage row never names bytes the tier does not hold.
        let new_versions: Vec<&NoteToPublish> = {
            let mut seen = HashSet::new();
            changed.iter().copied().filter(|n| !known_versions.contains(&n.version_id) && seen.insert(n.version_id.clone())).collect()
        };
        for chunk in new_versions.chunks(256) {
            let batch = RecordBatch::try_new(
                versions_schema(),
                vec![
                    Arc::new(StringArray::from_iter_values(chunk.iter().map(|n| n.version_id.as_str()))),
                    Arc::new(StringArray::from_iter_values(chunk.iter().map(|n| n.path.as_str()))),
                    Arc::new(BinaryArray::from_iter_values(chunk.iter().map(|n| n.body.as_slice()))),
                    Arc::new(Int64Array::from_iter_values(chunk.iter().map(|_| now))),
                ],
            )
            .map_err(|e| err(e.to_string()))?;
            versions.add(batch).execute().await.map_err(lerr)?;
            step(&versions, &mut vv).await?;
        }
        report.versions_added = new_versions.len();

        // Passages of changed and removed notes go; the changed notes' new passages come in.
        let gone: Vec<&str> = changed
            .iter()
            .map(|n| n.path.as_str())
            .filter(|p| published.contains_key(*p))
            .chain(removed.iter().map(|p| p.as_str()))
            .collect();
        for chunk in gone.chunks(200) {
            let list = chunk.iter().map(|p| format!("'{}'", p.replace('\'', "''"))).collect::<Vec<_>>().join(",");
            passages.delete(format!("path IN ({list})").as_str()).await.map_err(lerr)?;
            step(&passages, &mut pv).await?;
        }
        if cfg!(debug_assertions) && std::env::var("LODE_FAULT_PUBLISH").is_ok_and(|at| at == "pause-after-delete") {
            // Tests: a reader asks now, while the changed notes' old passages are deleted and
            // their new ones not yet written.
            progress("paused after deleting (LODE_FAULT_PUBLISH)");
            tokio::time::sleep(Duration::from_secs(6)).await;
        }
        let rows: Vec<(&NoteToPublish, &lode_store::PassageRow)> =
            changed.iter().flat_map(|n| n.passages.iter().map(move |p| (*n, p))).collect();
        let mut done = 0;
        // Rows are embedded 512 at a time (progress) but written in larger adds: each add is a
        // file in the table, and a reader pays a request per file.
        let mut pending: Vec<RecordBatch> = Vec::new();
        let flush = async |pending: &mut Vec<RecordBatch>, pv: &mut u64| -> Result<(), SharedError> {
            if pending.is_empty() {
                return Ok(());
            }
            passages.add(std::mem::take(pending)).execute().await.map_err(lerr)?;
            step(&passages, pv).await
        };
        for chunk in rows.chunks(512) {
            let mut cols: Vec<Arc<dyn Array>> = vec![
                Arc::new(StringArray::from_iter_values(chunk.iter().map(|(n, _)| n.path.as_str()))),
                Arc::new(StringArray::from_iter_values(chunk.iter().map(|(n, _)| n.title.as_str()))),
                Arc::new(StringArray::from_iter_values(chunk.iter().map(|(n, _)| n.version_id.as_str()))),
                Arc::new(Int64Array::from_iter_values(chunk.iter().map(|(_, p)| p.start as i64))),
                Arc::new(Int64Array::from_iter_values(chunk.iter().map(|(_, p)| p.end as i64))),
                Arc::new(Int64Array::from_iter_values(chunk.iter().map(|(_, p)| p.line as i64))),
                Arc::new(StringArray::from_iter_values(chunk.iter().map(|(_, p)| p.kind.as_str()))),
                Arc::new(StringArray::from_iter_values(chunk.iter().map(|(_, p)| p.heading.as_str()))),
                Arc::new(StringArray::from_iter_values(chunk.iter().map(|(_, p)| p.text.as_str()))),
                Arc::new(Int64Array::from_iter_values(chunk.iter().map(|(_, p)| p.parent_start as i64))),
                Arc::new(Int64Array::from_iter_values(chunk.iter().map(|(_, p)| p.parent_end as i64))),
                Arc::new(StringArray::from_iter_values(chunk.iter().map(|(n, _)| serde_json::Value::Object(n.meta.clone()).to_string()))),
            ];
            if let Some((_, d, f)) = embed.as_mut() {
                let texts: Vec<String> = chunk.iter().map(|(_, p)| crate::worker::embedded_text(&p.heading, [p.text.as_str()])).collect();
                let vectors = f(&texts).map_err(|e| err(format!("embedding: {e}")))?;
                if vectors.len() != chunk.len() || vectors.iter().any(|v| v.len() != *d) {
                    return Err(err(format!("the embedder returned vectors of another shape than {d} dimensions")));
                }
                cols.push(Arc::new(FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
                    vectors.iter().map(|v| Some(v.iter().map(|&x| Some(x)).collect::<Vec<_>>())),
                    *d as i32,
                )));
            }
            pending.push(RecordBatch::try_new(passages_schema(dims), cols).map_err(|e| err(e.to_string()))?);
            if pending.len() * 512 >= ROWS_PER_ADD {
                flush(&mut pending, &mut pv).await?;
            }
            done += chunk.len();
            progress(&format!("{done} of {} passages written", rows.len()));
        }
        flush(&mut pending, &mut pv).await?;
        report.passages_added = rows.len();

        // Files: every publish that changes something adds one or more, and deletes leave
        // deletion files; past COMPACT_AFTER they are merged (the indexes are remapped, and the
        // versions earlier publishes name keep their own files).
        let total = passages.count_rows(None).await.map_err(lerr)?;
        let touched = report.changed > 0 || report.removed > 0;
        if touched && passages.stats().await.map_err(lerr)?.fragment_stats.num_fragments > COMPACT_AFTER {
            progress("merging the table's files");
            let done = passages
                .optimize(lancedb::table::OptimizeAction::Compact {
                    options: lancedb::table::CompactionOptions::default(),
                    remap_options: None,
                })
                .await
                .map_err(lerr)?;
            // A merge is two commits (fragment ids reserved, then the rewrite, which carries
            // the indexes remapped onto it); nothing to merge is none.
            report.compacted = done.compaction.as_ref().is_some_and(|c| c.fragments_removed > 0);
            if report.compacted {
                pv += 1;
            }
            step(&passages, &mut pv).await?;
        }
        // Indexes: LanceDB's full-text index over the text, and a vector index from 10,000
        // vectors, each built once and afterwards brought up to date with the rows this publish
        // added (an incremental update: a publish of one note no longer re-reads the tier).
        if total > 0 && (touched || last.is_none()) {
            let indices = passages.list_indices().await.map_err(lerr)?;
            let has = |column: &str| indices.iter().any(|i| i.columns.iter().any(|c| c == column));
            let (has_fts, has_vector) = (has("text"), has("vector"));
            if has_fts || has_vector {
                progress("updating the indexes");
                // The vector index grows by a delta per update, and a query reads every delta:
                // past MAX_VECTOR_DELTAS they are merged into one.
                let mut options = lancedb::table::OptimizeOptions::default();
                if let Some(ix) = indices.iter().find(|i| i.columns.iter().any(|c| c == "vector")) {
                    let parts = passages.index_stats(&ix.name).await.map_err(lerr)?.and_then(|s| s.num_indices).unwrap_or(1) as usize;
                    if parts >= MAX_VECTOR_DELTAS {
                        options = lancedb::table::OptimizeOptions::merge(parts);
                    }
                }
                passages.optimize(lancedb::table::OptimizeAction::Index(options)).await.map_err(lerr)?;
                step(&passages, &mut pv).await?;
            }
            if !has_fts {
                progress("building the full-text index");
                passages.create_index(&["text"], Index::FTS(FtsIndexBuilder::default())).execute().await.map_err(lerr)?;
                step(&passages, &mut pv).await?;
            }
            if dims.is_some() && total >= VECTOR_INDEX_MIN && !has_vector {
                progress("building the vector index");
                passages.create_index(&["vector"], Index::Auto).execute().await.map_err(lerr)?;
                step(&passages, &mut pv).await?;
            }
        }
        // Nothing committed after this publish's last commit, in either table, and nothing
        // recorded since this publish read the record.
        passages.checkout_latest().await.map_err(lerr)?;
        versions.checkout_latest().await.map_err(lerr)?;
        if passages.version().await.map_err(lerr)? != pv || versions.version().await.map_err(lerr)? != vv {
            return Err(err(CONCURRENT.into()));
        }
        let newest = |p: Option<Publish>| p.map(|p| p.seq);
        if newest(read_publishes(&db).await.map_err(lerr)?.pop()) != newest(last.clone()) {
            return Err(err(CONCURRENT.into()));
        }
        // The one commit that makes this publish visible.
        let seq = last.as_ref().map_or(1, |l| l.seq + 1);
        let row = Publish {
            seq,
            passages_version: passages.version().await.map_err(lerr)?,
            versions_version: versions.version().await.map_err(lerr)?,
            embedder: embed.as_ref().map(|e| e.0.clone()).unwrap_or_default(),
            dims: embed.as_ref().map_or(0, |e| e.1 as i64),
            notes: notes.len() as i64,
            passages: total as i64,
            published_at: now,
        };
        if cfg!(debug_assertions) {
            // Tests: die here, with the data written and the publish not recorded.
            if std::env::var("LODE_FAULT_PUBLISH").is_ok_and(|at| at == "before-record") {
                std::process::abort();
            }
        }
        let batch = RecordBatch::try_new(
            publishes_schema(),
            vec![
                Arc::new(Int64Array::from_iter_values([row.seq])),
                Arc::new(UInt64Array::from_iter_values([row.passages_version])),
                Arc::new(UInt64Array::from_iter_values([row.versions_version])),
                Arc::new(StringArray::from_iter_values([row.embedder.as_str()])),
                Arc::new(Int64Array::from_iter_values([row.dims])),
                Arc::new(Int64Array::from_iter_values([row.notes])),
                Arc::new(Int64Array::from_iter_values([row.passages])),
                Arc::new(Int64Array::from_iter_values([row.published_at])),
            ],
        )
        .map_err(|e| err(e.to_string()))?;
        publishes.add(batch).execute().await.map_err(lerr)?;
        // Two publishes that passed the check above at the same instant both recorded this
        // seq: each says so (readers take the later whole; the next publish goes on from it).
        if read_publishes(&db).await.map_err(lerr)?.iter().filter(|p| p.seq == seq).count() > 1 {
            return Err(err(CONCURRENT.into()));
        }
        report.seq = seq;
        // Each record is a file of its own, and every reader's open reads them all: past
        // COMPACT_AFTER they are merged. The publish is recorded already; a merge that fails
        // is only said (the next publish merges them).
        if publishes.stats().await.map_err(lerr)?.fragment_stats.num_fragments > COMPACT_AFTER {
            let merged = publishes
                .optimize(lancedb::table::OptimizeAction::Compact {
                    options: lancedb::table::CompactionOptions::default(),
                    remap_options: None,
                })
                .await;
            if let Err(e) = merged {
                progress(&format!("the publish records' files were not merged ({})", brief(&e.to_string())));
            }
        }
        Ok(())
    })?;
    report.ms = t.elapsed().as_secs_f64() * 1000.0;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cases written blind (by someone who saw neither this code nor the tests above), to
    /// defeat the two parsers of addresses: which citation targets are the tier's, and which
    /// host an object-store error could not reach.
    #[test]
    fn blind_cases_for_tier_addresses_and_connection_errors() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/shared-blind/cases.json");
        let cases: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut wrong = Vec::new();
        for c in cases["in_tier"].as_array().unwrap() {
            let (target, tier) = (c["target"].as_str().unwrap(), c["tier"].as_str().unwrap());
            if in_tier(target, tier) != c["inside"].as_bool().unwrap() {
                wrong.push(format!("in_tier({target:?}, {tier:?}): {}", c["why"]));
            }
        }
        for c in cases["connect_error"].as_array().unwrap() {
            let got = brief(c["detail"].as_str().unwrap());
            let ok = match c["expect"].as_str() {
                Some(want) => got == want,
                None => !got.starts_with("cannot connect"),
            };
            if !ok {
                wrong.push(format!("brief({:?}) = {got:?}, want {}: {}", c["detail"], c["expect"], c["why"]));
            }
        }
        assert!(wrong.is_empty(), "{} cases wrong:\n{}", wrong.len(), wrong.join("\n"));
    }

    #[test]
    fn library_errors_become_one_line_a_person_can_act_on() {
        let refused = r#"Invalid input, Failed to connect to namespace: IO { source: Generic { store: "S3", source: ListRequest { source: RetryError(RetryErrorImpl { method: GET, uri: Some(http://127.0.0.1:5055/b?list-type=2), retries: 2, max_retries: 2, elapsed: 296.1ms, retry_timeout: 6s, inner: Http(HttpError { kind: Connect, source: reqwest::Error { kind: Request, source: hyper_util::client::legacy::Error(Connect, ConnectError("tcp connect error", 127.0.0.1:5055, Os { code: 111, kind: ConnectionRefused, message: "Connection refused" })) } }) }) } }, location: Location { file: "x.rs", line: 1, column: 2 }"#;
        assert_eq!(brief(refused), "cannot connect to 127.0.0.1:5055: connection refused");
        // A read of an open tier, as LanceDB words it.
        let read = "shared index s3://t/h: a search: lance error: LanceError(IO): Generic N/A error: LanceError(IO): Generic S3 error: Error performing GET http://127.0.0.1:37551/t/h/lode_passages.lance/data/1.lance in 221.9ms, after 2 retries, max_retries: 10, retry_timeout: 180s  - HTTP error: error sending request";
        assert_eq!(brief(read), "cannot connect to 127.0.0.1:37551");
        assert_eq!(brief("Error performing GET REDACTED in 1s - HTTP error: error sending request"), "cannot connect to the object store");
        assert_eq!(brief("... <Code>NoSuchBucket</Code> ..."), "the bucket does not exist");
        assert!(brief("Client error with status 403 Forbidden: <Code>InvalidAccessKeyId</Code>").starts_with("access denied"));
        let long = "word ".repeat(200);
        let b = brief(&long);
        assert!(b.chars().count() <= 241 && b.ends_with('…'), "{b}");
        assert_eq!(brief("a\n  b"), "a b");
    }

    #[test]
    fn folders_become_file_uris_and_addresses_join_once() {
        assert_eq!(normalize_uri("s3://b/p/"), "s3://b/p");
        assert_eq!(normalize_uri("/srv/tier/"), "file:///srv/tier");
        assert!(normalize_uri("rel/tier").starts_with("file:///"));
        assert_eq!(SharedConfig::new("s3://b/p/").address("a/b.md"), "s3://b/p/a/b.md");
    }

    /// Version lookups build a filter from what a citation says: every hostile spelling finds
    /// nothing (and runs no query), a real id or prefix finds exactly its bytes.
    #[test]
    fn version_lookups_by_hostile_ids_find_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let body = b"# Runbook\n\nThe quorum is 2.\n".to_vec();
        let id = lode_store::version_id(&body);
        let passage = lode_store::PassageRow {
            id: 1,
            note_id: 1,
            version_id: id.clone(),
            ordinal: 0,
            start: 11,
            end: 27,
            line: 3,
            kind: "paragraph".into(),
            heading: "Runbook".into(),
            parent_start: 11,
            parent_end: 27,
            text: "The quorum is 2.".into(),
        };
        let note = NoteToPublish {
            path: "it's.md".into(),
            title: "Runbook".into(),
            version_id: id.clone(),
            body: body.clone(),
            meta: Default::default(),
            passages: vec![passage],
        };
        let cfg = SharedConfig::new(dir.path().join("tier").to_str().unwrap());
        publish(&cfg, &[note], None, &mut |_| {}).unwrap();
        let ix = SharedIndex::open(&cfg).unwrap();
        for good in [id.clone(), id[..12].to_owned(), id[..12].to_uppercase(), id[..40].to_owned()] {
            assert_eq!(ix.version_body(&good).unwrap(), Some((id.clone(), body.clone())), "{good}");
        }
        let quoted = format!("{}' OR '1'='1", &id[..12]);
        let hostile = [
            "' OR 1=1 --".to_owned(),
            quoted,
            format!("{id}0"),
            id[..11].to_owned(),
            format!("{}g", &id[..12]),
            format!("{} ", &id[..12]),
            "%".repeat(12),
            "_".repeat(12),
            String::new(),
            "0".repeat(64),
            "f".repeat(12),
        ];
        for h in &hostile {
            assert_eq!(ix.version_body(h).unwrap(), None, "{h:?}");
        }
        let found = ix.search("quorum", 5, None).unwrap();
        assert_eq!(found.lexical.len(), 1);
        assert_eq!(found.lexical[0].path, cfg.address("it's.md"));
        // A note's current version by its path: exactly that path, whatever the path holds.
        assert_eq!(ix.head_of("it's.md").unwrap(), Some(id.clone()));
        for h in ["' OR 1=1 --", "it's.md' OR 'a'='a", "it%", "it_s.md", "IT'S.MD", "", "it's.md\0", "it's.md/"] {
            assert_eq!(ix.head_of(h).unwrap(), None, "{h:?}");
        }
        assert_eq!(ix.rel_of(&cfg.address("it's.md")).as_deref(), Some("it's.md"));
        assert_eq!(ix.rel_of(&format!("{}-old/it's.md", cfg.uri)), None, "a sibling tier is not this one");
    }

    /// Note `n{i}.md` of a generated tier: one paragraph holding `word`.
    fn note(i: usize, word: &str) -> NoteToPublish {
        let text = format!("The {word} runbook names the quorum.");
        let body = format!("# Runbook {i}\n\n{text}\n").into_bytes();
        let id = lode_store::version_id(&body);
        let start = body.len() - text.len() - 1;
        let passage = lode_store::PassageRow {
            id: 1,
            note_id: 1,
            version_id: id.clone(),
            ordinal: 0,
            start,
            end: start + text.len(),
            line: 3,
            kind: "paragraph".into(),
            heading: format!("Runbook {i}"),
            parent_start: start,
            parent_end: start + text.len(),
            text,
        };
        NoteToPublish {
            path: format!("n{i:02}.md"),
            title: format!("Runbook {i}"),
            version_id: id,
            body,
            meta: Default::default(),
            passages: vec![passage],
        }
    }

    /// Many small publishes, each changing another note: the table's files are merged once
    /// they pass [`COMPACT_AFTER`], each publish leaves the full-text index covering every row
    /// (updated, not rebuilt), a changed note's old words are gone and its new ones found, and
    /// a reader still on an older publish reads it whole across the merge.
    #[test]
    fn many_small_publishes_keep_the_index_whole_and_merge_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = SharedConfig::new(dir.path().join("tier").to_str().unwrap());
        // Distinct single tokens that no stemmer shortens into one another.
        let word = |round: usize| format!("zq{round}x");
        const NOTES: usize = 40;
        let mut words: Vec<String> = (0..NOTES).map(|i| format!("w{i}init")).collect();
        let mut compacted_at = None;
        let mut early: Option<(SharedIndex, String)> = None;
        let rt = runtime().unwrap();
        for round in 0..(COMPACT_AFTER + 4) {
            let old = std::mem::replace(&mut words[round % NOTES], word(round));
            let notes: Vec<NoteToPublish> = (0..NOTES).map(|i| note(i, &words[i])).collect();
            let r = publish(&cfg, &notes, None, &mut |_| {}).unwrap();
            assert_eq!(r.changed, if round == 0 { NOTES } else { 1 }, "round {round}");
            if r.compacted && compacted_at.is_none() {
                compacted_at = Some(round);
            }
            let ix = SharedIndex::open(&cfg).unwrap();
            let paths = |q: &str| ix.search(q, 5, None).unwrap().lexical.into_iter().map(|h| h.path).collect::<Vec<_>>();
            let path = cfg.address(&format!("n{:02}.md", round % NOTES));
            assert_eq!(paths(&word(round)), vec![path], "round {round}: the new words are found");
            assert!(paths(&old).is_empty(), "round {round}: the old words ({old}) are gone");
            assert_eq!(paths(&words[NOTES - 1]), vec![cfg.address(&format!("n{:02}.md", NOTES - 1))], "round {round}: an unchanged note");
            let stats = rt.block_on(async {
                let t = connect(&cfg).await.unwrap().open_table(PASSAGES).execute().await.unwrap();
                let name = t.list_indices().await.unwrap().into_iter().find(|i| i.columns == ["text"]).expect("a full-text index").name;
                t.index_stats(name).await.unwrap().unwrap()
            });
            assert_eq!((stats.num_indexed_rows, stats.num_unindexed_rows), (NOTES, 0), "round {round}: every row in the index");
            if round == 2 {
                early = Some((ix, word(2)));
            }
        }
        let at = compacted_at.expect("the files were merged");
        assert!(at >= COMPACT_AFTER - 1, "merged at round {at}, before the table had {COMPACT_AFTER} files");
        // The publish records (one file each) are merged too, and still read whole.
        let (records, files) = rt.block_on(async {
            let db = connect(&cfg).await.unwrap();
            let t = db.open_table(PUBLISHES).execute().await.unwrap();
            (read_publishes(&db).await.unwrap(), t.stats().await.unwrap().fragment_stats.num_fragments)
        });
        assert!(files <= COMPACT_AFTER, "{files} files of publish records");
        assert_eq!(records.iter().map(|p| p.seq).collect::<Vec<_>>(), (1..=records.len() as i64).collect::<Vec<_>>());
        assert!(records.len() > COMPACT_AFTER, "{} publishes", records.len());
        // A reader that opened publish 3 still reads publish 3 after the merge.
        let (early, w) = early.unwrap();
        let found = early.search(&w, 5, None).unwrap().lexical;
        assert_eq!(found.len(), 1);
        assert!(found[0].text.contains(&w));
    }

    /// A tier with vectors and its vector index, published to one note at a time: each update
    /// adds a delta to the index, and past [`MAX_VECTOR_DELTAS`] they are merged, so what a
    /// query reads stays bounded; the changed note is found by its new vector every time.
    #[test]
    fn vector_index_deltas_are_merged_and_changed_notes_found() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = SharedConfig::new(dir.path().join("tier").to_str().unwrap());
        const DIMS: usize = 16;
        // A deterministic unit vector per text.
        let vector = |t: &str| -> Vec<f32> {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            let mut v: Vec<f32> = (0..DIMS)
                .map(|_| {
                    for b in t.bytes() {
                        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
                    }
                    h = h.rotate_left(17);
                    (h % 2000) as f32 / 1000.0 - 1.0
                })
                .collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= n);
            v
        };
        let mut embed = |texts: &[String]| -> Result<Vec<Vec<f32>>, String> { Ok(texts.iter().map(|t| vector(t)).collect()) };
        let n = VECTOR_INDEX_MIN;
        let mut words: Vec<String> = (0..n).map(|i| format!("w{i}init")).collect();
        let rt = runtime().unwrap();
        let parts = || {
            rt.block_on(async {
                let t = connect(&cfg).await.unwrap().open_table(PASSAGES).execute().await.unwrap();
                let ix = t.list_indices().await.unwrap().into_iter().find(|i| i.columns == ["vector"]).expect("a vector index");
                t.index_stats(ix.name).await.unwrap().unwrap().num_indices.unwrap_or(1) as usize
            })
        };
        let mut most = 0;
        for round in 0..(MAX_VECTOR_DELTAS + 3) {
            if round > 0 {
                words[round] = format!("zq{round}x");
            }
            let notes: Vec<NoteToPublish> = (0..n).map(|i| note(i, &words[i])).collect();
            publish(&cfg, &notes, Some(("test-embedder".into(), DIMS, &mut embed)), &mut |_| {}).unwrap();
            let p = parts();
            most = most.max(p);
            assert!(p <= MAX_VECTOR_DELTAS, "round {round}: the vector index has {p} parts");
            // The changed note's passage, by the vector of exactly what was embedded.
            let text = crate::worker::embedded_text(
                &format!("Runbook {round}"),
                [format!("The {} runbook names the quorum.", words[round]).as_str()],
            );
            let ix = SharedIndex::open(&cfg).unwrap();
            let found = ix.search("", 3, Some(&vector(&text))).unwrap().dense;
            assert_eq!(found.first().map(|h| h.path.clone()), Some(cfg.address(&format!("n{round:02}.md"))), "round {round}");
        }
        assert!(most > 1, "the updates added deltas ({most} at most)");
    }

    /// Two publishes at once: the one whose commits were overtaken stops with the reason and
    /// records nothing, readers see the other whole, and the next publish completes after
    /// rolling back what the stopped one wrote.
    #[test]
    fn a_publish_overtaken_by_another_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = SharedConfig::new(dir.path().join("tier").to_str().unwrap());
        let vault = |changed: Option<(usize, &str)>| -> Vec<NoteToPublish> {
            (0..6)
                .map(|i| match changed {
                    Some((c, w)) if c == i => note(i, w),
                    _ => note(i, &format!("w{i}init")),
                })
                .collect()
        };
        publish(&cfg, &vault(None), None, &mut |_| {}).unwrap();
        // A has deleted n00's passages and not yet written the new ones when B publishes whole.
        let mut overtaken = false;
        let b_cfg = cfg.clone();
        let a = publish(&cfg, &vault(Some((0, "alphaword"))), None, &mut |msg| {
            if !overtaken && msg.contains("passages written") {
                overtaken = true;
                let (c, b) = (b_cfg.clone(), vault(Some((1, "bravoword"))));
                let r = std::thread::spawn(move || publish(&c, &b, None, &mut |_| {})).join().unwrap().unwrap();
                assert_eq!((r.seq, r.restored), (2, true), "B rolls back A's unrecorded writes");
            }
        });
        assert!(overtaken);
        let e = a.expect_err("A was overtaken");
        assert!(e.detail.contains("another publish wrote to this tier"), "{e}");
        let paths = |q: &str| {
            let ix = SharedIndex::open(&cfg).unwrap();
            (ix.publish().seq, ix.search(q, 5, None).unwrap().lexical.into_iter().map(|h| h.path).collect::<Vec<_>>())
        };
        assert_eq!(paths("bravoword"), (2, vec![cfg.address("n01.md")]));
        assert_eq!(paths("alphaword"), (2, vec![]));
        assert_eq!(paths("w0init"), (2, vec![cfg.address("n00.md")]), "B's publish is whole: n00 as first published");
        // A again (Lance refused its write after B's roll-back, so nothing of it is left).
        let r = publish(&cfg, &vault(Some((0, "alphaword"))), None, &mut |_| {}).unwrap();
        assert_eq!(r.seq, 3);
        assert_eq!(paths("alphaword"), (3, vec![cfg.address("n00.md")]));
        assert_eq!(paths("bravoword"), (3, vec![]));
        assert_eq!(paths("w1init"), (3, vec![cfg.address("n01.md")]));

        // Both start from the same publish (no roll-back, nothing for Lance to refuse: deletes
        // of other rows and appends commute): C reads the tier, D publishes whole, C writes.
        let mut overtaken = false;
        let c = publish(&cfg, &vault(Some((2, "charlieword"))), None, &mut |msg| {
            if !overtaken && msg.starts_with("reading what was published") {
                overtaken = true;
                let (c, d) = (b_cfg.clone(), vault(Some((3, "deltaword"))));
                let r = std::thread::spawn(move || publish(&c, &d, None, &mut |_| {})).join().unwrap().unwrap();
                assert_eq!((r.seq, r.restored), (4, false));
            }
        });
        assert!(overtaken);
        let e = c.expect_err("C was overtaken");
        assert!(e.detail.contains("another publish wrote to this tier"), "{e}");
        assert_eq!(paths("deltaword"), (4, vec![cfg.address("n03.md")]));
        assert_eq!(paths("charlieword"), (4, vec![]), "C's writes are in no recorded publish");
        assert_eq!(paths("w2init"), (4, vec![cfg.address("n02.md")]));
        assert_eq!(paths("alphaword"), (4, vec![]), "D's vault has n00 as first published");
        // The next publish rolls C's writes back and completes.
        let r = publish(&cfg, &vault(Some((2, "charlieword"))), None, &mut |_| {}).unwrap();
        assert_eq!((r.seq, r.restored), (5, true));
        assert_eq!(paths("charlieword"), (5, vec![cfg.address("n02.md")]));
        assert_eq!(paths("deltaword"), (5, vec![]));
    }

    #[test]
    fn secrets_in_options_are_refused_by_name() {
        for k in ["aws_secret_access_key", "AWS_SESSION_TOKEN", "azure_storage_account_key", "password"] {
            let mut c = SharedConfig::new("s3://b/p");
            c.options.insert(k.into(), "x".into());
            assert!(s3::refuse_secrets(&c.options).unwrap_err().contains(k), "{k}");
        }
        let mut c = SharedConfig::new("s3://b/p");
        c.options.insert("endpoint".into(), "http://127.0.0.1:9".into());
        assert!(s3::refuse_secrets(&c.options).is_ok());
    }
}
