//! Citations in open notes: hover (the quoted span and its status), goto (the cited text, in
//! the head or the cited version), drift diagnostics.

use super::*;
use lode_engine::citations::{citation_state, current_head, full_id, learn_tier_head, materialize, Bodies, CitationState};

impl Backend {
    /// Waits for earlier saves (the ticket is read before the first await: see writer.rs), then
    /// finds the citation link under the cursor of an open document.
    pub(super) async fn citation_under(
        &self,
        at: &TextDocumentPositionParams,
    ) -> Result<Option<(Arc<State>, Rope, lode_core::citation::CitationLink)>> {
        let state = self.settled(Some(&at.text_document.uri)).await?;
        let Some((rope, text)) = self.doc_text(&at.text_document.uri) else { return Ok(None) };
        let offset = position::offset(&rope, at.position, self.enc());
        Ok(lode_core::citation::at(&text, offset).map(|c| (state, rope, c)))
    }

    /// Diagnostics for the citations in an open document: a quote no longer in its note's head
    /// has drifted (warning); one still there but pinned to an older version is noted (hint).
    pub(super) async fn publish_citation_diagnostics(&self, uri: Uri) {
        let Ok(state) = self.state_for(&uri).await else { return };
        let Some((rope, text, version, generation, parsed)) = self.doc_with_links(&uri) else { return };
        let enc = self.enc();
        let readers = state.readers.clone();
        let (rel, root, docs) = (Self::rel(&state, &uri), state.root.clone(), self.docs.clone());
        let freshness = state.settings.externals.freshness;
        let key = uri.as_str().to_owned();
        let st = state.clone();
        let egress_key = Backend::buffer_key(&state, &uri);
        let shared_uri = state.settings.ask.shared.as_ref().map(|t| t.config().uri.clone());
        let diags = blocking(move || {
            let store = readers.get()?;
            // The note's own egress marks: near-miss spellings are warned about on their line.
            let marks = lode_answer::egress::marks::read(&text);
            let withheld = st.buffer_withheld(&egress_key, &marks);
            // One parse of the note's links per version, for both kinds of link diagnostics.
            let links = match parsed {
                Some(l) => l,
                None => {
                    let l = Arc::new(lode_core::nav::links(&text));
                    if let Some(doc) = docs.lock().get_mut(&key).filter(|d| d.generation == generation) {
                        doc.links = Some(l.clone());
                    }
                    l
                }
            };
            let mut out = super::externals::external_diagnostics(&store, &rope, &text, &links, enc, &freshness);
            // A page linked from a note that may not leave the machine is not offered for
            // mirroring: fetching it would send the link (and any words in it) out.
            if withheld {
                out.retain(|d| !matches!(&d.code, Some(NumberOrString::String(c)) if c.starts_with("lode.snapshot-")));
            }
            out.extend(egress_diagnostics(&marks, &rope, enc));
            // Links that lead nowhere (only for notes of the vault: links are relative to them).
            if let Some(rel) = &rel {
                out.extend(Backend::nav_diagnostics(&store, &root, &docs, rel, &rope, &text, &links, enc));
            }
            // Citations of one span are judged once, and each version's text is read once: an
            // answer cites a few passages of a few notes, often more than once.
            let mut bodies = Bodies::default();
            let mut verdicts: HashMap<(String, std::ops::Range<usize>), Option<Diagnostic>> = HashMap::new();
            for c in lode_core::citation::find_all(&text) {
                let key = (c.version_id.clone(), c.span.clone());
                let verdict = match verdicts.get(&key) {
                    Some(v) => v.clone(),
                    None => {
                        let v = citation_diagnostic(citation_state(&store, &c, &mut bodies, shared_uri.as_deref())?);
                        verdicts.insert(key, v.clone());
                        v
                    }
                };
                if let Some(mut d) = verdict {
                    d.range = position::range(&rope, c.range.clone(), enc);
                    out.push(d);
                }
            }
            Ok(out)
        })
        .await
        .unwrap_or_default();
        // A save the store has not taken yet shows on its note whatever else could be read
        // (a locked database fails the reads above too).
        let mut diags = diags;
        if let Some(rel) = Self::rel(&state, &uri) {
            diags.extend(state.writer.unsaved().into_iter().rfind(|u| u.path == rel).map(|u| unsaved_diagnostic(&u)));
        }
        // Only for the text they were computed on: if the buffer changed meanwhile, the next
        // publication (after the change is saved) replaces them.
        if self.doc_version(&uri) == Some(version) {
            self.published.lock().insert(uri.as_str().to_owned(), (version, diags.clone()));
            self.client.publish_diagnostics(uri, diags, Some(version)).await;
        }
    }

