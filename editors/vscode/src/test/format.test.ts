// Unit tests (node:test) of what the extension shows: the status bar, the setup warning and the "Ask a question…" answer document.
import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import { Answer, Status, citationAllowed, citationLink, formatBar, formatStatus, parseCitationQuery, percentOf, plainText, renderAnswer, setupPrompt } from '../format';

// The answer documents' citation links go through the editor's URI handler (see `citationLink`).
const HANDLER = 'vscode://lode.lode/open';

const status = (over: Partial<Status>): Status => ({
  vault: '/v',
  notes: 5183,
  passages: 1000,
  scanning: false,
  dense: { model: 'all-MiniLM-L6-v2', with_vectors: 1000, windows: 600 },
  ...over,
});

const has = (details: string[], want: string) => assert.ok(details.some((d) => d.includes(want)), `${want} in\n${details.join('\n')}`);

test('status bar: before the first reply it says starting, and scanning as soon as the server says so', () => {
  assert.equal(formatBar({ kind: 'starting' }).text, '$(book) lode: starting…');
  const opened = formatStatus(status({ notes: 0, passages: 0, scanning: true, dense: 'loading the embedding model' }));
  assert.equal(opened.text, '$(book) lode: 0 notes · loading model · scanning');
  has(opened.details, 'Scanning');
});

test('status bar: settings the folder may not set are said, with lode\'s own notice in the tooltip; none when trust is ok', () => {
  const notice = 'lode: ignoring in /v/.lode/config.toml: settings a folder may not set without your approval: [llm]; to approve them run `lode trust --vault /v` (docs/security.md)';
  const { text, details } = formatStatus(status({ trust: notice }));
  assert.match(text, /settings ignored/);
  has(details, 'lode trust --vault /v');
  assert.doesNotMatch(formatStatus(status({ trust: 'ok' })).text, /ignored/);
  assert.doesNotMatch(formatStatus(status({})).text, /ignored/, 'an older server without the field');
});

test('status bar: the model still loading reads "loading model", not "lexical only"', () => {
  const { text, details } = formatStatus(status({ dense: 'loading the embedding model' }));
  assert.equal(text, '$(book) lode: 5,183 notes · loading model');
  assert.doesNotMatch(text, /lexical/);
  has(details, 'loading the embedding model');
});

test('status bar: vectors being written read "embedding N%", rounded down', () => {
  const { text, details } = formatStatus(status({ dense: { model: 'm', with_vectors: 369, windows: 200 } }));
  assert.equal(text, '$(book) lode: 5,183 notes · embedding 36%');
  has(details, 'Vectors: 369 of 1,000 passages (200 vectors)');
  assert.equal(percentOf(999, 1000), 99);
  assert.equal(percentOf(0, 0), 100);
  assert.equal(percentOf(1000, 1000), 100);
});

test('status bar: a model switch shows the new model’s progress', () => {
  const { text, details } = formatStatus(
    status({ dense: { model: 'all-MiniLM-L6-v2', with_vectors: 1000, windows: 600, switching: { to: 'bge-small-en-v1.5', with_vectors: 360, windows: 100 } } }),
  );
  assert.equal(text, '$(book) lode: 5,183 notes · embedding 36% (new model)');
  has(details, 'Switching to bge-small-en-v1.5: 360 of 1,000 passages embedded (36%); all-MiniLM-L6-v2 answers until then');
});

test('status bar: complete vectors add nothing to the bar', () => {
  const { text, details } = formatStatus(status({}));
  assert.equal(text, '$(book) lode: 5,183 notes');
  has(details, 'Dense retrieval: all-MiniLM-L6-v2');
});

test('status bar: "lexical only" when dense retrieval is off, with the reason in the tooltip', () => {
  const why = 'off: no ONNX Runtime (fix: `lode setup`; `lode doctor` for details)';
  const off = formatStatus(status({ dense: why }));
  assert.equal(off.text, '$(book) lode: 5,183 notes · lexical only');
  has(off.details, why);
  assert.equal(formatStatus(status({ dense: 'off (no embedder configured)' })).text, '$(book) lode: 5,183 notes · lexical only');
});

