//! Note navigation over the store and `lode_core::nav`: go to definition of links, footnotes,
//! references and tags; references (backlinks) of notes, headings, tags and footnotes; link
//! hover; completion of notes, headings, paths and tags; outline, folding, document links;
//! broken-link diagnostics; heading and note renames.

use std::ops::Range as Bytes;

use lode_core::nav::{self, Dest, NavItem, NavKind, NavLink, Section};
use lode_store::Store;

use super::*;
use lode_engine::links::{links_to, resolve, Target};

/// Parses a note off the message loop (a note may be megabytes).
pub(super) async fn off_loop<T: Send + 'static>(text: &str, f: impl FnOnce(&str) -> T + Send + 'static) -> Result<T> {
    let text = text.to_owned();
    blocking(move || Ok(f(&text))).await
}

/// A note's text for navigation: the open buffer if the editor has it, else the head version.
pub(super) fn text_of(store: &Store, docs: &Mutex<HashMap<String, Doc>>, root: &Path, path: &str) -> Option<String> {
    if let Some(uri) = Uri::from_file_path(root.join(path)) {
        if let Some(d) = docs.lock().get(uri.as_str()) {
            return Some(d.rope.to_string());
        }
    }
    let head = store.head_of(path).ok()??;
    let body = store.version_body(&head).ok()??;
    Some(String::from_utf8_lossy(&body).into_owned())
}

fn loc(root: &Path, path: &str, text: &str, r: Bytes<usize>, enc: Encoding) -> Option<Location> {
    let rope = Rope::from_str(text);
    Some(Location { uri: Uri::from_file_path(root.join(path))?, range: position::range(&rope, r, enc) })
}

/// `L12` or `L12-L14`: a line anchor (GitHub's, and lode's citation links), not a heading.
fn line_anchor(fragment: &str) -> Option<usize> {
    let first = fragment.split('-').next()?;
    let n: usize = first.strip_prefix('L')?.parse().ok()?;
    (n > 0).then_some(n)
}

/// Byte range of the start of 1-based line `n` of `text` (clamped to its end).
fn line_start(text: &str, n: usize) -> Bytes<usize> {
    let at: usize = text.split_inclusive('\n').take(n.saturating_sub(1)).map(str::len).sum();
    at..at
}

/// The section a fragment names in `text`.
fn section(text: &str, fragment: &str) -> Option<Section> {
    let sections = nav::outline(text);
    nav::find_section(&sections, fragment).map(|i| sections[i].clone())
}

fn tag_name(link: &NavLink) -> Option<String> {
    matches!(link.kind, NavKind::Tag | NavKind::FrontmatterTag).then(|| link.label.as_ref().map(|l| l.text.clone())).flatten()
}

/// Every link in the vault to the note at `path` (to one of its sections when `heading` is
/// given), with the linking note and range; the note's own links to itself included.
fn backlinks(
    store: &Store,
    docs: &Mutex<HashMap<String, Doc>>,
    root: &Path,
    path: &str,
    heading: Option<&Section>,
) -> Vec<(String, String, Bytes<usize>)> {
    let mut sources: Vec<String> = store.linking_notes(path).unwrap_or_default().into_iter().map(|(p, _)| p).collect();
    if !sources.iter().any(|s| s == path) {
        sources.push(path.to_owned());
    }
    let mut out = Vec::new();
    let mut cache = HashMap::new();
    for src in sources {
        let Some(text) = text_of(store, docs, root, &src) else { continue };
        for l in nav::links(&text) {
            if matches!(l.kind, NavKind::WikiLink | NavKind::InlineLink | NavKind::RefDef)
                && links_to(store, &src, &l, path, heading, &mut cache)
            {
                out.push((src.clone(), text.clone(), l.range.clone()));
            }
        }
    }
    out
}

impl Backend {
    /// The note's text and its vault path for a document URI.
    fn nav_doc(&self, state: &State, uri: &Uri) -> Option<(Rope, String, String)> {
        let (rope, text) = self.doc_text(uri)?;
        let rel = Self::rel(state, uri).unwrap_or_default();
        Some((rope, text, rel))
    }

    /// For requests that read other notes: waits for earlier saves (ticket read before the
    /// first await: see writer.rs), then the document, its vault path and the cursor's offset.
    async fn nav_request(&self, at: &TextDocumentPositionParams) -> Result<Option<(Arc<State>, Rope, String, String, usize)>> {
        let state = self.settled(Some(&at.text_document.uri)).await?;
        let Some((rope, text, rel)) = self.nav_doc(&state, &at.text_document.uri) else { return Ok(None) };
        let offset = position::offset(&rope, at.position, self.enc());
        Ok(Some((state, rope, text, rel, offset)))
    }

