//! `lode/ask`, the "Ask lode" code actions and the `lode.ask` command that inserts a verified
//! answer under the question.

use super::*;

/// `lode/ask`'s parameters (docs/lsp-extensions.md).
#[derive(Deserialize)]
pub(super) struct AskParams {
    question: String,
    pinned: Option<Uri>,
    limit: Option<usize>,
}

/// `lode/ask`'s result (docs/lsp-extensions.md): the engine's answer, each citation with its
/// note's URI and its range in the cited version as the client counts positions, and whether
/// the index was still being built.
#[derive(serde::Serialize)]
struct AskResult {
    question: String,
    synthesizer: String,
    claims: Vec<WireClaim>,
    dropped: Vec<lode_answer::DroppedClaim>,
    abstained: bool,
    abstain_reason: Option<String>,
    related: Vec<lode_answer::Related>,
    withheld: Vec<lode_answer::Withheld>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notice: Option<String>,
    index_partial: bool,
}

#[derive(serde::Serialize)]
struct WireClaim {
    rung: lode_answer::Rung,
    text: String,
    citations: Vec<WireCitation>,
    verification: Option<lode_core::gate::Verification>,
    label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    unverified_text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
}

#[derive(serde::Serialize)]
struct WireCitation {
    #[serde(flatten)]
    citation: lode_answer::Citation,
    uri: Option<String>,
    range: Range,
}

/// The "Ask lode" actions' kind: a standard kind (clients group and filter by it), specific
/// below it so `only: ["refactor.rewrite.lode.ask"]` picks them alone.
pub(super) const ASK_KIND: &str = "refactor.rewrite.lode.ask";

/// Whether `kind` is asked for by `only`: equal to one of them, or below one in the
/// dot-separated hierarchy (LSP 3.17 `CodeActionContext.only`).
pub(super) fn wanted_kind(only: &[CodeActionKind], kind: &CodeActionKind) -> bool {
    let k = kind.as_str();
    only.iter().any(|o| {
        let o = o.as_str();
        o.is_empty() || k == o || k.strip_prefix(o).is_some_and(|rest| rest.starts_with('.'))
    })
}

pub(super) fn is_question_line(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && t.ends_with('?')
}

impl Backend {
    pub(super) async fn lode_ask(&self, params: Value) -> Result<Value> {
        // Parsed before the ticket is read (synchronous): a pinned note picks its vault.
        let p: std::result::Result<AskParams, _> = serde_json::from_value(params);
        let pinned_uri = p.as_ref().ok().and_then(|p| p.pinned.clone());
        let (state, all_saved) = self.settled_noting(pinned_uri.as_ref()).await?;
        let p = p.map_err(|e| invalid(format!("lode/ask params: {e}")))?;
        crate::isolation::fault("ask-async");
        if p.question.trim().is_empty() {
            return Err(invalid("lode/ask: the question is empty"));
        }
        if p.question.len() > 4096 {
            return Err(invalid(format!("lode/ask: the question is {} bytes; at most 4096", p.question.len())));
        }
        let pinned = match &p.pinned {
            Some(u) => Some(Self::rel(&state, u).ok_or_else(|| invalid(format!("{} is not a note in this vault", u.as_str())))?),
            None => None,
        };
        let answer = self.answer(&state, p.question, None, pinned, p.limit).await?;
        let enc = self.enc();
        let partial = state.scanning();
        let (readers, root) = (state.readers.clone(), state.root.clone());
        // Saves this answer could not see: still being written, or held by the writer because
        // the store would not take them (a lock, a full disk).
        let unsaved = state.unsaved_notice(all_saved);
        blocking(move || {
            let store = readers.get()?;
            let mut bodies: HashMap<String, Rope> = HashMap::new();
            // Every citation also gets its note's URI and an LSP range in the cited version.
            let mut cite = |c: lode_answer::Citation| -> std::result::Result<WireCitation, String> {
                if !bodies.contains_key(&c.version_id) {
                    let body = store.version_body(&c.version_id).map_err(|e| e.to_string())?.unwrap_or_default();
                    bodies.insert(c.version_id.clone(), Rope::from_str(&String::from_utf8_lossy(&body)));
                }
                let range = position::range(&bodies[&c.version_id], c.start..c.end, enc);
                let uri = Uri::from_file_path(root.join(&c.path)).map(|u| u.as_str().to_owned());
                Ok(WireCitation { citation: c, uri, range })
            };
            let mut claims = Vec::with_capacity(answer.claims.len());
            for c in answer.claims {
                claims.push(WireClaim {
                    rung: c.rung,
                    text: c.text,
                    citations: c.citations.into_iter().map(&mut cite).collect::<std::result::Result<_, _>>()?,
                    verification: c.verification,
                    label: c.label,
                    unverified_text: c.unverified_text,
                    reason: c.reason,
                    why: c.why,
                });
            }
            let notice = answer.notice.into_iter().chain(unsaved).collect::<Vec<_>>().join(" ");
            let wire = AskResult {
                question: answer.question,
                synthesizer: answer.synthesizer,
                claims,
                dropped: answer.dropped,
                abstained: answer.abstained,
                abstain_reason: answer.abstain_reason,
                related: answer.related,
                withheld: answer.withheld,
                notice: (!notice.is_empty()).then_some(notice),
                index_partial: partial,
            };
            serde_json::to_value(wire).map_err(|e| e.to_string())
        })
        .await
    }

