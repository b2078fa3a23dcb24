//! `workspace/symbol`: note titles and section headings, through the store's symbol index.

use super::*;

impl Backend {
    pub(super) async fn on_symbol(&self, params: WorkspaceSymbolParams) -> Result<Option<WorkspaceSymbolResponse>> {
        // A note saved just before is among the symbols (the ticket is read before the first await).
        let barrier = self.state().await.map(|s| s.writer.barrier());
        let state = self.state().await?;
        state.writer.wait(barrier.unwrap_or(0)).await;
        let readers = state.readers.clone();
        let root = state.root.clone();
        let q = params.query.to_lowercase();
        let syms = blocking(move || {
            let store = readers.get()?;
            let mut out = Vec::new();
            for (path, name, line, is_title) in store.symbols(&q, 200).map_err(|e| e.to_string())? {
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
            Ok(out)
        })
        .await?;
        Ok(Some(WorkspaceSymbolResponse::Flat(syms)))
    }
}
