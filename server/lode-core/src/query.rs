//! Lexical query building: turns a user's question into FTS5 MATCH expressions that can never be
//! a syntax error and never carry operators the user did not mean.
//!
//! Terms are maximal runs of letters and digits, lower-cased; every term is emitted as a quoted
//! FTS5 string, so `AND`, `NEAR`, `*`, `:`, quotes, parentheses and emoji in a question are text,
//! not syntax. Question words and grammatical glue are dropped (they would make AND-mode demand
//! words the notes need not contain).

/// Words dropped from questions before AND/OR construction: question words, glue, and the verbs
/// of "which X was chosen" questions (the notes say "we will use X", not "X was chosen"). Sorted.
pub const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before",
    "being", "between", "both", "but", "by", "can", "choose", "chose", "chosen", "could", "decide", "decided", "did", "do", "does",
    "doing", "done", "during", "each", "either", "else", "ever", "explain", "few", "find", "for", "from", "get", "give", "got", "had",
    "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "know",
    "let", "list", "me", "might", "more", "most", "much", "must", "my", "no", "nor", "not", "of", "off", "on", "once", "one", "only", "or",
    "other", "our", "ours", "out", "over", "pick", "picked", "please", "s", "say", "says", "select", "selected", "shall", "she", "should",
    "show", "so", "some", "such", "t", "tell", "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they", "this",
    "those", "through", "to", "too", "under", "until", "up", "us", "very", "was", "we", "were", "what", "whats", "when", "where",
    "whether", "which", "while", "who", "whom", "whose", "why", "will", "with", "would", "you", "your", "yours",
];

pub fn is_stopword(term: &str) -> bool {
    STOPWORDS.binary_search(&term).is_ok()
}

/// Words that only shape a question after "how" ("how often", "how many"): dropped there, kept
/// elsewhere ("a long outage").
const AFTER_HOW: &[&str] = &["big", "far", "large", "long", "many", "much", "often", "old", "soon"];

/// Content terms of a question, in first-seen order, deduplicated.
pub fn terms(question: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut prev = String::new();
    for raw in question.split(|c: char| !c.is_alphanumeric()) {
        if raw.is_empty() {
            continue;
        }
        let t = raw.to_lowercase();
        let after_how = prev == "how" && AFTER_HOW.contains(&t.as_str());
        prev = t.clone();
        if after_how || is_stopword(&t) || out.contains(&t) {
            continue;
        }
        out.push(t);
    }
    // A question made only of stopwords ("what is it?") still searches for something.
    if out.is_empty() {
        for raw in question.split(|c: char| !c.is_alphanumeric()).filter(|r| !r.is_empty()) {
            let t = raw.to_lowercase();
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out
}

fn quote(term: &str) -> String {
    // Terms hold only alphanumerics, but quote-doubling keeps this safe for any input.
    format!("\"{}\"", term.replace('"', "\"\""))
}

/// Every term must match (FTS5 implicit AND).
pub fn and_query(terms: &[String]) -> Option<String> {
    (!terms.is_empty()).then(|| terms.iter().map(|t| quote(t)).collect::<Vec<_>>().join(" "))
}

/// Any term may match.
pub fn or_query(terms: &[String]) -> Option<String> {
    (!terms.is_empty()).then(|| terms.iter().map(|t| quote(t)).collect::<Vec<_>>().join(" OR "))
}

/// How many of `terms` a passage's text holds: as the index reads it (link destinations
/// blanked), a word being a form of the term ([`stem_match`]).
pub fn terms_held(text: &str, terms: &[String]) -> usize {
    let words = crate::gate::tokens(&crate::text::index_text(text));
    terms.iter().filter(|t| words.iter().any(|w| stem_match(w, t))).count()
}

/// Whether a (lower-cased) word is a form of a (lower-cased) term: equal, or sharing all but the
/// last couple of letters ("rotated"/"rotate", "policies"/"policy"). A cheap stand-in for the
/// index's Porter stemmer where Rust code needs to know which terms a text holds.
pub fn stem_match(word: &str, term: &str) -> bool {
    if word == term {
        return true;
    }
    let (w, t): (Vec<char>, Vec<char>) = (word.chars().collect(), term.chars().collect());
    let common = w.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let shorter = w.len().min(t.len());
    shorter >= 4 && common >= shorter.saturating_sub(2).max(4) && common * 3 >= t.len() * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopword_list_is_sorted_for_binary_search() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort();
        assert_eq!(sorted, STOPWORDS);
    }

    #[test]
    fn operators_and_punctuation_become_plain_terms() {
        let t = terms("What about \"redis\" AND NOT (failover* OR NEAR/3 col:x) 🚀?");
        assert_eq!(t, ["redis", "failover", "near", "3", "col", "x"]);
        assert_eq!(and_query(&t).unwrap(), r#""redis" "failover" "near" "3" "col" "x""#);
        assert_eq!(or_query(&t[..2]).unwrap(), r#""redis" OR "failover""#);
    }

    #[test]
    fn question_words_are_dropped_but_never_everything() {
        assert_eq!(terms("tell me how to rotate the staging certs"), ["rotate", "staging", "certs"]);
        assert_eq!(terms("How often are certs rotated? How many?"), ["certs", "rotated"]);
        assert_eq!(terms("a long outage"), ["long", "outage"]);
        assert_eq!(terms("what is it?"), ["what", "is", "it"]);
        assert!(terms("🚀 ()*").is_empty());
        assert_eq!(and_query(&[]), None);
    }

    #[test]
    fn stem_matching() {
        for (w, t) in [("rotated", "rotate"), ("rotation", "rotated"), ("policies", "policy"), ("certificates", "certificate")] {
            assert!(stem_match(w, t), "{w} ~ {t}");
        }
        for (w, t) in [("rot", "rotate"), ("cat", "cats"), ("station", "rotation"), ("rotor", "rotation")] {
            assert!(!stem_match(w, t), "{w} !~ {t}");
        }
    }

    #[test]
    fn non_latin_terms_are_kept() {
        assert_eq!(terms("Combien de temps a duré la panne ?"), ["combien", "de", "temps", "duré", "la", "panne"]);
        assert_eq!(terms("日本語 edition"), ["日本語", "edition"]);
    }
}
