//! The benchmarks run end to end on small inputs: each leg measures what it says it measures.
//! They drive the `lode` binary beside `lode-bench` (cargo builds both for the workspace's tests).

use std::process::Command;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `lode-bench scale` on a small generated vault: the three legs ran on the same notes, and the
/// parse leg made every passage the index holds (it did the whole of lode's parsing).
#[test]
fn bench_scale_times_lode_its_parse_and_the_fts5_floor_on_the_same_notes() {
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_lode-bench")).args(["scale", "--notes", "120", "--work"]).arg(tmp.path()).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let run = &v["runs"][0];
    assert_eq!(run["notes"], 120);
    let passages = run["passages"].as_u64().unwrap();
    assert!(passages > 120, "{run}");
    assert_eq!(run["parse_passages"].as_u64(), Some(passages), "{run}");
    assert!(run["paragraphs"].as_u64().unwrap() > 120, "{run}");
    for k in ["lode_s", "fts5_floor_s", "parse_s", "ratio", "parse_vs_floor", "parse_us_per_note"] {
        assert!(run[k].is_number(), "{k} missing: {run}");
    }
    assert!(stderr(&o).contains("lode's parse alone"), "{}", stderr(&o));
}
