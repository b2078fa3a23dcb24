//! Externals in open notes: diagnostics on web links (never mirrored, stale, last fetch
//! failed), hover with the snapshot's age and first lines, and the `lode.mirror` command behind
//! the "Mirror this link" and "Refresh snapshot" actions.

use super::*;
use lode_externals::{describe_age, Freshness, Recorded};
use lode_store::externals::is_web_url;
use lode_store::{now_ms, ExternalInfo, Via};

/// The command that fetches a page and stores a snapshot: arguments `[{"url": …}]`.
pub(super) const MIRROR: &str = "lode.mirror";

/// The web URL an external link points to (without `#fragment`), if it is one lode mirrors and
/// not a citation (whose title starts with `lode `: drift diagnostics cover those).
fn web_url(link: &lode_core::nav::NavLink) -> Option<String> {
    if link.dest != lode_core::nav::Dest::External || link.title.as_deref().is_some_and(|t| t.starts_with("lode ")) {
        return None;
    }
    let raw = &link.note.as_ref()?.text;
    let url = raw.split('#').next().unwrap_or(raw).trim().trim_matches(['<', '>']);
    is_web_url(url).then(|| url.to_owned())
}

/// Diagnostics on the web links of a note: a hint when never mirrored, a warning when the
/// snapshot is stale or the last fetch failed; nothing for a fresh snapshot.
pub(super) fn external_diagnostics(
    store: &Store,
    rope: &Rope,
    text: &str,
    links: &[lode_core::nav::NavLink],
    enc: Encoding,
    freshness: &Freshness,
) -> Vec<Diagnostic> {
    let now = now_ms();
    let mut known: HashMap<String, Option<ExternalInfo>> = HashMap::new();
    let mut out = Vec::new();
    for link in links {
        let Some(url) = web_url(link) else { continue };
        let info = known.entry(url.clone()).or_insert_with(|| store.external_brief(&url).ok());
        let Some(info) = info else { continue };
        let (severity, code, message) = match freshness.state(info, now) {
            lode_externals::State::Fresh { .. } => continue,
            lode_externals::State::Missing => (
                DiagnosticSeverity::HINT,
                "lode.snapshot-missing",
                "not mirrored: lode has no snapshot of this page to search or cite".to_owned(),
            ),
            lode_externals::State::Stale { age_days } => (
                DiagnosticSeverity::WARNING,
                "lode.snapshot-stale",
                format!("stale snapshot: last fetched {} ago (stale after {} days)", describe_age(age_days), freshness.stale_days),
            ),
            lode_externals::State::Failed { error, has_snapshot, .. } => (
                DiagnosticSeverity::WARNING,
                "lode.snapshot-failed",
                format!("the last fetch failed: {error}{}", if has_snapshot { " (answers use the earlier snapshot)" } else { "" }),
            ),
        };
        out.push(Diagnostic {
            range: position::range(rope, link.range.clone(), enc),
            severity: Some(severity),
            code: Some(NumberOrString::String(code.into())),
            source: Some("lode".into()),
            message,
            data: Some(json!({"url": url})),
            ..Default::default()
        });
    }
    out.extend(annotation_diagnostics(store, rope, text, enc));
    out
}

/// For an annotation (frontmatter `annotates: <url>`): each block quote no longer found in the
/// current snapshot of that page is orphaned (warning); a page never mirrored is said once.
fn annotation_diagnostics(store: &Store, rope: &Rope, text: &str, enc: Encoding) -> Vec<Diagnostic> {
    let Some(url) = lode_externals::annotations::annotated_url(&lode_answer::frontmatter_of(text)) else { return Vec::new() };
    let Ok(info) = store.external_brief(&url) else { return Vec::new() };
    let Some(id) = info.snapshot_id else {
        return vec![Diagnostic {
            range: position::range(rope, 0..text.find('\n').unwrap_or(text.len()), enc),
            severity: Some(DiagnosticSeverity::HINT),
            code: Some(NumberOrString::String("lode.snapshot-missing".into())),
            source: Some("lode".into()),
            message: format!("this note annotates {url}, which is not mirrored: its quotes cannot be anchored"),
            data: Some(json!({"url": url})),
            ..Default::default()
        }];
    };
    let body = store.version_body(&id).ok().flatten().unwrap_or_default();
    let snapshot = String::from_utf8_lossy(&body);
    lode_externals::annotations::check(text.as_bytes(), &snapshot)
        .into_iter()
        .filter(|(_, a)| *a == lode_externals::annotations::Anchor::Orphaned)
        .map(|(q, _)| Diagnostic {
            range: position::range(rope, q.range.clone(), enc),
            severity: Some(DiagnosticSeverity::WARNING),
            code: Some(NumberOrString::String("lode.annotation-orphaned".into())),
            source: Some("lode".into()),
            message: format!("orphaned: the current snapshot of {url} (`{}`) no longer contains this quote", &id[..12]),
            data: Some(json!({"url": url})),
            ..Default::default()
        })
        .collect()
}

