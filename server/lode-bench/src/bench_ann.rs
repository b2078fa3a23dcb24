//! `lode-bench ann`: dense queries at scale. A LanceDB vector table of lode's own layout
//! (`VectorIndex`) is filled with synthetic vectors shaped like sentence embeddings (unit
//! vectors around a thousand topic centres), then searched flat, then again once
//! `VectorIndex::maintain_ann` has built its IVF-PQ index: latency of each, the build's time,
//! and the index's recall@10 against the flat search's exact answers.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use lode_retrieval::{VectorIndex, VectorRow};
use serde_json::json;

#[derive(Args)]
pub struct AnnArgs {
    /// Table sizes in vectors, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1000000")]
    pub vectors: Vec<usize>,
    /// Dimensions (all-MiniLM-L6-v2: 384)
    #[arg(long, default_value_t = 384)]
    pub dims: usize,
    /// Questions timed on each search
    #[arg(long, default_value_t = 100)]
    pub queries: usize,
    /// Where the tables are made (deleted after each size)
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
}

/// A small deterministic generator (xorshift64*), and normal deviates from it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.unit().max(1e-12), self.unit());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
    v
}

/// Embedding-like points: a topic centre plus noise, on the unit sphere.
struct Points {
    rng: Rng,
    centres: Vec<Vec<f32>>,
}

impl Points {
    fn new(dims: usize) -> Points {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let centres = (0..1000).map(|_| normalized((0..dims).map(|_| rng.normal()).collect())).collect();
        Points { rng, centres }
    }
    fn next(&mut self) -> Vec<f32> {
        let c = &self.centres[(self.rng.next() % self.centres.len() as u64) as usize];
        let noise = 0.6 / (c.len() as f32).sqrt();
        let v: Vec<f32> = c.iter().map(|x| x + noise * self.rng.normal()).collect();
        normalized(v)
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn timed(index: &VectorIndex, queries: &[Vec<f32>]) -> Result<(Vec<f64>, Vec<Vec<i64>>)> {
    timed_with(index, queries, lode_retrieval::ANN_NPROBES, lode_retrieval::ANN_REFINE)
}

fn timed_with(index: &VectorIndex, queries: &[Vec<f32>], nprobes: usize, refine: u32) -> Result<(Vec<f64>, Vec<Vec<i64>>)> {
    let mut ms = Vec::new();
    let mut found = Vec::new();
    for q in queries {
        let t = Instant::now();
        let near = index.nearest_with(q, 10, nprobes, refine)?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        found.push(near.into_iter().map(|(id, _)| id).collect());
    }
    ms.sort_by(f64::total_cmp);
    Ok((ms, found))
}

fn du(dir: &std::path::Path) -> u64 {
    walk(dir).iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum()
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

pub fn run(a: AnnArgs) -> Result<std::process::ExitCode> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; build with --release for representative figures");
    }
    let work = a.work.clone().unwrap_or_else(|| std::env::temp_dir().join("lode-bench-ann"));
    for &n in &a.vectors {
        let dir = work.join(format!("ann-{n}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let index = VectorIndex::open(&dir, "bench-synthetic", a.dims)?;
        let mut points = Points::new(a.dims);
        let t = Instant::now();
        let batch = 50_000;
        let mut added = 0;
        while added < n {
            let rows: Vec<VectorRow> = (added..(added + batch).min(n))
                .map(|i| VectorRow { passage_id: i as i64, note_id: (i / 18) as i64, version_id: String::new(), vector: points.next() })
                .collect();
            added += rows.len();
            index.add(&rows)?;
            eprint!("\r{n} vectors: {added} added");
        }
        index.compact()?;
        let fill_s = t.elapsed().as_secs_f64();
        eprintln!("\r{n} vectors: added and compacted in {fill_s:.1} s");
        let queries: Vec<Vec<f32>> = (0..a.queries).map(|_| points.next()).collect();
        let (flat_ms, truth) = timed(&index, &queries)?;
        eprintln!("{n} vectors: flat p50 {:.1} ms", percentile(&flat_ms, 0.5));
        let t = Instant::now();
        let built = index.maintain_ann()?;
        let build_s = t.elapsed().as_secs_f64();
        eprintln!("{n} vectors: {} in {build_s:.1} s", built.as_deref().unwrap_or("no index (below the threshold)"));
        // One untimed pass loads the index's partitions' metadata, as a serving process has.
        let _ = timed(&index, &queries[..queries.len().min(5)])?;
        let (ann_ms, found) = timed(&index, &queries)?;
        let recall_of = |found: &[Vec<i64>]| {
            let hit: usize = truth.iter().zip(found).map(|(t, f)| f.iter().filter(|id| t.contains(id)).count()).sum();
            (hit as f64 / truth.iter().map(Vec::len).sum::<usize>().max(1) as f64 * 1000.0).round() / 1000.0
        };
        let recall = recall_of(&found);
        // The trade-off around the defaults: more partitions probed, more candidates re-scored.
        let mut settings = Vec::new();
        for (nprobes, refine) in [(12, 4), (24, 1), (24, 10), (24, 25), (48, 10), (48, 25)] {
            let (ms, found) = timed_with(&index, &queries, nprobes, refine)?;
            settings.push(json!({"nprobes": nprobes, "refine_factor": refine, "p50_ms": percentile(&ms, 0.5), "p99_ms": percentile(&ms, 0.99), "recall_at_10": recall_of(&found)}));
        }
        let r = json!({
            "vectors": n, "dims": a.dims, "queries": a.queries,
            "fill_seconds": (fill_s * 10.0).round() / 10.0,
            "flat_ms": {"p50": percentile(&flat_ms, 0.5), "p99": percentile(&flat_ms, 0.99)},
            "index": built, "index_build_seconds": (build_s * 10.0).round() / 10.0,
            "ann_ms": {"p50": percentile(&ann_ms, 0.5), "p99": percentile(&ann_ms, 0.99)},
            "recall_at_10": recall,
            "settings": settings,
            "nprobes": lode_retrieval::ANN_NPROBES, "refine_factor": lode_retrieval::ANN_REFINE,
            "table_mb": du(&dir) / 1_000_000,
        });
        println!("{r}");
        drop(index);
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(std::process::ExitCode::SUCCESS)
}
