// Checks the packaged extension (`npm test` runs it after `vsce package`): the bundle and what VS Code needs are in the .vsix, sources, node_modules and dev tooling are not, and the packaged package.json follows the manifest rules (scripts/manifest.js), declaring exactly the commands the bundle registers.
'use strict';

const fs = require('fs');
const path = require('path');
const yauzl = require('yauzl');
const { manifestProblems, registeredCommands } = require('./manifest');

const root = path.join(__dirname, '..');
/** A bundled extension ships a handful of files (package.json, the bundle, README, LICENSE, the .vsix's own manifests). */
const MAX_FILES = 15;

/** Every entry of the zip at `file`: name → content, read for the names `wanted` accepts. */
function readZip(file, wanted) {
  return new Promise((resolve, reject) => {
    yauzl.open(file, { lazyEntries: true }, (err, zip) => {
      if (err) {
        reject(err);
        return;
      }
      const entries = new Map();
      zip.on('error', reject);
      zip.on('end', () => resolve(entries));
      zip.on('entry', (entry) => {
        if (!wanted(entry.fileName)) {
          entries.set(entry.fileName, null);
          zip.readEntry();
          return;
        }
        zip.openReadStream(entry, (e, stream) => {
          if (e) {
            reject(e);
            return;
          }
          const chunks = [];
          stream.on('data', (c) => chunks.push(c));
          stream.on('error', reject);
          stream.on('end', () => {
            entries.set(entry.fileName, Buffer.concat(chunks).toString('utf8'));
            zip.readEntry();
          });
        });
      });
      zip.readEntry();
    });
  });
}

async function main() {
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const vsix = path.resolve(root, process.argv[2] || `${manifest.name}-${manifest.version}.vsix`);
  if (!fs.existsSync(vsix)) {
    throw new Error(`${vsix} does not exist: run \`npm run package\` first`);
  }
  const entry = `extension/${path.posix.normalize(manifest.main)}`;
  const isCode = (name) => name.startsWith('extension/') && name.endsWith('.js');
  const entries = await readZip(vsix, (name) => name === 'extension/package.json' || isCode(name));
  const names = [...entries.keys()];
  const problems = [];
  const has = (name) => entries.has(name);
  const hasUnder = (prefix) => names.some((n) => n.startsWith(prefix));

  for (const name of new Set(['extension/package.json', 'extension/dist/extension.js', entry])) {
    if (!has(name)) problems.push(`missing ${name}`);
  }
  if (!names.some((n) => /^extension\/readme\.md$/i.test(n))) problems.push('missing the extension README (extension/readme.md)');
  if (!names.some((n) => /^extension\/license(\.txt|\.md)?$/i.test(n))) problems.push('missing the LICENSE');

  // The bundle carries its dependencies: no node_modules, no tsc output, no sources or build configuration.
  for (const prefix of ['extension/node_modules/', 'extension/out/', 'extension/src/', 'extension/scripts/', 'extension/tsconfig.json', 'extension/package-lock.json']) {
    if (hasUnder(prefix)) problems.push(`${prefix} should not be in the package`);
  }
  const vsixes = names.filter((n) => n.endsWith('.vsix'));
  if (vsixes.length) problems.push(`an older package is inside this one: ${vsixes.join(', ')}`);
  if (names.length >= MAX_FILES) problems.push(`${names.length} files in the package (a bundled extension has fewer than ${MAX_FILES}): ${names.join(', ')}`);

  const bundle = entries.get('extension/dist/extension.js') || '';
  if (bundle) {
    // vscode-languageclient is inside (its start-failure message is one of its strings); only `vscode` is left to require.
    if (!bundle.includes("couldn't create connection to server")) problems.push('dist/extension.js does not contain vscode-languageclient (not bundled?)');
    const required = [...bundle.matchAll(/\brequire\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]);
    const nodeBuiltins = new Set(require('module').builtinModules);
    const external = [...new Set(required.filter((r) => r !== 'vscode' && !nodeBuiltins.has(r.replace(/^node:/, ''))))];
    if (external.length) problems.push(`dist/extension.js requires packages that are not in the .vsix: ${external.join(', ')}`);
  }

  // The packaged manifest, with the commands the packaged code registers.
  let packaged = {};
  if (entries.get('extension/package.json')) {
    packaged = JSON.parse(entries.get('extension/package.json'));
    problems.push(...manifestProblems(packaged, names.filter(isCode).map((n) => entries.get(n)).join('\n')));
  }

  if (problems.length) {
    console.error(`check-vsix: ${path.basename(vsix)} is not right:\n  - ${problems.join('\n  - ')}`);
    process.exit(1);
  }
  const commands = [...registeredCommands(bundle)].sort().join(', ');
  console.log(`check-vsix: ${path.basename(vsix)} ok (${names.length} files, ${Math.round(bundle.length / 1024)} KB bundle; commands: ${commands})`);
}

main().catch((e) => {
  console.error(`check-vsix: ${e.message}`);
  process.exit(1);
});