/// Hover text for a web link: the snapshot's age and first lines, or why there is none.
pub(super) fn external_hover(
    store: &Store,
    link: &lode_core::nav::NavLink,
    freshness: &Freshness,
) -> std::result::Result<Option<String>, String> {
    let Some(url) = web_url(link) else { return Ok(None) };
    let info = store.external(&url).map_err(|e| e.to_string())?;
    let now = now_ms();
    let state = match freshness.state(&info, now) {
        lode_externals::State::Missing => {
            return Ok(Some(format!(
                "`{url}`\n\n**Not mirrored**: lode has no snapshot of this page. Use “Mirror this link” to fetch one."
            )))
        }
        lode_externals::State::Fresh { age_days } => format!("snapshot fetched {} ago", describe_age(age_days)),
        lode_externals::State::Stale { age_days } => format!("**stale** snapshot, fetched {} ago", describe_age(age_days)),
        lode_externals::State::Failed { error, .. } => format!("**last fetch failed**: {error}"),
    };
    let mut md = format!("`{url}` — {state}");
    if let Some(id) = &info.snapshot_id {
        let body = store.version_body(id).map_err(|e| e.to_string())?.unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).take(8).collect();
        md.push_str(&format!(
            "\n\nsnapshot `{}` · {} {} · {} kept\n\n---\n\n{}",
            &id[..12],
            info.status.map(|s| s.to_string()).unwrap_or_default(),
            info.content_type.clone().unwrap_or_default(),
            info.snapshots,
            lines.join("\n\n")
        ));
    }
    Ok(Some(md))
}

/// The kind of "Refresh snapshot" offered without a diagnostic (with one it is a quick fix).
pub(super) const MIRROR_KIND: &str = "refactor.rewrite.lode.mirror";

/// The mirror action for a web link diagnostic, or for a web link under the cursor.
pub(super) fn mirror_action(url: &str, never: bool, diagnostic: Option<&Diagnostic>) -> CodeActionOrCommand {
    let title = if never { "Mirror this link" } else { "Refresh snapshot" };
    CodeActionOrCommand::CodeAction(CodeAction {
        title: title.into(),
        kind: Some(if diagnostic.is_some() { CodeActionKind::QUICKFIX } else { CodeActionKind::new(MIRROR_KIND) }),
        diagnostics: diagnostic.map(|d| vec![d.clone()]),
        command: Some(Command { title: title.into(), command: MIRROR.into(), arguments: Some(vec![json!({"url": url})]) }),
        ..Default::default()
    })
}

/// The web link under `offset` in `text`, if any.
pub(super) fn web_link_at(text: &str, offset: usize) -> Option<String> {
    match lode_core::nav::at(text, offset)? {
        lode_core::nav::NavItem::Link { link, .. } => web_url(&link),
        _ => None,
    }
}

impl Backend {
    /// `lode.mirror`: fetches the page (off the loop, within the fetch limits), stores what it
    /// got through the writer, and republishes the diagnostics of open notes.
    pub(super) async fn mirror(&self, args: Vec<Value>) -> Result<Option<LSPAny>> {
        #[derive(Deserialize)]
        struct Args {
            url: String,
            #[serde(default)]
            uri: Option<Uri>,
        }
        let arg = args.into_iter().next().ok_or_else(|| invalid("lode.mirror needs {url}"))?;
        let a: Args = serde_json::from_value(arg).map_err(|e| invalid(format!("lode.mirror arguments: {e}")))?;
        let url = a.url.trim().to_owned();
        lode_externals::fetch::check_url(&url).map_err(invalid)?;
        let state = match &a.uri {
            Some(u) => self.state_for(u).await?,
            None => self.state().await?,
        };
        let opts = state.settings.externals.fetch.clone();
        let target = url.clone();
        let fetched = match tokio::task::spawn_blocking(move || lode_externals::fetch(&target, &opts)).await {
            Ok(r) => r,
            Err(e) => Err(lode_externals::FetchError::Network(format!("the fetch panicked: {e}"))),
        };
        let (_, rx) = state.writer.submit(Job::Snapshot { url: url.clone(), via: Via::Link, fetched });
        let done = rx.await.map_err(|_| internal("the writer stopped"))?;
        self.refresh_open_diagnostics().await;
        match done {
            Done::Recorded(Recorded::Saved(s)) => {
                state.kick();
                Ok(Some(json!({"url": url, "ok": true, "snapshot_id": s.snapshot_id, "changed": s.changed, "passages": s.passages})))
            }
            Done::Recorded(Recorded::Failed(e)) => {
                self.client.show_message(MessageType::WARNING, format!("lode: could not mirror {url}: {e}")).await;
                Ok(Some(json!({"url": url, "ok": false, "error": e.to_string(), "status": e.status()})))
            }
            Done::Failed(e) => Err(internal(format!("storing the snapshot of {url} failed: {e}"))),
            other => Err(internal(format!("unexpected writer result {other:?}"))),
        }
    }
}
