// What the extension shows, as pure functions of lode's replies (no `vscode` import, so the unit tests run under plain Node).
import * as path from 'path';

/** `dense` of `lode/status` once the embedding model is loaded (docs/lsp-extensions.md). */
export interface DenseStatus {
  model: string;
  /** Passages covered by a vector, out of `passages`. */
  with_vectors: number | null;
  windows?: number;
  /** Present while answers do not use the vector table (it is being rebuilt, a dense search failed): why. */
  lexical_only?: string;
  /** The vector table could not be read and was moved aside; it is rebuilt. */
  mended?: string;
  /** `[models] embedder` names a model whose vectors are not complete yet; `model` answers until they are. */
  switching?: { to: string; with_vectors: number | null; windows?: number };
}

/** `lode/status` (docs/lsp-extensions.md). */
export interface Status {
  vault: string;
  vaults?: string[];
  notes: number;
  passages: number;
  /** True from the moment the vault is open until its first scan ends (and during a rescan). */
  scanning: boolean;
  /** The model and its vectors, or why not: `loading the embedding model`, `off: <reason> (fix: …)`, `off (no embedder configured)`. */
  dense: DenseStatus | string;
  /** Saves the store has not taken yet (kept and retried by the server). */
  unsaved?: { path: string; error: string; attempts: number }[];
  reranker?: ModelStatus | string;
  nli?: ModelStatus | string;
  /** `ok`, or lode's one-line notice: settings of this folder it ignores until `lode trust`, a store that came with the folder moved aside. */
  trust?: string;
}

/** A pooled model in `lode/status` (`reranker`, `nli`). */
export interface ModelStatus {
  path: string;
  id: string | null;
  state: string;
}

export interface Citation {
  path: string;
  line: number;
  version_id: string;
  /** The id lode writes in citation links (see docs/lsp-extensions.md). */
  short_id?: string;
  start: number;
  end: number;
  quoted_span: string;
  /** `snapshot` for a quote from a mirrored web page, which `url` names. */
  kind?: string;
  url?: string;
}

export interface Claim {
  text: string;
  label: string;
  rung?: string;
  citations: Citation[];
}

export interface Related {
  path: string;
  line: number;
  version_id: string;
  /** The id lode writes in citation links (see docs/lsp-extensions.md). */
  short_id?: string;
  start: number;
  end: number;
  text: string;
  kind?: string;
  url?: string;
}

/** `lode/ask`, the fields shown here. */
export interface Answer {
  claims: Claim[];
  abstained: boolean;
  abstain_reason: string | null;
  related?: Related[];
  notice?: string;
  withheld?: unknown[];
  index_partial?: boolean;
}

const count = (n: number): string => n.toLocaleString('en-US');

/** Share of `passages` that `done` covers, rounded down: 100% only when every passage is covered. */
export function percentOf(done: number, passages: number): number {
  if (passages <= 0 || done >= passages) {
    return 100;
  }
  return Math.max(0, Math.floor((100 * done) / passages));
}

/** Share of passages that have a vector of the serving model, or undefined while dense retrieval is not loaded. */
export function vectorPercent(status: Status): number | undefined {
  if (typeof status.dense === 'string' || status.dense.with_vectors === null) {
    return undefined;
  }
  return percentOf(status.dense.with_vectors, status.passages);
}

/** The status bar's word on dense retrieval (none when it is complete: the bar stays short) and the tooltip lines that explain it. */
function denseState(status: Status): { parts: string[]; details: string[] } {
  const dense = status.dense;
  const passages = count(status.passages);
  if (typeof dense === 'string') {
    if (dense.startsWith('loading')) {
      return {
        parts: ['loading model'],
        details: ['Dense retrieval: loading the embedding model; answers use lexical search until it is loaded'],
      };
    }
    return { parts: ['lexical only'], details: [`Answers use lexical search only: dense retrieval is ${dense}`] };
  }
  const parts: string[] = [];
  const details = [`Dense retrieval: ${dense.model}`];
  if (dense.lexical_only) {
    parts.push('lexical only');
    details.push(`Answers use lexical search only: ${dense.lexical_only}`);
  }
  if (dense.with_vectors === null) {
    details.push(`Vectors: not counted yet (${passages} passages)`);
  } else {
    const pct = percentOf(dense.with_vectors, status.passages);
    const windows = dense.windows === undefined ? '' : ` (${count(dense.windows)} vectors)`;
    details.push(`Vectors: ${count(dense.with_vectors)} of ${passages} passages${windows}`);
    if (pct < 100 && !dense.switching) {
      parts.push(`embedding ${pct}%`);
      details.push(`Embedding: ${pct}% of passages have a vector so far; dense retrieval covers only those`);
    }
  }
  if (dense.switching) {
    const s = dense.switching;
    const pct = s.with_vectors === null ? undefined : percentOf(s.with_vectors, status.passages);
    parts.push(pct === undefined ? 'embedding (new model)' : `embedding ${pct}% (new model)`);
    const done = s.with_vectors === null ? '?' : count(s.with_vectors);
    details.push(`Switching to ${s.to}: ${done} of ${passages} passages embedded${pct === undefined ? '' : ` (${pct}%)`}; ${dense.model} answers until then`);
  }
  if (dense.mended) {
    details.push(`Vector table: ${dense.mended}`);
  }
  return { parts, details };
}

