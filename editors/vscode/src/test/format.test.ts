// Unit tests (node:test) of what the extension shows: the status bar text and the "Ask a question…" answer document.
import * as assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'url';
import { Answer, Status, fileLink, formatStatus, plainText, renderAnswer, vectorPercent } from '../format';

const status = (over: Partial<Status>): Status => ({
  vault: '/v',
  notes: 5183,
  passages: 1000,
  scanning: false,
  dense: { model: 'all-MiniLM-L6-v2', with_vectors: 876 },
  ...over,
});

test('status bar: notes with separators, vectors rounded down, scanning only while scanning', () => {
  assert.equal(formatStatus(status({ scanning: true })).text, '$(book) lode: 5,183 notes · vectors 87% · scanning');
  assert.equal(formatStatus(status({})).text, '$(book) lode: 5,183 notes · vectors 87%');
  assert.equal(vectorPercent(status({ dense: { model: 'm', with_vectors: 999 } })), 99);
  assert.equal(vectorPercent(status({ passages: 0, dense: { model: 'm', with_vectors: 0 } })), 100);
  assert.equal(formatStatus(status({ dense: { model: 'm', with_vectors: null } })).text, '$(book) lode: 5,183 notes · vectors ?');
});

test('status bar: dense off shows "lexical only" and the reason in the details', () => {
  const why = 'off: no ONNX Runtime (fix: `lode setup`; `lode doctor` for details)';
  const { text, details } = formatStatus(status({ dense: why }));
  assert.equal(text, '$(book) lode: 5,183 notes · lexical only');
  assert.ok(details.some((d) => d.includes(why)), details.join('\n'));
});

test('status bar: saves not indexed, which models are loaded, a vector table being rebuilt', () => {
  const { text, details } = formatStatus(
    status({
      unsaved: [{ path: 'a.md', error: 'the disk holding /v/.lode is full (0 bytes free)', attempts: 3 }],
      reranker: { path: '/m/ce', id: 'ms-marco-MiniLM', state: 'loaded (1 copy)' },
      nli: 'off (no [models] nli)',
      dense: { model: 'm', with_vectors: 10, mended: 'the vector table … was deleted; it is rebuilt', lexical_only: 'the vector table is being rebuilt' },
    }),
  );
  assert.equal(text, '$(book) lode: 5,183 notes · vectors 1% · $(warning) 1 save not indexed');
  for (const want of ['a.md: the disk holding', 'Reranker: ms-marco-MiniLM — loaded (1 copy)', 'Entailment model: off', 'lexical search only: the vector table is being rebuilt', 'Vector table: the vector table']) {
    assert.ok(details.some((d) => d.includes(want)), `${want} in\n${details.join('\n')}`);
  }
});

test('citation links are file URLs with a line fragment that survive any file name', () => {
  const link = fileLink('/home/me/My Vault', 'notes/a (draft) [1] #x?.md', 12);
  assert.ok(link.startsWith('file:///home/me/My%20Vault/notes/'), link);
  assert.ok(link.endsWith('#L12'), link);
  assert.doesNotMatch(link.slice(0, -'#L12'.length), /[ ()[\]#?<>"']/, link);
  assert.equal(fileURLToPath(link.slice(0, -'#L12'.length)), '/home/me/My Vault/notes/a (draft) [1] #x?.md');
});

test('note and model text cannot become markup', () => {
  assert.equal(plainText('[click](https://evil.example)'), '\\[click\\]\\(https://evil.example\\)');
  assert.equal(plainText('two\nlines <!-- x -->'), 'two lines \\<\\!-- x --\\>');
  assert.equal(plainText('abc\u202Efed\u200By'), 'abcfedy');
});

test('an answer: claims with labels, clickable citations, the quoted span as a block quote', () => {
  const answer: Answer = {
    abstained: false,
    abstain_reason: null,
    claims: [
      {
        text: 'Staging certificates are rotated every 60 days.',
        label: 'quoted & coupled',
        rung: 'verified',
        citations: [{ path: 'runbooks/rotate staging.md', line: 5, version_id: 'ab'.repeat(32), start: 10, end: 60, quoted_span: 'Rotate every 60 days.\nUse [the script](x.md).' }],
      },
    ],
  };
  const md = renderAnswer('How often are certs rotated?', answer, '/v');
  const lines = md.split('\n');
  assert.equal(lines[0], '# How often are certs rotated?');
  assert.ok(lines.includes('- Staging certificates are rotated every 60 days. *(quoted & coupled)*'), md);
  assert.ok(lines.includes(`  - [runbooks/rotate staging.md:5](file:///v/runbooks/rotate%20staging.md#L5 "lode ${'ab'.repeat(32)}:10-60")`), md);
  assert.ok(lines.includes('    > Rotate every 60 days.'), md);
  assert.ok(lines.includes('    > Use \\[the script\\]\\(x.md\\).'), md);
});

test('an abstention: the reason and the related passages, with links', () => {
  const answer: Answer = {
    abstained: true,
    abstain_reason: 'no passage supports an answer',
    claims: [],
    related: [{ path: 'notes/x.md', line: 3, version_id: 'cd'.repeat(32), start: 0, end: 9, text: 'Something near.' }],
  };
  const md = renderAnswer('Why?', answer, '/v');
  assert.match(md, /\*\*No answer:\*\* no passage supports an answer/);
  assert.match(md, /- \[notes\/x\.md:3\]\(file:\/\/\/v\/notes\/x\.md#L3 "lode (cd){32}:0-9"\)/);
  assert.match(md, /\n {2}> Something near\./);
});

test('the palette shows each command once prefixed: the title does not repeat the category', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const pkg = require('../../package.json') as { contributes: { commands: { title: string; category?: string }[] } };
  for (const c of pkg.contributes.commands) {
    assert.ok(c.category === undefined || !c.title.startsWith(`${c.category}:`), `"${c.category}: ${c.title}"`);
  }
});
