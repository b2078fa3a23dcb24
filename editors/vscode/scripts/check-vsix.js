// Checks the packaged extension (`npm test` runs it after `vsce package`): what VS Code needs is in the .vsix, sources and dev tooling are not, and package.json declares exactly the commands the code registers.
'use strict';

const fs = require('fs');
const path = require('path');
const yauzl = require('yauzl');

const root = path.join(__dirname, '..');

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

/** The command ids `source` registers; ids must be string literals for this check to see them. */
function registeredCommands(source) {
  return new Set([...source.matchAll(/registerCommand\(\s*['"`]([^'"`]+)['"`]/g)].map((m) => m[1]));
}

async function main() {
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const vsix = path.resolve(root, process.argv[2] || `${manifest.name}-${manifest.version}.vsix`);
  if (!fs.existsSync(vsix)) {
    throw new Error(`${vsix} does not exist: run \`npm run package\` first`);
  }
  const entry = `extension/${path.posix.normalize(manifest.main)}`;
  const isCode = (name) => name.startsWith('extension/out/') && name.endsWith('.js');
  const entries = await readZip(vsix, (name) => name === 'extension/package.json' || isCode(name));
  const names = [...entries.keys()];
  const problems = [];
  const has = (name) => entries.has(name);
  const hasUnder = (prefix) => names.some((n) => n.startsWith(prefix));

  for (const name of new Set(['extension/package.json', 'extension/out/extension.js', entry])) {
    if (!has(name)) problems.push(`missing ${name}`);
  }
  if (!names.some((n) => /^extension\/readme\.md$/i.test(n))) problems.push('missing the extension README (extension/readme.md)');
  if (!names.some((n) => /^extension\/license(\.txt|\.md)?$/i.test(n))) problems.push('missing the LICENSE');

  // Every runtime dependency the lockfile resolves must ship, at the path Node will look for it.
  const lock = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8'));
  const runtime = Object.entries(lock.packages)
    .filter(([p, meta]) => p.startsWith('node_modules/') && !meta.dev && !meta.optional)
    .map(([p]) => p);
  if (!runtime.includes('node_modules/vscode-languageclient')) problems.push('package-lock.json has no runtime vscode-languageclient');
  for (const p of runtime) {
    if (!has(`extension/${p}/package.json`)) problems.push(`missing runtime dependency extension/${p}/`);
  }
  if (!hasUnder('extension/node_modules/vscode-languageclient/')) problems.push('missing extension/node_modules/vscode-languageclient/');

  // Sources, build configuration, tests and dev-only packages stay out (.vscodeignore, devDependencies).
  for (const prefix of ['extension/src/', 'extension/scripts/', 'extension/out/test/', 'extension/tsconfig.json', 'extension/node_modules/typescript/', 'extension/node_modules/@vscode/vsce/']) {
    if (hasUnder(prefix)) problems.push(`${prefix} should not be in the package`);
  }
  const vsixes = names.filter((n) => n.endsWith('.vsix'));
  if (vsixes.length) problems.push(`an older package is inside this one: ${vsixes.join(', ')}`);

  // The commands: declared in the packaged package.json, registered by the packaged code (any file under out/).
  let declared = new Set();
  if (entries.get('extension/package.json')) {
    const packaged = JSON.parse(entries.get('extension/package.json'));
    declared = new Set(((packaged.contributes || {}).commands || []).map((c) => c.command));
  }
  const code = names.filter(isCode).map((n) => entries.get(n)).join('\n');
  const registered = registeredCommands(code);
  if (registered.size === 0) problems.push('extension/out/ registers no command (or registers them with ids that are not string literals)');
  for (const id of registered) {
    if (!declared.has(id)) problems.push(`command ${id} is registered by the code but not declared in package.json contributes.commands`);
  }
  for (const id of declared) {
    if (!registered.has(id)) problems.push(`command ${id} is declared in package.json but the code never registers it`);
  }

  if (problems.length) {
    console.error(`check-vsix: ${path.basename(vsix)} is not right:\n  - ${problems.join('\n  - ')}`);
    process.exit(1);
  }
  console.log(`check-vsix: ${path.basename(vsix)} ok (${names.length} files; ${runtime.length} runtime packages; commands: ${[...registered].sort().join(', ')})`);
}

main().catch((e) => {
  console.error(`check-vsix: ${e.message}`);
  process.exit(1);
});