    pub(super) async fn refresh_open_diagnostics(&self) {
        let uris: Vec<String> = self.docs.lock().keys().cloned().collect();
        for u in uris {
            if let Ok(uri) = u.parse::<Uri>() {
                self.publish_citation_diagnostics(uri).await;
            }
        }
    }

    pub(super) async fn on_hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let Some((state, rope, c)) = self.citation_under(&params.text_document_position_params).await? else {
            // Not a citation: a link, tag or footnote, perhaps.
            let state = self.state_for(&params.text_document_position_params.text_document.uri).await?;
            return self.nav_hover(state, &params.text_document_position_params).await;
        };
        let enc = self.enc();
        let range = position::range(&rope, c.range.clone(), enc);
        // The rung of the answer item this citation belongs to, from the label on its line.
        let line = rope.line(rope.byte_to_line(c.range.start.min(rope.len_bytes()))).to_string();
        let rung = if line.contains(lode_core::gate::EVIDENCE_ONLY_LABEL) {
            "evidence only: this quote is shown as evidence; the model's wording could not be verified".to_owned()
        } else if let Some(at) = line.find(lode_core::gate::EVIDENCE_ONLY_PREFIX) {
            // "evidence only — listed under “Myths”)*": the reason, up to the label's end.
            let why = line[at + lode_core::gate::EVIDENCE_ONLY_PREFIX.len()..].split(")*").next().unwrap_or("").replace('\\', "");
            format!("evidence only: this quote is real, but the note does not assert it as a fact ({})", why.trim())
        } else if let Some(at) = line.find("*(verified (entailed ").or_else(|| line.find("*(entailed (")) {
            // "*(verified (entailed 0.93))*", or "*(entailed (0.93))*" as lode wrote it before.
            let score: String =
                line[at..].chars().skip_while(|c| !c.is_ascii_digit()).take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            let step = lode_core::gate::Verification::Entailed { score: score.parse().unwrap_or(0.0) }.step();
            format!("labelled verified — {step} — when the answer was written; the label is the note's own text and is not checked again here, the quote below is")
        } else if line.contains("*(verified)*") || line.contains("quoted & coupled") {
            format!(
                "labelled verified — {} — when the answer was written; the label is the note's own text and is not checked again here, the quote below is",
                lode_core::gate::COUPLED_STEP
            )
        } else {
            String::new()
        };
        let readers = state.readers.clone();
        let shared = state.settings.ask.shared.clone();
        // The vault's own context words (`[gate]`), as the gate read the quote with them.
        let words = state.settings.ask.gate.words.clone();
        // Whether the hover learned what the team's tier holds now: the note's diagnostics are
        // then published again, so the citation shows its drift at once.
        let learned = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let learned_in = learned.clone();
        crate::isolation::fault("hover-async");
        let md = blocking(move || {
            let learned = learned_in;
            let store = readers.get()?;
            crate::isolation::fault("hover");
            let c = match full_id(&store, &c, shared.as_deref())? {
                Ok(c) => c,
                Err(why) => return Ok(format!("**lode citation** — {why}")),
            };
            let Some(body) = store.version_body(&c.version_id).map_err(|e| e.to_string())? else {
                return Ok(format!("**lode citation** — version `{}` is not in this vault's history", &c.version_id[..12]));
            };
            let quote = String::from_utf8_lossy(body.get(c.span.clone()).unwrap_or(&[])).into_owned();
            let info = store.version_info(&c.version_id).map_err(|e| e.to_string())?;
            // A version this vault never held is the team's (kept beside the store, checked
            // against its id): it is named by the address the citation gives it.
            let team = info.is_none();
            // When lode first saw these bytes (not when the file was written: no record of that).
            let (path, title, indexed) = match info {
                Some((path, title, at)) => (path, title, format!("first indexed {at}")),
                None => {
                    let at = c.target.split('#').next().unwrap_or_default().to_owned();
                    let title = at.rsplit('/').next().unwrap_or_default().trim_end_matches(".md").to_owned();
                    (at, title, "from the team's shared index".to_owned())
                }
            };
            if let (true, Some(tier)) = (team, shared.as_deref()) {
                learn_tier_head(&store, &c, tier);
                learned.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let shared_uri = shared.as_ref().map(|t| t.config().uri.clone());
            let head = current_head(&store, &c, shared_uri.as_deref())?;
            let what = if path.contains("://") && !team { "snapshot" } else { "note" };
            let status = match head {
                None if team => "a version of the team's shared index, checked against its id".to_owned(),
                Some((_, h)) if h == c.version_id => format!("the {what}'s current version"),
                Some((p, h)) => {
                    let hb = store.version_body(&h).map_err(|e| e.to_string())?.unwrap_or_default();
                    let ht = String::from_utf8_lossy(&hb);
                    match lode_core::gate::locate(&ht, &quote) {
                        Some((r, _)) => format!("still in the current version of {p}, line {}", lode_core::text::line_of(&hb, r.start)),
                        None => format!("**drifted**: no longer in the current version of {p}"),
                    }
                }
                None => format!("the {what} has been deleted"),
            };
            let quoted: String = quote.lines().map(|l| format!("> {l}\n")).collect();
            let rung = if rung.is_empty() { String::new() } else { format!("\n\n*{rung}*") };
            // What the gate saw around the quote: headings, lead-in, task, table, footnotes.
            let text = String::from_utf8_lossy(&body);
            let crumb = lode_core::gate::breadcrumb(&lode_core::structure::Structure::parse(&text), &c.span, &words);
            let crumb = if crumb.is_empty() { String::new() } else { format!("in: {}\n\n", crumb.replace('`', "'")) };
            Ok(format!("**{title}** — `{path}`\n\n{crumb}{quoted}\nversion `{}`, {indexed} · {status}{rung}", &c.version_id[..12]))
        })
        .await?;
        if learned.load(std::sync::atomic::Ordering::Relaxed) {
            self.publish_citation_diagnostics(params.text_document_position_params.text_document.uri.clone()).await;
        }
        Ok(Some(Hover { contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: md }), range: Some(range) }))
    }

    pub(super) async fn on_goto_definition(&self, params: GotoDefinitionParams) -> Result<Option<GotoDefinitionResponse>> {
        let Some((state, _, c)) = self.citation_under(&params.text_document_position_params).await? else {
            let state = self.state_for(&params.text_document_position_params.text_document.uri).await?;
            return self.nav_definition(state, &params.text_document_position_params).await;
        };
        let enc = self.enc();
        let readers = state.readers.clone();
        let root = state.root.clone();
        let docs = self.docs.clone();
        let shared = state.settings.ask.shared.clone();
        let loc = blocking(move || {
            let store = readers.get()?;
            let c = full_id(&store, &c, shared.as_deref())??;
            let Some(body) = store.version_body(&c.version_id).map_err(|e| e.to_string())? else {
                return Err(format!("version {} is not in this vault's history", &c.version_id[..12]));
            };
            let quote = String::from_utf8_lossy(body.get(c.span.clone()).unwrap_or(&[])).into_owned();
            if let Some(tier) = shared.as_deref() {
                if store.head_for_version(&c.version_id).map_err(|e| e.to_string())?.is_none() {
                    learn_tier_head(&store, &c, tier);
                }
            }
            let shared_uri = shared.as_ref().map(|t| t.config().uri.clone());
            // A snapshot's (or a shared note's) text has no file: the current one when the quote
            // is still in it, else the cited one, each materialized read-only.
            if let Some((path, head)) = current_head(&store, &c, shared_uri.as_deref())?.filter(|(p, _)| p.contains("://")) {
                let hb = store.version_body(&head).map_err(|e| e.to_string())?.unwrap_or_default();
                let ht = String::from_utf8_lossy(&hb).into_owned();
                if let Some((r, _)) = lode_core::gate::locate(&ht, &quote) {
                    let file = materialize(&head, &hb)?;
                    let _ = path;
                    return Ok(Location {
                        uri: Uri::from_file_path(&file).ok_or("bad path")?,
                        range: position::range(&Rope::from_str(&ht), r, enc),
                    });
                }
            }
            // In the current head, when the quote is still there (the open buffer if the note is open).
            if let Some((path, head)) =
                store.head_for_version(&c.version_id).map_err(|e| e.to_string())?.filter(|(p, _)| !p.contains("://"))
            {
                let abs = root.join(&path);
                let target = Uri::from_file_path(&abs).ok_or("bad path")?;
                let open = docs.lock().get(target.as_str()).map(|d| d.rope.clone());
                let (rope, text) = match open {
                    Some(r) => {
                        let t = r.to_string();
                        (r, t)
                    }
                    None => {
                        let hb = store.version_body(&head).map_err(|e| e.to_string())?.unwrap_or_default();
                        let t = String::from_utf8_lossy(&hb).into_owned();
                        (Rope::from_str(&t), t)
                    }
                };
                if let Some((r, _)) = lode_core::gate::locate(&text, &quote) {
                    return Ok(Location { uri: target, range: position::range(&rope, r, enc) });
                }
            }
            // Otherwise the cited version itself, materialized read-only.
            let file = materialize(&c.version_id, &body)?;
            let rope = Rope::from_str(&String::from_utf8_lossy(&body));
            Ok(Location { uri: Uri::from_file_path(&file).ok_or("bad path")?, range: position::range(&rope, c.span.clone(), enc) })
        })
        .await?;
        Ok(Some(GotoDefinitionResponse::Scalar(loc)))
    }
}