/**
 * The status bar text (`$(book) lode: 5,183 notes · embedding 36% · scanning`) and the lines that
 * explain it (the tooltip, and the head of "Lode: Show status").
 */
export function formatStatus(status: Status): { text: string; details: string[] } {
  const notes = count(status.notes);
  const parts = [`$(book) lode: ${notes} notes`];
  const details = [`Vault: ${status.vault}`, `Index: ${notes} notes, ${count(status.passages)} passages`];
  const dense = denseState(status);
  parts.push(...dense.parts);
  details.push(...dense.details);
  for (const [name, m] of [['Reranker', status.reranker], ['Entailment model', status.nli]] as const) {
    if (m === undefined) {
      continue;
    }
    details.push(typeof m === 'string' ? `${name}: ${m}` : `${name}: ${m.id ?? m.path} — ${m.state}`);
  }
  const unsaved = status.unsaved ?? [];
  if (unsaved.length > 0) {
    parts.push(`$(warning) ${unsaved.length} save${unsaved.length === 1 ? '' : 's'} not indexed`);
    for (const u of unsaved) {
      details.push(`Not indexed yet (kept and retried): ${u.path}: ${u.error}`);
    }
  }
  if (status.trust !== undefined && status.trust !== 'ok') {
    parts.push('$(shield) settings ignored');
    details.push(`Trust: ${status.trust}`);
  }
  if (status.scanning) {
    parts.push('scanning');
    details.push('Scanning: lode is reading the vault folder; notes it has not read yet are not in answers');
  }
  return { text: parts.join(' · '), details };
}

/** What the status bar item shows: the server's state before (or instead of) a `lode/status` reply. */
export type BarState =
  | { kind: 'starting' }
  | { kind: 'restricted' }
  | { kind: 'missing'; message: string }
  | { kind: 'failed'; error: string }
  | { kind: 'stopped' }
  | { kind: 'status'; status: Status }
  | { kind: 'error'; error: string };

export function formatBar(state: BarState): { text: string; details: string[] } {
  switch (state.kind) {
    case 'starting':
      return { text: '$(book) lode: starting…', details: ['Starting `lode serve`; the index state shows once it answers'] };
    case 'restricted':
      return {
        text: '$(shield) lode: Restricted Mode',
        details: [
          'lode does not run in Restricted Mode: the vault’s .lode/config.toml can name a library to load and an endpoint to send notes to',
          'Trust this folder to start it (no reload needed)',
        ],
      };
    case 'missing':
      return { text: '$(warning) lode: binary not found', details: [state.message] };
    case 'failed':
      return { text: '$(warning) lode: not running', details: [`lode serve could not start: ${state.error}`] };
    case 'stopped':
      return { text: '$(warning) lode: not running', details: ['`lode serve` is not running (see the "lode" output)'] };
    case 'error':
      return { text: '$(warning) lode', details: [`lode/status failed: ${state.error}`] };
    case 'status':
      return formatStatus(state.status);
  }
}

/** `s` cut to `max` characters, with an ellipsis when cut. */
function shorten(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1).trimEnd()}…`;
}

/**
 * The warning to show when dense retrieval is off because the embedder cannot load (the server
 * leaves it to the client under `setupPrompt: "client"`): the fix first, so a collapsed
 * notification still shows it, then the reason, its long paths cut to their last two parts. None
 * for `off (no embedder configured)` (a choice, not a fault), while loading, or once loaded.
 */
export function setupPrompt(dense: Status['dense']): string | undefined {
  if (typeof dense !== 'string' || !dense.startsWith('off:')) {
    return undefined;
  }
  const reason = dense
    .slice('off:'.length)
    .replace(/\s*\(fix:.*\)\s*$/s, '')
    .replace(/(?:[A-Za-z]:)?(?:[\\/][^\\/\s(),;:]+){3,}/g, (p) => `…${p.match(/[\\/][^\\/]+[\\/][^\\/]+$/)?.[0] ?? p}`)
    .trim();
  const why = reason ? ` (${shorten(reason, 90)})` : '';
  return `lode: run \`lode setup\` to turn on semantic search — answers are lexical only${why}`;
}

/**
 * The link an answer document gives a citation: `<handler>?line=<n>&path=<absolute path>`, where
 * `handler` is `<uri scheme>://<extension id>/open`, served by the extension's URI handler. VS
 * Code's markdown preview makes no link of a `file:` URL (markdown-it refuses the scheme) and its
 * webview opens only http(s), mailto and the editor's own scheme, so the citation goes through the
 * editor's scheme; the handler opens the note at the line. Every character that could end a
 * markdown link destination or start its title is percent-encoded.
 */
