//! Nested vaults: a folder inside the vault with its own `.lode/config.toml` keeps its own
//! `[egress] no_egress` patterns (relative to that folder) when the outer vault holds its notes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::EgressRules;

/// The nested vaults' rules under one vault root, read from disk on first use and cached (one
/// instance per question: a config edited between questions is read again).
#[derive(Debug)]
pub struct NestedRules {
    root: PathBuf,
    /// Per folder (vault-relative): its rules, why they cannot be read, or no nested config.
    folders: HashMap<String, Option<Result<EgressRules, String>>>,
}

impl NestedRules {
    pub fn new(root: &Path) -> NestedRules {
        NestedRules { root: root.to_owned(), folders: HashMap::new() }
    }

    /// Why a nested vault's own rules keep the note at `path` (vault-relative) local, if they do.
    /// A nested config that cannot be read withholds every note below it.
    pub fn withheld(&mut self, path: &str) -> Option<String> {
        let path = path.replace('\\', "/");
        for (end, _) in path.match_indices('/') {
            let folder = &path[..end];
            let rules = self.folders.entry(folder.to_owned()).or_insert_with(|| read(&self.root.join(folder)));
            match rules {
                None => {}
                Some(Err(e)) => return Some(format!("{folder}/.lode/config.toml cannot be read ({e}); its notes are withheld to be safe")),
                Some(Ok(r)) => {
                    if let Some(which) = r.path_withheld(&path[end + 1..]) {
                        return Some(format!("{which} in the nested vault {folder}/"));
                    }
                }
            }
        }
        None
    }

    /// The nested vaults found so far, with whether their config reads (for `lode doctor`).
    pub fn found(&self) -> Vec<(String, Result<usize, String>)> {
        let mut v: Vec<(String, Result<usize, String>)> = self
            .folders
            .iter()
            .filter_map(|(f, r)| r.as_ref().map(|r| (f.clone(), r.as_ref().map(|r| r.patterns().len()).map_err(Clone::clone))))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// The rules of the nested vault at `folder`, if it has a config.
fn read(folder: &Path) -> Option<Result<EgressRules, String>> {
    let file = folder.join(".lode").join("config.toml");
    let bytes = match read_config_file(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::NotADirectory => return None,
        // Withheld, as any config that cannot be read.
        Err(e) => return Some(Err(e.to_string())),
    };
    let text = String::from_utf8_lossy(&bytes);
    Some(parse(&text))
}

/// Largest config file lode reads: settings are a few hundred bytes; a folder's config linked
/// to a device or grown huge must not hang or exhaust lode.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The bytes of a `.lode/config.toml`: a regular file (a link is followed, but only to one)
/// of at most [`MAX_CONFIG_BYTES`]. Every reader of a vault's config reads it through this.
pub fn read_config_file(path: &Path) -> std::io::Result<Vec<u8>> {
    lode_store::vault::read_small_file(path, MAX_CONFIG_BYTES, true)
}

/// `[egress] no_egress = [...]` of a config's text.
pub(crate) fn parse(text: &str) -> Result<EgressRules, String> {
    let v: toml::Table = text.parse().map_err(|e: toml::de::Error| e.message().to_owned())?;
    let patterns = match v.get("egress").and_then(|e| e.get("no_egress")) {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a
            .iter()
            .map(|p| p.as_str().map(str::to_owned).ok_or_else(|| "[egress] no_egress must be a list of strings".to_owned()))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err("[egress] no_egress must be a list of strings".into()),
    };
    EgressRules::new(&patterns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_vault_keeps_its_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("team/.lode")).unwrap();
        std::fs::write(root.join("team/.lode/config.toml"), "[egress]\nno_egress = [\"hr/\"]\n").unwrap();
        std::fs::create_dir_all(root.join("broken/.lode")).unwrap();
        std::fs::write(root.join("broken/.lode/config.toml"), "[egress\nno_egress = [").unwrap();
        let mut n = NestedRules::new(root);
        assert_eq!(n.withheld("team/hr/pay.md").as_deref(), Some("path matches no-egress pattern \"hr/\" in the nested vault team/"));
        assert_eq!(n.withheld("team/eng/plan.md"), None);
        assert_eq!(n.withheld("hr/pay.md"), None, "the pattern is the nested vault's, relative to it");
        assert!(n.withheld("broken/a.md").unwrap().contains("broken/.lode/config.toml cannot be read"));
        assert_eq!(n.withheld("top.md"), None);
        assert_eq!(n.found().len(), 2);
    }
}
