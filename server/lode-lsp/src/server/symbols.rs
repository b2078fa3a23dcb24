//! `workspace/symbol`: note titles and section headings, through the store's symbol index.

use super::*;

/// Symbols per answer, as rust-analyzer's default (`workspace.symbol.search.limit`): a picker
/// shows a screenful and the user types on to narrow. Each symbol costs index reads, a URI and
/// its JSON, and on a 100k-note vault a keystroke's whole answer is the figure to keep small.
const LIMIT: usize = 128;

impl Backend {
    pub(super) async fn on_symbol(&self, params: WorkspaceSymbolParams) -> Result<Option<WorkspaceSymbolResponse>> {
        // Every vault of the workspace. A note saved just before is among the symbols (each
        // vault's ticket is read before the first real await).
        let mut vaults = Vec::new();
        let roots = self.folders.lock().clone().unwrap_or_default();
        for root in roots {
            // A vault that cannot open (its error was shown when it started) gives no symbols.
            let Ok(state) = self.state_of(root).await else { continue };
            let barrier = state.writer.barrier();
            vaults.push((state, barrier));
        }
        for (state, barrier) in &vaults {
            state.writer.wait(*barrier).await;
        }
        let q = params.query;
        let syms = blocking(move || {
            let mut out = Vec::new();
            for (state, _) in &vaults {
                let store = state.readers.get()?;
                let root = &state.root;
                for (path, name, line, is_title) in store.symbols(&q, LIMIT).map_err(|e| e.to_string())? {
                    let Some(uri) = Uri::from_file_path(root.join(&path)) else { continue };
                    let pos = Position { line: line.saturating_sub(1) as u32, character: 0 };
                    #[allow(deprecated)]
                    out.push(SymbolInformation {
                        name,
                        kind: if is_title { SymbolKind::FILE } else { SymbolKind::STRING },
                        tags: None,
                        deprecated: None,
                        location: Location { uri, range: Range { start: pos, end: pos } },
                        container_name: Some(path),
                    });
                }
            }
            out.truncate(LIMIT);
            Ok(out)
        })
        .await?;
        Ok(Some(WorkspaceSymbolResponse::Flat(syms)))
    }
}