test('status bar: "lexical only" when the vector table is not used, with its rebuild progress', () => {
  const done = formatStatus(status({ dense: { model: 'm', with_vectors: 1000, lexical_only: 'a dense search failed' } }));
  assert.equal(done.text, '$(book) lode: 5,183 notes · lexical only');
  has(done.details, 'lexical search only: a dense search failed');
  const rebuilding = formatStatus(status({ dense: { model: 'm', with_vectors: 100, mended: 'the vector table … was deleted; it is rebuilt', lexical_only: 'the vector table is being rebuilt' } }));
  assert.equal(rebuilding.text, '$(book) lode: 5,183 notes · lexical only · embedding 10%');
  has(rebuilding.details, 'Vector table: the vector table');
});

test('status bar: saves not indexed, which models are loaded', () => {
  const { text, details } = formatStatus(
    status({
      unsaved: [{ path: 'a.md', error: 'the disk holding /v/.lode is full (0 bytes free)', attempts: 3 }],
      reranker: { path: '/m/ce', id: 'ms-marco-MiniLM', state: 'loaded (1 copy)' },
      nli: 'off (no [models] nli)',
      scanning: true,
    }),
  );
  assert.equal(text, '$(book) lode: 5,183 notes · $(warning) 1 save not indexed · scanning');
  for (const want of ['a.md: the disk holding', 'Reranker: ms-marco-MiniLM — loaded (1 copy)', 'Entailment model: off']) {
    has(details, want);
  }
});

test('status bar: Restricted Mode, a missing binary and a failed start say so', () => {
  const restricted = formatBar({ kind: 'restricted' });
  assert.equal(restricted.text, '$(shield) lode: Restricted Mode');
  has(restricted.details, 'Trust this folder');
  const missing = formatBar({ kind: 'missing', message: 'lode: `lode` is not on the PATH' });
  assert.equal(missing.text, '$(warning) lode: binary not found');
  has(missing.details, 'not on the PATH');
  assert.equal(formatBar({ kind: 'failed', error: 'exited' }).text, '$(warning) lode: not running');
});

test('setup warning: the fix first, then the reason, its long paths cut; none when no embedder is configured', () => {
  const reason = 'no model at /home/me/.local/share/lode/models/all-MiniLM-L6-v2 (model.onnx is missing)';
  const message = setupPrompt(`off: ${reason} (fix: \`lode setup\`; \`lode doctor\` for details)`);
  assert.ok(message, 'a message');
  assert.ok(message.startsWith('lode: run `lode setup` to turn on semantic search — answers are lexical only ('), message);
  assert.match(message, /no model at …\/models\/all-MiniLM-L6-v2 \(model\.onnx is missing\)\)$/);
  assert.doesNotMatch(message, /\/home\/me|fix:/);
  assert.ok(message.length <= 180, `${message.length} characters`);
  const long = setupPrompt(`off: ${'ONNX Runtime library not found; '.repeat(10)}`);
  assert.ok(long && long.length <= 180 && long.endsWith('…)'), long);
  assert.equal(setupPrompt('off (no embedder configured)'), undefined);
  assert.equal(setupPrompt('loading the embedding model'), undefined);
  assert.equal(setupPrompt({ model: 'm', with_vectors: 1 }), undefined);
});

test('citation links go through the URI handler and carry any file name and the line', () => {
  const name = 'notes/a (draft) [1] #x?&path=%20.md';
  const link = citationLink(HANDLER, '/home/me/My Vault', name, 12);
  assert.ok(link.startsWith(`${HANDLER}?line=12&path=`), link);
  // Nothing that ends a markdown link destination or starts its title.
  assert.doesNotMatch(link, /[ ()[\]#<>"']/, link);
  // A `vscode.Uri` hands the handler its query decoded once.
  const query = decodeURIComponent(new URL(link).search.slice(1));
  assert.deepEqual(parseCitationQuery(query), { path: `/home/me/My Vault/${name}`, line: 12 });
  assert.equal(parseCitationQuery('path=/etc/passwd'), undefined);
});

test('the markdown preview makes links of the citations (and would not of file: URLs)', () => {
  // VS Code's preview renders with markdown-it, whose link check refuses `file:`.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const md = require('markdown-it')({ html: true });
  assert.doesNotMatch(md.render('[a](file:///v/a.md#L5)'), /<a /);
  const answer: Answer = {
    abstained: false,
    abstain_reason: null,
    claims: [{ text: 'Rotated every 60 days.', label: 'verified', citations: [{ path: 'run books/a&b.md', line: 5, version_id: 'ab'.repeat(32), start: 1, end: 2, quoted_span: 'x' }] }],
  };
  const html: string = md.render(renderAnswer('Q?', answer, '/v', HANDLER));
  const href = /<a href="([^"]+)" title="lode (ab){32}:1-2">run books\/a&amp;b\.md:5<\/a>/.exec(html)?.[1];
  assert.ok(href, html);
  const query = decodeURIComponent(new URL(href.replace(/&amp;/g, '&')).search.slice(1));
  assert.deepEqual(parseCitationQuery(query), { path: '/v/run books/a&b.md', line: 5 });
});