/// A citation's state as the engine judged it, as the diagnostic the editor shows (its range is
/// the caller's); `None` while the quote is in its note's current version.
fn citation_diagnostic(state: CitationState) -> Option<Diagnostic> {
    let d = |severity, code: &str, message: String, data: Option<Value>| Diagnostic {
        range: Range::default(),
        severity: Some(severity),
        code: Some(NumberOrString::String(code.into())),
        source: Some("lode".into()),
        message,
        data,
        ..Default::default()
    };
    match state {
        CitationState::Current => None,
        CitationState::SharedUnchecked { version_id } => Some(d(
            DiagnosticSeverity::INFORMATION,
            "lode.shared-unchecked",
            format!(
                "cited version {} of the team's shared index is not kept here yet, so not checked: hover it to fetch and check it",
                &version_id[..version_id.len().min(12)]
            ),
            None,
        )),
        CitationState::UnknownVersion(why) => Some(d(DiagnosticSeverity::WARNING, "lode.unknown-version", why, None)),
        CitationState::Drifted { path, version_id } => Some(d(
            DiagnosticSeverity::WARNING,
            "lode.drifted",
            format!("drifted: the quoted text is no longer in {path} (cited version {})", &version_id[..version_id.len().min(12)]),
            Some(json!({"version_id": version_id, "path": path})),
        )),
        CitationState::Moved { path, head, cite_as, range, line } => Some(d(
            DiagnosticSeverity::HINT,
            "lode.older-version",
            format!("{path} changed since; the quoted text is still there (bytes {}-{})", range.start, range.end),
            Some(json!({"head": head, "cite_as": cite_as, "start": range.start, "end": range.end, "path": path, "line": line})),
        )),
    }
}