    /// Go to definition for navigation items (citations are handled before this).
    pub(super) async fn nav_definition(
        &self,
        state: Arc<State>,
        at: &TextDocumentPositionParams,
    ) -> Result<Option<GotoDefinitionResponse>> {
        let Some((rope, text, rel)) = self.nav_doc(&state, &at.text_document.uri) else { return Ok(None) };
        let enc = self.enc();
        let offset = position::offset(&rope, at.position, enc);
        let Some(NavItem::Link { link, .. }) = off_loop(&text, move |t| nav::at(t, offset)).await? else { return Ok(None) };
        let (docs, root, readers, uri) = (self.docs.clone(), state.root.clone(), state.readers.clone(), at.text_document.uri.clone());
        blocking(move || {
            let store = readers.get()?;
            let here = |r: Bytes<usize>| Location { uri: uri.clone(), range: position::range(&rope, r, enc) };
            let one = |l: Option<Location>| Ok(l.map(GotoDefinitionResponse::Scalar));
            match link.kind {
                NavKind::RefLink => {
                    let key = link.label.as_ref().map(|l| nav::normalize_label(&l.text));
                    let def = nav::links(&text)
                        .into_iter()
                        .find(|d| d.kind == NavKind::RefDef && d.label.as_ref().map(|l| nav::normalize_label(&l.text)) == key);
                    return one(def.map(|d| here(d.range)));
                }
                NavKind::FootnoteRef | NavKind::FootnoteDef => {
                    let want = if link.kind == NavKind::FootnoteRef { NavKind::FootnoteDef } else { NavKind::FootnoteRef };
                    let key = link.label.as_ref().map(|l| nav::normalize_label(&l.text));
                    let found = nav::links(&text)
                        .into_iter()
                        .find(|d| d.kind == want && d.label.as_ref().map(|l| nav::normalize_label(&l.text)) == key);
                    return one(found.map(|d| here(d.range)));
                }
                NavKind::Tag | NavKind::FrontmatterTag => {
                    let Some(tag) = tag_name(&link) else { return Ok(None) };
                    let mut locs = Vec::new();
                    for (path, vid, s, e) in store.tagged(&tag, 500).map_err(|e| e.to_string())? {
                        let Some(body) = store.version_body(&vid).map_err(|e| e.to_string())? else { continue };
                        if let Some(l) = loc(&root, &path, &String::from_utf8_lossy(&body), s..e, enc) {
                            locs.push(l);
                        }
                    }
                    return Ok((!locs.is_empty()).then_some(GotoDefinitionResponse::Array(locs)));
                }
                _ => {}
            }
            match resolve(&store, &rel, &link) {
                Target::Note { path, fragment, .. } => {
                    let body = text_of(&store, &docs, &root, &path).unwrap_or_default();
                    let r = match fragment {
                        Some(f) if line_anchor(&f).is_some() => line_start(&body, line_anchor(&f).unwrap_or(1)),
                        Some(f) => section(&body, &f).map_or(0..0, |s| s.heading),
                        None => 0..0,
                    };
                    one(loc(&root, &path, &body, r, enc))
                }
                Target::Here { fragment } => one(section(&text, &fragment).map(|s| here(s.heading))),
                Target::File { path } if root.join(&path).exists() => {
                    one(Uri::from_file_path(root.join(&path)).map(|u| Location { uri: u, range: Range::default() }))
                }
                _ => Ok(None),
            }
        })
        .await
    }

