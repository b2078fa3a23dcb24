//! Rank fusion and context ordering: reciprocal rank fusion of result lists, and the trust order
//! the final context is sorted by. Plain data in, plain data out.

use std::collections::HashMap;

/// Reciprocal rank fusion: each list contributes `weight / (k + rank)` (rank from 1) for every id
/// it holds; ids are returned best first, ties broken by the earliest list position seen, then id.
pub fn rrf(lists: &[(&[i64], f64)], k: f64) -> Vec<(i64, f64)> {
    let mut score: HashMap<i64, (f64, usize)> = HashMap::new();
    for (list, weight) in lists {
        for (i, &id) in list.iter().enumerate() {
            let e = score.entry(id).or_insert((0.0, usize::MAX));
            e.0 += weight / (k + (i + 1) as f64);
            e.1 = e.1.min(i);
        }
    }
    let mut out: Vec<(i64, f64, usize)> = score.into_iter().map(|(id, (s, first))| (id, s, first)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(id, s, _)| (id, s)).collect()
}

/// How much a context item is trusted, most first: the user's own words outrank annotations,
/// which outrank external snapshots (current before stale), which outrank inferred edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    Note,
    Annotation,
    /// A note of the team's shared tier: below the user's own words, above web pages.
    Shared,
    ExternalSnapshot,
    StaleSnapshot,
    InferredEdge,
}

/// How an item reached the context, most deliberate first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Every passage of the note the user asked about.
    Pinned,
    /// Retrieved for the question.
    Retrieved,
    /// From a note linked to or from a retrieved note.
    Linked,
}

/// Orders context: pinned first (in note order), then by trust, then retrieved before linked,
/// then by score. A stable sort, so equal items keep their fused order.
pub fn context_order<T>(items: &mut [T], key: impl Fn(&T) -> (Origin, Trust, f64)) {
    items.sort_by(|a, b| {
        let (oa, ta, sa) = key(a);
        let (ob, tb, sb) = key(b);
        let pinned_a = oa == Origin::Pinned;
        let pinned_b = ob == Origin::Pinned;
        pinned_b.cmp(&pinned_a).then(ta.cmp(&tb)).then(oa.cmp(&ob)).then(sb.total_cmp(&sa))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_exact_ranking() {
        let lexical = [10, 20, 30, 40];
        let dense = [30, 50, 10];
        let fused = rrf(&[(&lexical, 1.0), (&dense, 1.0)], 60.0);
        let ids: Vec<i64> = fused.iter().map(|f| f.0).collect();
        // 10: 1/61 + 1/63; 30: 1/63 + 1/61 (tie, 30 first seen at rank 0 of dense = same index 0
        // as 10 in lexical → id order); 20: 1/62; 50: 1/62 (tie, both at index 1 → id order).
        assert_eq!(ids, [10, 30, 20, 50, 40]);
        assert!((fused[0].1 - (1.0 / 61.0 + 1.0 / 63.0)).abs() < 1e-12);
        assert_eq!(rrf(&[], 60.0), vec![]);
    }

    #[test]
    fn rrf_weights_shift_the_order() {
        let a = [1, 2];
        let b = [2, 1];
        assert_eq!(rrf(&[(&a, 2.0), (&b, 1.0)], 60.0)[0].0, 1);
        assert_eq!(rrf(&[(&a, 1.0), (&b, 2.0)], 60.0)[0].0, 2);
    }

    #[test]
    fn trust_order_exact() {
        let mut items = vec![
            ("linked-note", Origin::Linked, Trust::Note, 0.9),
            ("stale", Origin::Retrieved, Trust::StaleSnapshot, 0.99),
            ("note-low", Origin::Retrieved, Trust::Note, 0.1),
            ("pinned-2", Origin::Pinned, Trust::Note, 0.0),
            ("snapshot", Origin::Retrieved, Trust::ExternalSnapshot, 0.5),
            ("note-high", Origin::Retrieved, Trust::Note, 0.8),
            ("inferred", Origin::Retrieved, Trust::InferredEdge, 1.0),
            ("annotation", Origin::Retrieved, Trust::Annotation, 0.2),
            ("pinned-1", Origin::Pinned, Trust::Note, 0.0),
        ];
        context_order(&mut items, |i| (i.1, i.2, i.3));
        let names: Vec<&str> = items.iter().map(|i| i.0).collect();
        assert_eq!(names, ["pinned-2", "pinned-1", "note-high", "note-low", "linked-note", "annotation", "snapshot", "stale", "inferred"]);
    }
}