    pub(super) async fn answer(
        &self,
        state: &Arc<State>,
        question: String,
        origin: Option<String>,
        pinned: Option<String>,
        limit: Option<usize>,
    ) -> Result<lode_answer::Answer> {
        // `$/cancelRequest` (or a client that goes away) drops this future; the guard then
        // tells the blocking work to stop, and the LLM wait is abandoned at once.
        // Held by the blocking work itself: a cancelled ask counts until its work has stopped.
        let Ok(permit) = self.asks.clone().try_acquire_owned() else {
            return Err(Error {
                code: ErrorCode::ServerError(-32803), // LSP's RequestFailed
                message: format!("lode is answering {MAX_ASKS} questions already; ask again when one is done").into(),
                data: None,
            });
        };
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _guard = lode_engine::CancelOnDrop(cancel.clone());
        let st = state.clone();
        // What the editor holds now decides egress for its notes, saved or not.
        let buffers = self.open_buffers(state);
        blocking(move || {
            let _permit = permit;
            let req = lode_engine::queries::AskRequest { question, origin, pinned, limit, buffers, cancel, ..Default::default() };
            st.ask(req)
        })
        .await
    }

    /// How egress knows a buffer: its note's vault-relative path; a file under the vault that
    /// is no note (ignored, hidden) by its path under the vault all the same, so path rules
    /// hold for it; anything else by its URI.
    pub(super) fn buffer_key(state: &State, uri: &Uri) -> String {
        Self::rel(state, uri)
            .or_else(|| {
                let path = uri.to_file_path()?;
                let rel = path.strip_prefix(&state.root).ok()?;
                Some(rel.to_string_lossy().replace('\\', "/"))
            })
            .unwrap_or_else(|| uri.as_str().to_owned())
    }

    /// The open buffers, by [`Backend::buffer_key`].
    fn open_buffers(&self, state: &State) -> HashMap<String, String> {
        let docs = self.docs.lock();
        docs.iter()
            .map(|(uri, doc)| {
                let key = uri.parse::<Uri>().map(|u| Self::buffer_key(state, &u)).unwrap_or_else(|_| uri.clone());
                (key, doc.rope.to_string())
            })
            .collect()
    }