/// A diagnostic on each near-miss egress spelling: a warning where lode keeps the note local on a
/// spelling it does not document (say it properly), information where it reads one as "send".
fn egress_diagnostics(marks: &lode_answer::egress::marks::Marks, rope: &Rope, enc: Encoding) -> Vec<Diagnostic> {
    marks
        .near_misses
        .iter()
        .map(|n| Diagnostic {
            range: position::range(rope, n.range.clone(), enc),
            severity: Some(if n.withholds { DiagnosticSeverity::WARNING } else { DiagnosticSeverity::INFORMATION }),
            code: Some(NumberOrString::String("lode.egress-spelling".into())),
            source: Some("lode".into()),
            message: n.message.clone(),
            ..Default::default()
        })
        .collect()
}

/// Code of the diagnostic on a note whose save the store has not taken yet.
pub(super) const UNSAVED: &str = "lode.save-not-indexed";

/// The diagnostic on a note whose last save is held by the writer (see `writer::Unsaved`).
fn unsaved_diagnostic(u: &lode_engine::writer::Unsaved) -> Diagnostic {
    Diagnostic {
        range: Range::default(),
        severity: Some(DiagnosticSeverity::WARNING),
        code: Some(NumberOrString::String(UNSAVED.into())),
        source: Some("lode".into()),
        message: format!(
            "lode has not indexed this save yet: {}. The saved text is kept and retried ({} tr{} so far); answers use the last indexed version until it lands.",
            u.error,
            u.attempts,
            if u.attempts == 1 { "y" } else { "ies" }
        ),
        ..Default::default()
    }
}