    /// Hover on a link: a preview of what it leads to, or why it leads nowhere.
    pub(super) async fn nav_hover(&self, state: Arc<State>, at: &TextDocumentPositionParams) -> Result<Option<Hover>> {
        let Some((rope, text, rel)) = self.nav_doc(&state, &at.text_document.uri) else { return Ok(None) };
        let enc = self.enc();
        let offset = position::offset(&rope, at.position, enc);
        let Some(NavItem::Link { link, .. }) = off_loop(&text, move |t| nav::at(t, offset)).await? else { return Ok(None) };
        let range = position::range(&rope, link.range.clone(), enc);
        let (docs, root, readers) = (self.docs.clone(), state.root.clone(), state.readers.clone());
        let freshness = state.settings.externals.freshness;
        let md = blocking(move || {
            let store = readers.get()?;
            if link.dest == Dest::External {
                return super::externals::external_hover(&store, &link, &freshness);
            }
            if let Some(tag) = tag_name(&link) {
                let n = store
                    .tagged(&tag, 10_000)
                    .map_err(|e| e.to_string())?
                    .iter()
                    .map(|t| t.0.clone())
                    .collect::<std::collections::BTreeSet<_>>()
                    .len();
                return Ok(Some(format!("**#{tag}** — {n} note{}", if n == 1 { "" } else { "s" })));
            }
            let preview = |path: &str, body: &str, fragment: Option<String>| -> String {
                let (title, part) = match fragment.as_deref().and_then(|f| section(body, f)) {
                    Some(s) => (s.text.clone(), body[s.range.clone()].to_owned()),
                    None if fragment.is_some() => {
                        return format!("`{path}` — **no heading** `{}` in this note", fragment.unwrap_or_default());
                    }
                    None => (String::new(), body.to_owned()),
                };
                let lines: Vec<&str> = part.lines().take(12).collect();
                let more = if part.lines().count() > 12 { "\n…" } else { "" };
                let head = if title.is_empty() { format!("`{path}`") } else { format!("`{path}` › **{title}**") };
                format!("{head}\n\n---\n\n{}{more}", lines.join("\n"))
            };
            Ok(match resolve(&store, &rel, &link) {
                Target::Note { path, fragment, ambiguous } => {
                    let body = text_of(&store, &docs, &root, &path).unwrap_or_default();
                    let mut md = preview(&path, &body, fragment);
                    if !ambiguous.is_empty() {
                        md.push_str(&format!("\n\n*Ambiguous: also {}*", ambiguous.join(", ")));
                    }
                    Some(md)
                }
                Target::Here { fragment } => Some(preview(&rel, &text, Some(fragment))),
                Target::Missing { name } => Some(format!("**Unresolved link**: no note `{name}` in this vault")),
                Target::File { path } if root.join(&path).exists() => Some(format!("`{path}` (not a note)")),
                Target::File { path } => Some(format!("**Unresolved link**: no file `{path}`")),
                _ => None,
            })
        })
        .await?;
        Ok(md.map(|value| Hover {
            contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value }),
            range: Some(range),
        }))
    }

    /// References: to the note (on its title), a heading, a tag or a footnote.
    pub(super) async fn on_references(&self, params: ReferenceParams) -> Result<Option<Vec<Location>>> {
        let at = params.text_document_position;
        let Some((state, rope, text, rel, offset)) = self.nav_request(&at).await? else { return Ok(None) };
        let enc = self.enc();
        let item = off_loop(&text, move |t| nav::at(t, offset)).await?;
        let (docs, root, readers, uri) = (self.docs.clone(), state.root.clone(), state.readers.clone(), at.text_document.uri.clone());
        let include_decl = params.context.include_declaration;
        blocking(move || {
            let store = readers.get()?;
            let mut out = Vec::new();
            match item {
                Some(NavItem::Heading { index, section }) => {
                    // The first top-level heading stands for the note itself.
                    let is_title = index == 0 && section.level == 1;
                    let heading = (!is_title).then_some(&section);
                    for (src, body, r) in backlinks(&store, &docs, &root, &rel, heading) {
                        out.extend(loc(&root, &src, &body, r, enc));
                    }
                    if include_decl {
                        out.insert(0, Location { uri: uri.clone(), range: position::range(&rope, section.heading.clone(), enc) });
                    }
                }
                Some(NavItem::Link { link, .. }) => {
                    if let Some(tag) = tag_name(&link) {
                        for (path, vid, s, e) in store.tagged_under(&tag, 5000).map_err(|e| e.to_string())? {
                            let Some(body) = store.version_body(&vid).map_err(|e| e.to_string())? else { continue };
                            out.extend(loc(&root, &path, &String::from_utf8_lossy(&body), s..e, enc));
                        }
                    } else if matches!(link.kind, NavKind::FootnoteRef | NavKind::FootnoteDef | NavKind::RefLink | NavKind::RefDef) {
                        let key = link.label.as_ref().map(|l| nav::normalize_label(&l.text));
                        let footnote = matches!(link.kind, NavKind::FootnoteRef | NavKind::FootnoteDef);
                        for l in nav::links(&text) {
                            let same_family = if footnote {
                                matches!(l.kind, NavKind::FootnoteRef | NavKind::FootnoteDef)
                            } else {
                                matches!(l.kind, NavKind::RefLink | NavKind::RefDef)
                            };
                            let is_decl = matches!(l.kind, NavKind::FootnoteDef | NavKind::RefDef);
                            if same_family && l.label.as_ref().map(|x| nav::normalize_label(&x.text)) == key && (include_decl || !is_decl) {
                                out.push(Location { uri: uri.clone(), range: position::range(&rope, l.range, enc) });
                            }
                        }
                    } else if let Target::Note { path, fragment, .. } = resolve(&store, &rel, &link) {
                        // On a link: the references of what it leads to.
                        let body = text_of(&store, &docs, &root, &path).unwrap_or_default();
                        let heading = fragment.and_then(|f| section(&body, &f));
                        for (src, b, r) in backlinks(&store, &docs, &root, &path, heading.as_ref()) {
                            out.extend(loc(&root, &src, &b, r, enc));
                        }
                        // The declaration: the heading linked to, or the note's title (its first
                        // top-level heading; else its start).
                        if include_decl {
                            let decl = match &heading {
                                Some(h) => Some(h.heading.clone()),
                                None => nav::outline(&body).into_iter().find(|s| s.level == 1).map(|s| s.heading).or(Some(0..0)),
                            };
                            if let Some(r) = decl {
                                out.splice(0..0, loc(&root, &path, &body, r, enc));
                            }
                        }
                    }
                }
                None => {
                    // Anywhere else: references to this note.
                    for (src, body, r) in backlinks(&store, &docs, &root, &rel, None) {
                        out.extend(loc(&root, &src, &body, r, enc));
                    }
                }
            }
            Ok(Some(out))
        })
        .await
    }

    pub(super) async fn on_document_symbol(&self, params: DocumentSymbolParams) -> Result<Option<DocumentSymbolResponse>> {
        let Some((rope, text)) = self.doc_text(&params.text_document.uri) else { return Ok(None) };
        let enc = self.enc();
        let sections = off_loop(&text, nav::outline).await?;
        // Children before parents are attached: build bottom-up.
        let mut nodes: Vec<Option<DocumentSymbol>> = sections
            .iter()
            .map(|s| {
                #[allow(deprecated)]
                Some(DocumentSymbol {
                    name: if s.text.trim().is_empty() { "(empty heading)".into() } else { s.text.clone() },
                    detail: Some("#".repeat(s.level as usize)),
                    kind: if s.level == 1 { SymbolKind::FILE } else { SymbolKind::STRING },
                    tags: None,
                    deprecated: None,
                    range: position::range(&rope, s.range.clone(), enc),
                    selection_range: position::range(&rope, s.name.clone(), enc),
                    children: None,
                })
            })
            .collect();
        for i in (0..sections.len()).rev() {
            if let Some(p) = sections[i].parent {
                if let Some(child) = nodes[i].take() {
                    if let Some(parent) = nodes[p].as_mut() {
                        parent.children.get_or_insert_with(Vec::new).insert(0, child);
                    }
                }
            }
        }
        Ok(Some(DocumentSymbolResponse::Nested(nodes.into_iter().flatten().collect())))
    }

    pub(super) async fn on_folding_range(&self, params: FoldingRangeParams) -> Result<Option<Vec<FoldingRange>>> {
        let Some((rope, text)) = self.doc_text(&params.text_document.uri) else { return Ok(None) };
        let line = |b: usize| rope.byte_to_line(b.min(rope.len_bytes())) as u32;
        let folds = off_loop(&text, nav::folding_ranges)
            .await?
            .into_iter()
            .filter_map(|f| {
                let (start, end) = (line(f.range.start), line(f.range.end.saturating_sub(1).max(f.range.start)));
                (end > start).then_some(FoldingRange {
                    start_line: start,
                    start_character: None,
                    end_line: end,
                    end_character: None,
                    kind: Some(match f.kind {
                        nav::FoldKind::Frontmatter | nav::FoldKind::Comment => FoldingRangeKind::Comment,
                        _ => FoldingRangeKind::Region,
                    }),
                    collapsed_text: None,
                })
            })
            .collect();
        Ok(Some(folds))
    }

    pub(super) async fn on_document_link(&self, params: DocumentLinkParams) -> Result<Option<Vec<DocumentLink>>> {
        let state = self.state_for(&params.text_document.uri).await?;
        let Some((rope, text, rel)) = self.nav_doc(&state, &params.text_document.uri) else { return Ok(None) };
        let enc = self.enc();
        let (root, readers) = (state.root.clone(), state.readers.clone());
        blocking(move || {
            let store = readers.get()?;
            let mut out = Vec::new();
            for l in nav::links(&text) {
                if !matches!(l.kind, NavKind::WikiLink | NavKind::InlineLink) || l.embed && l.dest == Dest::File {
                    continue;
                }
                let target = match resolve(&store, &rel, &l) {
                    Target::Note { path, .. } => Uri::from_file_path(root.join(path)),
                    Target::File { path } => Uri::from_file_path(root.join(path)),
                    Target::External => l.note.as_ref().and_then(|n| n.text.parse::<Uri>().ok()),
                    _ => None,
                };
                if let Some(target) = target {
                    out.push(DocumentLink { range: position::range(&rope, l.range, enc), target: Some(target), tooltip: None, data: None });
                }
            }
            Ok(Some(out))
        })
        .await
    }

    pub(super) async fn on_completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        let state = self.state_for(&params.text_document_position.text_document.uri).await?;
        let at = params.text_document_position;
        let Some((rope, text, rel)) = self.nav_doc(&state, &at.text_document.uri) else { return Ok(None) };
        let enc = self.enc();
        let offset = position::offset(&rope, at.position, enc);
        let Some(ctx) = off_loop(&text, move |t| nav::completion_context(t, offset)).await? else { return Ok(None) };
        let (docs, root, readers) = (self.docs.clone(), state.root.clone(), state.readers.clone());
        blocking(move || {
            let store = readers.get()?;
            let replace = position::range(&rope, ctx.replace.start..ctx.rest.end, enc);
            let item = |label: String, insert: String, kind: CompletionItemKind, detail: Option<String>| CompletionItem {
                label,
                kind: Some(kind),
                detail,
                filter_text: None,
                text_edit: Some(CompletionTextEdit::Edit(TextEdit { range: replace, new_text: insert })),
                ..Default::default()
            };
            let mut items = Vec::new();
            match &ctx.kind {
                nav::CompletionKind::WikiNote => {
                    let close = if ctx.closing.is_some() { "" } else { "]]" };
                    let found = store.complete_notes(&ctx.prefix, 50).map_err(|e| e.to_string())?;
                    for (path, title, alias) in found {
                        let stem = stem(&path);
                        // A bare name reaches the note with the shortest path among those with
                        // that file name; the others need their path.
                        let name = match store.wiki_candidates(&stem) {
                            Ok(c)
                                if c.iter().filter(|(p, _, _)| self::stem(p).eq_ignore_ascii_case(&stem)).count() > 1
                                    && c.first().is_some_and(|(p, _, _)| *p != path) =>
                            {
                                path.trim_end_matches(".md").trim_end_matches(".markdown").to_owned()
                            }
                            _ => stem.clone(),
                        };
                        let label = alias.clone().unwrap_or_else(|| name.clone());
                        let insert = match &alias {
                            Some(a) => format!("{name}|{a}{close}"),
                            None => format!("{name}{close}"),
                        };
                        items.push(item(label, insert, CompletionItemKind::FILE, Some(format!("{title} — {path}"))));
                    }
                }
                nav::CompletionKind::WikiHeading { note } | nav::CompletionKind::MarkdownHeading { path: note } => {
                    let wiki = matches!(ctx.kind, nav::CompletionKind::WikiHeading { .. });
                    let body = if note.trim().is_empty() {
                        Some(text.clone())
                    } else {
                        let fake = NavLink {
                            kind: if wiki { NavKind::WikiLink } else { NavKind::InlineLink },
                            note: Some(nav::Part { text: note.clone(), range: 0..0 }),
                            dest: Dest::Note,
                            ..NavLink::empty()
                        };
                        match resolve(&store, &rel, &fake) {
                            Target::Note { path, .. } => text_of(&store, &docs, &root, &path),
                            _ => None,
                        }
                    };
                    let close = if ctx.closing.is_some() || !wiki { "" } else { "]]" };
                    let typed = ctx.prefix.to_lowercase();
                    for s in nav::outline(&body.unwrap_or_default()).into_iter().filter(|s| s.text.to_lowercase().contains(&typed)) {
                        let insert = if wiki { format!("{}{close}", s.text) } else { s.slug.clone() };
                        items.push(item(s.text.clone(), insert, CompletionItemKind::REFERENCE, Some("#".repeat(s.level as usize))));
                    }
                }
                nav::CompletionKind::MarkdownPath => {
                    let typed = ctx.prefix.rsplit('/').next().unwrap_or(&ctx.prefix).to_owned();
                    for (path, title, _) in store.complete_notes(&typed, 50).map_err(|e| e.to_string())? {
                        let insert = relative(&rel, &path);
                        items.push(item(insert.clone(), insert, CompletionItemKind::FILE, Some(title)));
                    }
                }
                nav::CompletionKind::Tag => {
                    for (tag, n) in store.tags_matching(&ctx.prefix, 50).map_err(|e| e.to_string())? {
                        items.push(item(tag.clone(), tag, CompletionItemKind::KEYWORD, Some(format!("{n} notes"))));
                    }
                }
            }
            Ok(Some(CompletionResponse::List(CompletionList { is_incomplete: true, items })))
        })
        .await
    }

    /// Navigation diagnostics for an open note: links to no note or no heading, ambiguous wiki
    /// links. Computed with the citation diagnostics (open, save, file events).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn nav_diagnostics(
        store: &Store,
        root: &Path,
        docs: &Mutex<HashMap<String, Doc>>,
        rel: &str,
        rope: &Rope,
        text: &str,
        links: &[NavLink],
        enc: Encoding,
    ) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let diag = |r: Bytes<usize>, sev: DiagnosticSeverity, code: &str, message: String, data: Option<Value>| Diagnostic {
            range: position::range(rope, r, enc),
            severity: Some(sev),
            code: Some(NumberOrString::String(code.into())),
            source: Some("lode".into()),
            message,
            data,
            ..Default::default()
        };
        for l in links.iter().cloned() {
            if !matches!(l.kind, NavKind::WikiLink | NavKind::InlineLink | NavKind::RefDef) || l.embed {
                continue;
            }
            // Citation links have their own diagnostics (drift, older version).
            if l.title.as_deref().is_some_and(|t| t.starts_with("lode ")) {
                continue;
            }
            match resolve(store, rel, &l) {
                Target::Missing { name } => {
                    let create = if l.kind == NavKind::WikiLink {
                        let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
                        let file = if name.ends_with(".md") { name.clone() } else { format!("{name}.md") };
                        if dir.is_empty() || name.contains('/') {
                            file
                        } else {
                            format!("{dir}/{file}")
                        }
                    } else if name.ends_with(".md") {
                        name.clone()
                    } else {
                        format!("{name}.md")
                    };
                    out.push(diag(
                        l.range.clone(),
                        DiagnosticSeverity::WARNING,
                        "lode.broken-link",
                        format!("no note `{name}` in this vault"),
                        Some(json!({"create": create, "title": name.rsplit('/').next().unwrap_or(&name).trim_end_matches(".md")})),
                    ));
                }
                Target::Note { path, fragment, ambiguous } => {
                    if !ambiguous.is_empty() {
                        out.push(diag(
                            l.range.clone(),
                            DiagnosticSeverity::INFORMATION,
                            "lode.ambiguous-link",
                            format!("several notes match: {path} (chosen), {}", ambiguous.join(", ")),
                            None,
                        ));
                    }
                    if let Some(f) = fragment.filter(|f| line_anchor(f).is_none()) {
                        let body = text_of(store, docs, root, &path).unwrap_or_default();
                        if section(&body, &f).is_none() {
                            out.push(diag(
                                l.range.clone(),
                                DiagnosticSeverity::WARNING,
                                "lode.broken-heading",
                                format!("no heading `{f}` in {path}"),
                                None,
                            ));
                        }
                    }
                }
                Target::Here { fragment } if line_anchor(&fragment).is_none() && section(text, &fragment).is_none() => {
                    out.push(diag(
                        l.range.clone(),
                        DiagnosticSeverity::WARNING,
                        "lode.broken-heading",
                        format!("no heading `{fragment}` in this note"),
                        None,
                    ));
                }
                _ => {}
            }
        }
        // Duplicate headings make `#slug` links ambiguous (GitHub numbers them: `-1`, `-2`).
        let sections = nav::outline(text);
        let mut seen: HashMap<String, usize> = HashMap::new();
        for s in &sections {
            let key = nav::normalize_label(&s.text);
            if let Some(&first) = seen.get(&key) {
                out.push(diag(
                    s.name.clone(),
                    DiagnosticSeverity::INFORMATION,
                    "lode.duplicate-heading",
                    format!(
                        "same heading as line {}: links to it reach the first one",
                        rope.byte_to_line(sections[first].heading.start) + 1
                    ),
                    None,
                ));
            } else {
                seen.insert(key, sections.iter().position(|x| std::ptr::eq(x, s)).unwrap_or(0));
            }
        }
        out
    }

    pub(super) async fn on_prepare_rename(&self, params: TextDocumentPositionParams) -> Result<Option<PrepareRenameResponse>> {
        let Some((rope, text)) = self.doc_text(&params.text_document.uri) else { return Ok(None) };
        let enc = self.enc();
        let offset = position::offset(&rope, params.position, enc);
        match off_loop(&text, move |t| nav::at(t, offset)).await? {
            Some(NavItem::Heading { section, .. }) => Ok(Some(PrepareRenameResponse::RangeWithPlaceholder {
                range: position::range(&rope, section.name.clone(), enc),
                placeholder: section.text.clone(),
            })),
            Some(NavItem::Link { link, .. }) if tag_name(&link).is_some() => {
                let label = link.label.clone().unwrap_or(nav::Part { text: String::new(), range: link.edit.clone() });
                Ok(Some(PrepareRenameResponse::RangeWithPlaceholder {
                    range: position::range(&rope, label.range, enc),
                    placeholder: label.text,
                }))
            }
            _ => Err(invalid("only a heading or a tag can be renamed here (rename a note by renaming its file)")),
        }
    }

    /// Renames a heading: the heading itself and every link to it in the vault, in one edit.
    pub(super) async fn on_rename(&self, params: RenameParams) -> Result<Option<WorkspaceEdit>> {
        let at = params.text_document_position;
        let Some((state, rope, text, rel, offset)) = self.nav_request(&at).await? else { return Ok(None) };
        let enc = self.enc();
        let section = match off_loop(&text, move |t| nav::at(t, offset)).await? {
            Some(NavItem::Heading { section, .. }) => section,
            Some(NavItem::Link { link, .. }) if tag_name(&link).is_some() => {
                return self.rename_tag(&state, tag_name(&link).unwrap_or_default(), params.new_name).await;
            }
            _ => return Err(invalid("only a heading or a tag can be renamed here (rename a note by renaming its file)")),
        };
        let new_name = params.new_name.trim().to_owned();
        if new_name.is_empty() || new_name.contains('\n') || new_name.contains("]]") || new_name.contains('|') || new_name.contains('#') {
            return Err(invalid("a heading cannot be empty or contain a line break, `]]`, `|` or `#`"));
        }
        let (docs, root, readers, uri) = (self.docs.clone(), state.root.clone(), state.readers.clone(), at.text_document.uri.clone());
        let new_slug = nav::slug(&new_name);
        blocking(move || {
            let store = readers.get()?;
            let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
            changes
                .entry(uri.clone())
                .or_default()
                .push(TextEdit { range: position::range(&rope, section.name.clone(), enc), new_text: new_name.clone() });
            let mut sources: Vec<String> = store.linking_notes(&rel).map_err(|e| e.to_string())?.into_iter().map(|(p, _)| p).collect();
            if !sources.contains(&rel) {
                sources.push(rel.clone());
            }
            let mut cache = HashMap::new();
            for src in sources {
                let Some(body) = text_of(&store, &docs, &root, &src) else { continue };
                let src_rope = Rope::from_str(&body);
                let Some(src_uri) = Uri::from_file_path(root.join(&src)) else { continue };
                for l in nav::links(&body) {
                    if !matches!(l.kind, NavKind::WikiLink | NavKind::InlineLink | NavKind::RefDef) {
                        continue;
                    }
                    let Some(h) = &l.heading else { continue };
                    if !links_to(&store, &src, &l, &rel, Some(&section), &mut cache) {
                        continue;
                    }
                    let new_text = if l.kind == NavKind::WikiLink { new_name.clone() } else { new_slug.clone() };
                    changes
                        .entry(src_uri.clone())
                        .or_default()
                        .push(TextEdit { range: position::range(&src_rope, h.range.clone(), enc), new_text });
                }
            }
            Ok(Some(WorkspaceEdit { changes: Some(changes), ..Default::default() }))
        })
        .await
    }

    /// Renames a tag and the tags nested under it (`#a` → `#b` makes `#a/x` `#b/x`) in every note.
    async fn rename_tag(&self, state: &Arc<State>, old: String, new_name: String) -> Result<Option<WorkspaceEdit>> {
        let new = new_name.trim().trim_start_matches('#').to_owned();
        let probe = format!("#{new}");
        let valid = nav::links(&probe).iter().any(|l| l.kind == NavKind::Tag && l.label.as_ref().is_some_and(|x| x.text == new));
        if !valid {
            return Err(invalid(format!("`{new}` is not a valid tag (letters, digits, `_`, `-`, `/`; not only digits)")));
        }
        let enc = self.enc();
        let (docs, root, readers) = (self.docs.clone(), state.root.clone(), state.readers.clone());
        blocking(move || {
            let store = readers.get()?;
            let folded = old.to_lowercase();
            let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
            for path in store.notes_tagged_under(&old).map_err(|e| e.to_string())? {
                let Some(body) = text_of(&store, &docs, &root, &path) else { continue };
                let rope = Rope::from_str(&body);
                let Some(uri) = Uri::from_file_path(root.join(&path)) else { continue };
                for l in nav::links(&body) {
                    let Some(label) = l.label.as_ref().filter(|_| tag_name(&l).is_some()) else { continue };
                    let lower = label.text.to_lowercase();
                    let rest = if lower == folded {
                        ""
                    } else if lower.starts_with(&format!("{folded}/")) {
                        &label.text[old.len()..]
                    } else {
                        continue;
                    };
                    changes
                        .entry(uri.clone())
                        .or_default()
                        .push(TextEdit { range: position::range(&rope, label.range.clone(), enc), new_text: format!("{new}{rest}") });
                }
            }
            Ok((!changes.is_empty()).then(|| WorkspaceEdit { changes: Some(changes), ..Default::default() }))
        })
        .await
    }

    /// `workspace/willRenameFiles`: every link to a renamed note follows it, in one edit.
    pub(super) async fn on_will_rename_files(&self, params: RenameFilesParams) -> Result<Option<WorkspaceEdit>> {
        let first = params.files.first().and_then(|f| Uri::from_str(&f.old_uri).ok());
        let state = self.settled(first.as_ref()).await?;
        let enc = self.enc();
        let (docs, root, readers) = (self.docs.clone(), state.root.clone(), state.readers.clone());
        let renames: Vec<(String, String)> = params
            .files
            .iter()
            .filter_map(|f| {
                let from = Uri::from_str(&f.old_uri).ok()?.to_file_path()?.into_owned();
                let to = Uri::from_str(&f.new_uri).ok()?.to_file_path()?.into_owned();
                Some((lode_store::vault::relative_path(&root, &from)?, lode_store::vault::relative_path(&root, &to)?))
            })
            .filter(|(f, t)| lode_store::vault::is_markdown(Path::new(f)) && lode_store::vault::is_markdown(Path::new(t)))
            .collect();
        if renames.is_empty() {
            return Ok(None);
        }
        blocking(move || {
            let store = readers.get()?;
            let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
            for (from, to) in &renames {
                let mut cache = HashMap::new();
                for (src, _) in store.linking_notes(from).map_err(|e| e.to_string())? {
                    let Some(body) = text_of(&store, &docs, &root, &src) else { continue };
                    let src_rope = Rope::from_str(&body);
                    let Some(src_uri) = Uri::from_file_path(root.join(&src)) else { continue };
                    // A link written from a note that moves too is relative to its new folder.
                    let src_after = renames.iter().find(|(f, _)| *f == src).map_or(src.clone(), |(_, t)| t.clone());
                    for l in nav::links(&body) {
                        if !matches!(l.kind, NavKind::WikiLink | NavKind::InlineLink | NavKind::RefDef)
                            || !links_to(&store, &src, &l, from, None, &mut cache)
                        {
                            continue;
                        }
                        let Some(note) = &l.note else { continue };
                        let new_text = if l.kind == NavKind::WikiLink {
                            let old_stem = stem(from);
                            let new_stem = stem(to);
                            // Keep the link's own style: a bare name stays a bare name.
                            if note.text.contains('/') {
                                to.trim_end_matches(".md").to_owned()
                            } else if note.text.eq_ignore_ascii_case(&old_stem) {
                                new_stem
                            } else {
                                note.text.clone()
                            }
                        } else {
                            let r = relative(&src_after, to);
                            if note.text.ends_with(".md") {
                                r
                            } else {
                                r.trim_end_matches(".md").to_owned()
                            }
                        };
                        if new_text != note.text {
                            changes
                                .entry(src_uri.clone())
                                .or_default()
                                .push(TextEdit { range: position::range(&src_rope, note.range.clone(), enc), new_text });
                        }
                    }
                }
            }
            Ok((!changes.is_empty()).then(|| WorkspaceEdit { changes: Some(changes), ..Default::default() }))
        })
        .await
    }
}

