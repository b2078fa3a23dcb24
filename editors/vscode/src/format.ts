// What the extension shows, as pure functions of lode's replies (no `vscode` import, so the unit tests run under plain Node).
import * as path from 'path';
import { pathToFileURL } from 'url';

/** `lode/status` (docs/lsp-extensions.md). */
export interface Status {
  vault: string;
  vaults?: string[];
  notes: number;
  passages: number;
  scanning: boolean;
  dense: { model: string; with_vectors: number | null; mended?: string; lexical_only?: string } | string;
  /** Saves the store has not taken yet (kept and retried by the server). */
  unsaved?: { path: string; error: string; attempts: number }[];
  reranker?: ModelStatus | string;
  nli?: ModelStatus | string;
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
  start: number;
  end: number;
  quoted_span: string;
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
  start: number;
  end: number;
  text: string;
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

/** Share of passages that have a vector, rounded down: 100% only when every passage has one. */
export function vectorPercent(status: Status): number | undefined {
  if (typeof status.dense === 'string' || status.dense.with_vectors === null) {
    return undefined;
  }
  if (status.passages <= 0) {
    return 100;
  }
  return Math.min(100, Math.floor((100 * status.dense.with_vectors) / status.passages));
}

/**
 * The status bar text (`$(book) lode: 5,183 notes · vectors 87% · scanning`) and the lines that
 * explain it (the tooltip, and the head of "Lode: Show status").
 */
export function formatStatus(status: Status): { text: string; details: string[] } {
  const notes = status.notes.toLocaleString('en-US');
  const passages = status.passages.toLocaleString('en-US');
  const parts = [`$(book) lode: ${notes} notes`];
  const details = [`Vault: ${status.vault}`, `Index: ${notes} notes, ${passages} passages`];
  if (typeof status.dense === 'string') {
    parts.push('lexical only');
    details.push(`Dense retrieval: ${status.dense}`);
  } else {
    const pct = vectorPercent(status);
    parts.push(pct === undefined ? 'vectors ?' : `vectors ${pct}%`);
    const have = status.dense.with_vectors === null ? '?' : status.dense.with_vectors.toLocaleString('en-US');
    details.push(`Vectors: ${have} of ${passages} passages (${status.dense.model})`);
    if (status.dense.lexical_only) {
      details.push(`Answers use lexical search only: ${status.dense.lexical_only}`);
    }
    if (status.dense.mended) {
      details.push(`Vector table: ${status.dense.mended}`);
    }
  }
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
  if (status.scanning) {
    parts.push('scanning');
    details.push('Scanning the vault folder');
  }
  return { text: parts.join(' · '), details };
}

/**
 * A `file:` URL for `rel` (vault-relative, `/`-separated) inside `vault`, with a `#L<line>`
 * fragment that VS Code's opener turns into a selection. Every character that could end a
 * markdown link destination or start its title (space, parentheses, brackets, quotes, `<>`) is
 * percent-encoded, so the link survives any file name.
 */
export function fileLink(vault: string, rel: string, line: number): string {
  const abs = path.resolve(vault, ...rel.split('/'));
  const href = pathToFileURL(abs).href.replace(/[()[\]'"!*<> ]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0'));
  return `${href}#L${line}`;
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

function citationLink(vault: string, c: { path: string; line: number; version_id: string; start: number; end: number }): string {
  return `[${plainText(c.path)}:${c.line}](${fileLink(vault, c.path, c.line)} "lode ${c.version_id}:${c.start}-${c.end}")`;
}

/**
 * The answer to `question` as a markdown document: each claim with its label and its citations
 * as links that open the cited note at the cited line, the quoted span under each citation as a
 * block quote; an abstention shows its reason and the related passages instead.
 */
export function renderAnswer(question: string, answer: Answer, vault: string): string {
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
        out.push(`- ${citationLink(vault, r)}`, ...blockQuote(r.text, '  '), '');
      }
    }
  }
  for (const c of answer.claims) {
    const text = plainText(c.text.trim());
    const shown = c.rung === 'evidence_only' ? `“${text}”` : text;
    // The label is lode's own text, shown as written (as the server does in notes).
    out.push(`- ${shown} *(${c.label})*`);
    for (const cit of c.citations) {
      out.push(`  - ${citationLink(vault, cit)}`, ...blockQuote(cit.quoted_span, '    '));
    }
    out.push('');
  }
  if (answer.withheld && answer.withheld.length > 0) {
    out.push(`*${answer.withheld.length} passages were withheld from remote synthesis (no-egress).*`, '');
  }
  return out.join('\n');
}