export function citationLink(handler: string, vault: string, rel: string, line: number): string {
  const abs = path.resolve(vault, ...rel.split('/'));
  const encoded = encodeURIComponent(abs).replace(/[()'!*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
  return `${handler}?line=${line}&path=${encoded}`;
}

/** The note and line of a citation link, from its query as a `vscode.Uri` gives it (decoded once); `path` comes last, so any character in it is kept. */
export function parseCitationQuery(query: string): { path: string; line: number } | undefined {
  const m = /^line=(\d+)&path=(.+)$/s.exec(query);
  if (!m) {
    return undefined;
  }
  return { line: Math.max(1, Number(m[1])), path: m[2] };
}

/**
 * Whether a citation link may open `file`: a markdown note inside one of `roots` (the vaults).
 * The URI handler is reachable from outside the editor, so it opens nothing else.
 */
export function citationAllowed(file: string, roots: string[], platform: NodeJS.Platform = process.platform): boolean {
  const p = platform === 'win32' ? path.win32 : path.posix;
  if (!p.isAbsolute(file) || !/\.(md|markdown)$/i.test(file)) {
    return false;
  }
  const norm = (s: string) => (platform === 'win32' ? p.normalize(s).toLowerCase() : p.normalize(s));
  const target = norm(file);
  return roots.some((root) => {
    const rel = p.relative(norm(root), target);
    return rel !== '' && !rel.startsWith('..') && !p.isAbsolute(rel);
  });
}

/**
 * `s` as literal text on one markdown line (the rule of `render::plain_text` on the server):
 * line breaks become spaces, bidi/zero-width/control characters are dropped, and every ASCII
 * punctuation character markdown or HTML could read is backslash-escaped — text from a note or a
 * model cannot turn into a link, HTML or emphasis.
 */
export function plainText(s: string): string {
  let out = '';
  for (const c of s) {
    if (/[\n\r\t\u2028\u2029\u0085]/.test(c)) {
      out += ' ';
    } else if (/[\u202A-\u202E\u2066-\u2069\u200B-\u200F\u061C\u2060\uFEFF]/.test(c) || /\p{Cc}/u.test(c)) {
      continue;
    } else if ('\\`*_~[]()<>#|!{}&$='.includes(c)) {
      out += '\\' + c;
    } else {
      out += c;
    }
  }
  return out;
}

/** A quote from a note as a markdown block quote, its lines kept, each line plain text. */
function blockQuote(text: string, indent: string): string[] {
  const lines = text.replace(/\r\n?/g, '\n').trim().split('\n');
  return lines.map((l) => `${indent}> ${plainText(l)}`.trimEnd());
}

type Cited = { path: string; line: number; version_id: string; short_id?: string; start: number; end: number; kind?: string; url?: string };

/** A web page's address as a link destination, if it is one a preview may open (http/https). */
function webLink(url: string | undefined): string | undefined {
  if (!url || !/^https?:\/\//i.test(url)) {
    return undefined;
  }
  return url.replace(/[ ()<>"'\\]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0'));
}

function citationMarkdown(vault: string, handler: string, c: Cited): string {
  // The short id lode writes in notes (12 hex digits, longer where two versions share them).
  const title = `"lode ${c.short_id ?? c.version_id}:${c.start}-${c.end}"`;
  if (c.kind === 'snapshot') {
    const href = webLink(c.url);
    const label = plainText(c.url ?? c.path);
    return href ? `[${label}:${c.line}](${href} ${title})` : `${label}:${c.line}`;
  }
  return `[${plainText(c.path)}:${c.line}](${citationLink(handler, vault, c.path, c.line)} ${title})`;
}

/**
 * The answer to `question` as a markdown document: each claim with its label and its citations
 * as links that open the cited note at the cited line (`handler`: see `citationLink`), the quoted
 * span under each citation as a block quote; an abstention shows its reason and the related
 * passages instead.
 */
export function renderAnswer(question: string, answer: Answer, vault: string, handler: string): string {
  const out = [`# ${plainText(question.trim())}`, ''];
  if (answer.notice) {
    out.push(`*${plainText(answer.notice)}*`, '');
  }
  if (answer.index_partial) {
    out.push('*The first scan of the vault is still running: this answer may miss notes.*', '');
  }
  if (answer.abstained || answer.claims.length === 0) {
    out.push(`**No answer:** ${plainText(answer.abstain_reason ?? "your notes don't answer this")}`, '');
    const related = answer.related ?? [];
    if (related.length > 0) {
      out.push('## Related passages', '');
      for (const r of related) {
        out.push(`- ${citationMarkdown(vault, handler, r)}`, ...blockQuote(r.text, '  '), '');
      }
    }
  }
  for (const c of answer.claims) {
    const text = plainText(c.text.trim());
    const shown = c.rung === 'evidence_only' ? `“${text}”` : text;
    // The label is lode's own text, shown as written (as the server does in notes).
    out.push(`- ${shown} *(${c.label})*`);
    for (const cit of c.citations) {
      out.push(`  - ${citationMarkdown(vault, handler, cit)}`, ...blockQuote(cit.quoted_span, '    '));
    }
    out.push('');
  }
  if (answer.withheld && answer.withheld.length > 0) {
    out.push(`*${answer.withheld.length} passages were withheld from remote synthesis (no-egress).*`, '');
  }
  return out.join('\n');
}
