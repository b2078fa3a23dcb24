// Unit tests (node:test) of package.json: the manifest rules of scripts/manifest.js hold for it and for the code, and each rule catches what it is about.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';

// From out/test/ to the extension's folder.
const root = path.join(__dirname, '..', '..');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { manifestProblems } = require(path.join(root, 'scripts', 'manifest.js')) as { manifestProblems: (m: unknown, code?: string) => string[] };
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const code = fs.readFileSync(path.join(root, 'src', 'extension.ts'), 'utf8');

const broken = (edit: (m: typeof manifest) => void): string[] => {
  const m = JSON.parse(JSON.stringify(manifest));
  edit(m);
  return manifestProblems(m, code);
};

test('package.json follows the manifest rules, and declares exactly the commands the code registers', () => {
  assert.deepEqual(manifestProblems(manifest, code), []);
});

test('each manifest rule catches its fault', () => {
  const cases: [string, (m: typeof manifest) => void, RegExp][] = [
    ['an unknown category', (m) => m.categories.push('Notes'), /category "Notes"/],
    ['a title repeating its category', (m) => (m.contributes.commands[0].title = 'Lode: Ask'), /repeats its category/],
    ['a declared command never registered', (m) => m.contributes.commands.push({ command: 'lode.gone', title: 'Gone', category: 'Lode' }), /lode\.gone is declared/],
    ['a registered command not declared', (m) => m.contributes.commands.shift(), /is registered by the code but not declared/],
    ['no Ask code action', (m) => (m.contributes.codeActions = []), /refactor\.rewrite\.lode\.ask/],
    ['a code action kind lode does not give', (m) => m.contributes.codeActions[0].actions.push({ kind: 'refactor.lode', title: 'x', description: 'y' }), /kind refactor\.lode/],
    ['no Restricted Mode declaration', (m) => delete m.capabilities, /untrustedWorkspaces is missing/],
    ['lode.path not restricted', (m) => (m.capabilities.untrustedWorkspaces.restrictedConfigurations = ['lode.vault']), /lacks lode\.path/],
    ['.lode shown in the Explorer', (m) => delete m.contributes.configurationDefaults, /hide \*\*\/\.lode/],
    ['no repository', (m) => delete m.repository, /repository must be/],
    ['an unbundled main', (m) => (m.main = './out/extension.js'), /main is \.\/out\/extension\.js/],
    ['packaging without a repository', (m) => (m.scripts.package += ' --allow-missing-repository'), /--allow-missing-repository/],
  ];
  for (const [what, edit, want] of cases) {
    assert.ok(broken(edit).some((p) => want.test(p)), `${what}: ${broken(edit).join('; ') || 'no problem found'}`);
  }
});

test('lode.path is machine-scoped and read with get: VS Code answers it from user settings only, trusted workspace or not', () => {
  assert.match(code, /getConfiguration\('lode'\)\.get<string>\('path'\)/);
  assert.doesNotMatch(code, /\.inspect\s*[<(]/);
  const props = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).contributes.configuration.properties;
  assert.equal(props['lode.path'].scope, 'machine', 'a folder never chooses the program that runs');
});

test('the .vsix leaves out node_modules and out/ (the bundle carries the code)', () => {
  const ignore = fs.readFileSync(path.join(root, '.vscodeignore'), 'utf8').split('\n').map((l) => l.trim());
  for (const want of ['node_modules/**', 'out/**']) {
    assert.ok(ignore.includes(want), `${want} in .vscodeignore`);
  }
});