test('a citation link opens only a note inside a vault', () => {
  assert.ok(citationAllowed('/v/notes/a.md', ['/v']));
  assert.ok(citationAllowed('/w/b.markdown', ['/v', '/w/']));
  assert.ok(!citationAllowed('/v/../etc/a.md', ['/v']));
  assert.ok(!citationAllowed('/vault2/a.md', ['/v']));
  assert.ok(!citationAllowed('/v/notes/a.sh', ['/v']));
  assert.ok(!citationAllowed('notes/a.md', ['/v']));
  assert.ok(citationAllowed('C:\\Notes\\a.md', ['c:\\notes'], 'win32'));
  assert.ok(!citationAllowed('D:\\Notes\\a.md', ['C:\\Notes'], 'win32'));
});

test('note and model text cannot become markup', () => {
  assert.equal(plainText('[click](https://evil.example)'), '\\[click\\]\\(https://evil.example\\)');
  assert.equal(plainText('two\nlines <!-- x -->'), 'two lines \\<\\!-- x --\\>');
  assert.equal(plainText('abc\u202Efed\u200By'), 'abcfedy');
});

test('an answer: claims with labels, linked citations, the quoted span as a block quote', () => {
  const answer: Answer = {
    abstained: false,
    abstain_reason: null,
    claims: [
      {
        text: 'Staging certificates are rotated every 60 days.',
        label: 'verified',
        rung: 'verified',
        citations: [{ path: 'runbooks/rotate staging.md', line: 5, version_id: 'ab'.repeat(32), start: 10, end: 60, quoted_span: 'Rotate every 60 days.\nUse [the script](x.md).' }],
      },
    ],
  };
  const md = renderAnswer('How often are certs rotated?', answer, '/v', HANDLER);
  const lines = md.split('\n');
  assert.equal(lines[0], '# How often are certs rotated?');
  assert.ok(lines.includes('- Staging certificates are rotated every 60 days. *(verified)*'), md);
  assert.ok(lines.includes(`  - [runbooks/rotate staging.md:5](${HANDLER}?line=5&path=%2Fv%2Frunbooks%2Frotate%20staging.md "lode ${'ab'.repeat(32)}:10-60")`), md);
  assert.ok(lines.includes('    > Rotate every 60 days.'), md);
  assert.ok(lines.includes('    > Use \\[the script\\]\\(x.md\\).'), md);
  // With the server's short id (lode/ask `short_id`), the link title carries it, as in notes.
  answer.claims[0].citations[0].short_id = 'abababababab';
  const short = renderAnswer('How often are certs rotated?', answer, '/v', HANDLER);
  assert.ok(short.includes('"lode abababababab:10-60"') && !short.includes('ab'.repeat(32)), short);
});

test('a snapshot citation links to its web page', () => {
  const answer: Answer = {
    abstained: false,
    abstain_reason: null,
    claims: [{ text: 'Pool size is 10.', label: 'quoted', citations: [{ path: 'docs.example.com/pool', kind: 'snapshot', url: 'https://docs.example.com/pool', line: 3, version_id: 'ef'.repeat(32), start: 0, end: 5, quoted_span: 'size 10' }] }],
  };
  assert.match(renderAnswer('Pool?', answer, '/v', HANDLER), /- \[https:\/\/docs\.example\.com\/pool:3\]\(https:\/\/docs\.example\.com\/pool "lode (ef){32}:0-5"\)/);
});

test('an abstention: the reason and the related passages, with links', () => {
  const answer: Answer = {
    abstained: true,
    abstain_reason: 'no passage supports an answer',
    claims: [],
    related: [{ path: 'notes/x.md', line: 3, version_id: 'cd'.repeat(32), start: 0, end: 9, text: 'Something near.' }],
  };
  const md = renderAnswer('Why?', answer, '/v', HANDLER);
  assert.match(md, /\*\*No answer:\*\* no passage supports an answer/);
  assert.match(md, /- \[notes\/x\.md:3\]\(vscode:\/\/lode\.lode\/open\?line=3&path=%2Fv%2Fnotes%2Fx\.md "lode (cd){32}:0-9"\)/);
  assert.match(md, /\n {2}> Something near\./);
});