    pub(super) async fn ask_and_insert(&self, uri: Uri, range: Range, pinned: bool) -> Result<Option<LSPAny>> {
        let state = self.state_for(&uri).await?;
        let (rope, _) = self.doc_text(&uri).ok_or_else(|| invalid(format!("{} is not open", uri.as_str())))?;
        let enc = self.enc();
        let bytes = position::byte_range(&rope, range, enc);
        let mut question = rope.byte_slice(bytes.clone()).to_string();
        if question.trim().is_empty() {
            let line = rope.byte_to_line(bytes.start);
            question = rope.line(line).to_string();
        }
        // The whole line the question ends on, to find it again when the answer arrives.
        let question_text = rope.line(rope.byte_to_line(bytes.end.saturating_sub(1).max(bytes.start).min(rope.len_bytes()))).to_string();
        let question = lode_core::extractive::plain(question.trim()).trim_start_matches('#').trim().to_owned();
        if question.is_empty() {
            return Err(invalid("no question on that line"));
        }
        let note = Self::rel(&state, &uri);
        let rel = note.clone().unwrap_or_else(|| "untitled.md".into());
        let pinned_path = if pinned { Some(rel.clone()) } else { None };
        // The question is text of this buffer: egress rules for it apply to the question (a
        // buffer outside the vault is known by its URI among the open buffers).
        let origin = Self::buffer_key(&state, &uri);
        drop(note);
        let answer = self.answer(&state, question, Some(origin), pinned_path, None).await?;
        let md = lode_answer::render::markdown(&answer, &rel);
        // Insert after the question's line *as the buffer is now*: the user may have typed while
        // the answer was made, so the question is found again (nearest line with its text).
        // The text and its version in one look: the edit names the version it was made for.
        let (rope, buffer, version, _, _) = self.doc_with_links(&uri).ok_or_else(|| invalid(format!("{} was closed", uri.as_str())))?;
        let version = Some(version);
        let asked_line = rope.byte_to_line(bytes.end.saturating_sub(1).max(bytes.start).min(rope.len_bytes()));
        let question_line = question_text.trim();
        let end_line = (0..rope.len_lines())
            .filter(|&l| rope.line(l).to_string().trim() == question_line)
            .min_by_key(|&l| l.abs_diff(asked_line))
            .unwrap_or_else(|| asked_line.min(rope.len_lines().saturating_sub(1)));
        let insert_at = Position { line: end_line as u32 + 1, character: 0 };
        let needs_newline = end_line + 1 >= rope.len_lines() && !buffer.ends_with('\n');
        let text = format!("{}\n{md}\n", if needs_newline { "\n" } else { "" });
        // In the buffer's own line breaks: a CRLF note stays CRLF.
        let text = if rope.line(end_line).to_string().ends_with("\r\n") || (needs_newline && buffer.contains("\r\n")) {
            text.replace("\r\n", "\n").replace('\n', "\r\n")
        } else {
            text
        };
        let edit_one = TextEdit { range: Range { start: insert_at, end: insert_at }, new_text: text };
        let edit = if self.document_changes.load(Ordering::SeqCst) {
            WorkspaceEdit {
                document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
                    text_document: OptionalVersionedTextDocumentIdentifier { uri, version },
                    edits: vec![OneOf::Left(edit_one)],
                }])),
                ..Default::default()
            }
        } else {
            WorkspaceEdit { changes: Some(HashMap::from([(uri, vec![edit_one])])), ..Default::default() }
        };
        let applied = self.client.apply_edit(edit).await.map_err(internal)?;
        Ok(Some(json!({"applied": applied.applied, "answer": answer})))
    }

    pub(super) async fn on_code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri;
        let Some((rope, _)) = self.doc_text(&uri) else { return Ok(None) };
        let enc = self.enc();
        let r = position::byte_range(&rope, params.range, enc);
        let selected = rope.byte_slice(r.clone()).to_string();
        let line = rope.line(rope.byte_to_line(r.start)).to_string();
        let mut actions = Vec::new();
        if !selected.trim().is_empty() || is_question_line(&line) {
            for (title, pinned) in [("Ask lode", false), ("Ask lode about this note", true)] {
                actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                    title: title.into(),
                    kind: Some(CodeActionKind::new(ASK_KIND)),
                    command: Some(Command {
                        title: title.into(),
                        command: "lode.ask".into(),
                        arguments: Some(vec![json!({"uri": uri.as_str(), "range": params.range, "pinned": pinned})]),
                    }),
                    ..Default::default()
                }));
            }
        }
        let rel = self.state_for(&uri).await.ok().and_then(|st| Self::rel(&st, &uri));
        let mut mirrored = false;
        for d in params.context.diagnostics.iter().filter(|d| d.source.as_deref() == Some("lode")) {
            if let (Some(NumberOrString::String(code)), Some(url)) = (&d.code, d.data.as_ref().and_then(|x| x["url"].as_str())) {
                if matches!(code.as_str(), "lode.snapshot-missing" | "lode.snapshot-stale" | "lode.snapshot-failed") {
                    actions.push(super::externals::mirror_action(url, code == "lode.snapshot-missing", Some(d)));
                    mirrored = true;
                }
            }
            if let (Some(NumberOrString::String(code)), Some(data), Some(from)) = (&d.code, &d.data, &rel) {
                if code == "lode.older-version" {
                    let (Some(head), Some(path), Some(start), Some(end), Some(line)) =
                        (data["head"].as_str(), data["path"].as_str(), data["start"].as_u64(), data["end"].as_u64(), data["line"].as_u64())
                    else {
                        continue;
                    };
                    let cite_as = data["cite_as"].as_str().unwrap_or(head);
                    let link = lode_core::citation::render(from, path, line as usize, cite_as, start as usize..end as usize);
                    actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                        title: "Re-pin the citation to the note's current version".into(),
                        kind: Some(CodeActionKind::QUICKFIX),
                        diagnostics: Some(vec![d.clone()]),
                        edit: Some(WorkspaceEdit {
                            changes: Some(HashMap::from([(uri.clone(), vec![TextEdit { range: d.range, new_text: link }])])),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }));
                }
            }
            if d.code == Some(NumberOrString::String("lode.broken-link".into())) {
                let state = self.state_for(&uri).await?;
                let create = d.data.as_ref().and_then(|x| x["create"].as_str()).map(str::to_owned);
                let title = d.data.as_ref().and_then(|x| x["title"].as_str()).unwrap_or("").to_owned();
                // Only inside the vault, and only where a note may be (never `.lode/`, never `..`).
                if let Some(new_uri) = create
                    .filter(|c| lode_store::vault::indexable(&state.root, &state.root.join(c)).is_ok())
                    .and_then(|c| Uri::from_file_path(state.root.join(c)))
                {
                    let ops = vec![
                        DocumentChangeOperation::Op(ResourceOp::Create(CreateFile {
                            uri: new_uri.clone(),
                            options: Some(CreateFileOptions { overwrite: Some(false), ignore_if_exists: Some(true) }),
                            annotation_id: None,
                        })),
                        DocumentChangeOperation::Edit(TextDocumentEdit {
                            text_document: OptionalVersionedTextDocumentIdentifier { uri: new_uri, version: None },
                            edits: vec![OneOf::Left(TextEdit { range: Range::default(), new_text: format!("# {title}\n\n") })],
                        }),
                    ];
                    actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                        title: format!("Create note “{title}”"),
                        kind: Some(CodeActionKind::QUICKFIX),
                        diagnostics: Some(vec![d.clone()]),
                        edit: Some(WorkspaceEdit { document_changes: Some(DocumentChanges::Operations(ops)), ..Default::default() }),
                        ..Default::default()
                    }));
                }
            }
            if d.code == Some(NumberOrString::String("lode.drifted".into())) {
                actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                    title: "Re-ask lode (the quoted text drifted)".into(),
                    kind: Some(CodeActionKind::QUICKFIX),
                    diagnostics: Some(vec![d.clone()]),
                    command: Some(Command {
                        title: "Re-ask lode".into(),
                        command: "lode.ask".into(),
                        arguments: Some(vec![json!({"uri": uri.as_str(), "range": d.range, "pinned": false})]),
                    }),
                    ..Default::default()
                }));
            }
        }
        // A web link under the cursor with a fresh snapshot (no diagnostic): refreshing it is
        // still one action away.
        // Not in a note that may not leave the machine: fetching sends the link out.
        let text = rope.to_string();
        let marks = lode_answer::egress::marks::read(&text);
        let withheld = match self.state_for(&uri).await {
            Ok(st) => {
                let key = Self::buffer_key(&st, &uri);
                blocking(move || Ok(st.buffer_withheld(&key, &marks))).await.unwrap_or(true)
            }
            Err(_) => marks.local.is_some(),
        };
        if !mirrored && !withheld {
            if let Some(url) = super::nav::off_loop(&text, move |t| super::externals::web_link_at(t, r.start)).await? {
                actions.push(super::externals::mirror_action(&url, false, None));
            }
        }
        // `only` (e.g. VS Code asking for `quickfix` on a diagnostic): a kind is wanted when it
        // is one of those or below one (`refactor` covers `refactor.rewrite.lode.ask`).
        if let Some(only) = &params.context.only {
            actions.retain(|a| match a {
                CodeActionOrCommand::CodeAction(CodeAction { kind: Some(k), .. }) => wanted_kind(only, k),
                _ => true,
            });
        }
        Ok((!actions.is_empty()).then_some(actions))
    }

    pub(super) async fn on_execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LSPAny>> {
        if params.command == super::externals::MIRROR {
            return self.mirror(params.arguments).await;
        }
        if params.command != "lode.ask" {
            return Err(invalid(format!("unknown command {}", params.command)));
        }
        #[derive(Deserialize)]
        struct Args {
            uri: Uri,
            range: Range,
            #[serde(default)]
            pinned: bool,
        }
        let arg = params.arguments.into_iter().next().ok_or_else(|| invalid("lode.ask needs {uri, range, pinned?}"))?;
        let a: Args = serde_json::from_value(arg).map_err(|e| invalid(format!("lode.ask arguments: {e}")))?;
        self.settled(Some(&a.uri)).await?;
        self.ask_and_insert(a.uri, a.range, a.pinned).await
    }
}