fn stem(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).trim_end_matches(".md").trim_end_matches(".markdown").to_owned()
}

/// `to` relative to the folder of `from` (both vault-relative), with `../` as needed.
pub(super) fn relative(from: &str, to: &str) -> String {
    let from_dir: Vec<&str> = from.split('/').collect::<Vec<_>>().split_last().map_or(Vec::new(), |(_, d)| d.to_vec());
    let to_parts: Vec<&str> = to.split('/').collect();
    let common = from_dir.iter().zip(&to_parts).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_owned(); from_dir.len() - common];
    parts.extend(to_parts[common..].iter().map(|p| p.replace(' ', "%20")));
    parts.join("/")
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_anchors_are_not_headings() {
        assert_eq!(super::line_anchor("L5"), Some(5));
        assert_eq!(super::line_anchor("L5-L9"), Some(5));
        assert_eq!(super::line_anchor("Lead"), None);
        assert_eq!(super::line_anchor("L0"), None);
        assert_eq!(super::line_start("a\nbb\nc", 3), 5..5);
        assert_eq!(super::line_start("a", 9), 1..1);
    }

    #[test]
    fn relative_paths_between_notes() {
        assert_eq!(super::relative("a/b/x.md", "a/c/y.md"), "../c/y.md");
        assert_eq!(super::relative("x.md", "a/y.md"), "a/y.md");
        assert_eq!(super::relative("a/x.md", "y.md"), "../y.md");
        assert_eq!(super::relative("a/x.md", "a/my note.md"), "my%20note.md");
    }
}
