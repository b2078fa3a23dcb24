// The rules package.json must follow, as one function: run on the source manifest by the unit tests (src/test/manifest.test.ts) and on the packaged one by check-vsix.js.
'use strict';

/** VS Code's Marketplace categories (https://code.visualstudio.com/api/references/extension-manifest). */
const CATEGORIES = new Set([
  'AI', 'Azure', 'Chat', 'Data Science', 'Debuggers', 'Education', 'Extension Packs', 'Formatters', 'Keymaps', 'Language Packs', 'Linters',
  'Machine Learning', 'Notebooks', 'Other', 'Programming Languages', 'SCM Providers', 'Snippets', 'Testing', 'Themes', 'Visualization',
]);

/** The code action kinds `lode serve` gives its actions (docs/lsp-extensions.md): declared ones must be among them. */
const LODE_ACTION_KINDS = new Set(['refactor.rewrite.lode.ask', 'refactor.rewrite.lode.mirror']);

/** VS Code's own `files.exclude` defaults, repeated next to `**\/.lode`: before VS Code 1.91 a contributed object default replaced them. */
const BUILT_IN_FILES_EXCLUDE = ['**/.git', '**/.svn', '**/.hg', '**/CVS', '**/.DS_Store', '**/Thumbs.db'];

/** The command ids `source` registers; ids must be string literals for this check to see them. */
function registeredCommands(source) {
  return new Set([...source.matchAll(/registerCommand\(\s*['"`]([^'"`]+)['"`]/g)].map((m) => m[1]));
}

/**
 * What is wrong with `manifest` (an empty list when nothing is). `code`, when given, is the
 * extension's code: every command it registers must be declared, and every declared one registered.
 */
function manifestProblems(manifest, code) {
  const problems = [];
  const contributes = manifest.contributes || {};

  for (const c of manifest.categories || []) {
    if (!CATEGORIES.has(c)) problems.push(`category "${c}" is not one of VS Code's categories`);
  }

  const commands = contributes.commands || [];
  for (const c of commands) {
    const category = typeof c.category === 'string' ? c.category.trim().toLowerCase() : '';
    if (category && typeof c.title === 'string' && c.title.trim().toLowerCase().startsWith(category)) {
      problems.push(`command ${c.command}: the title "${c.title}" repeats its category (the palette shows "${c.category}: ${c.title}")`);
    }
  }
  if (code !== undefined) {
    const declared = new Set(commands.map((c) => c.command));
    const registered = registeredCommands(code);
    if (registered.size === 0) problems.push('the code registers no command (or registers them with ids that are not string literals)');
    for (const id of registered) {
      if (!declared.has(id)) problems.push(`command ${id} is registered by the code but not declared in contributes.commands`);
    }
    for (const id of declared) {
      if (!registered.has(id)) problems.push(`command ${id} is declared in contributes.commands but the code never registers it`);
    }
  }

  const actions = (contributes.codeActions || []).filter((a) => (a.languages || []).includes('markdown')).flatMap((a) => a.actions || []);
  if (!actions.some((a) => a.kind === 'refactor.rewrite.lode.ask')) {
    problems.push('contributes.codeActions declares no refactor.rewrite.lode.ask action for markdown (VS Code lists "Ask lode" under Refactor from it)');
  }
  for (const a of actions) {
    if (!LODE_ACTION_KINDS.has(a.kind)) problems.push(`contributes.codeActions: kind ${a.kind} is not one lode serve gives (${[...LODE_ACTION_KINDS].join(', ')})`);
    if (!a.title || !a.description) problems.push(`contributes.codeActions: ${a.kind} needs a title and a description`);
  }

  const untrusted = (manifest.capabilities || {}).untrustedWorkspaces;
  if (!untrusted) {
    problems.push('capabilities.untrustedWorkspaces is missing (VS Code disables the extension in Restricted Mode without a word)');
  } else {
    if (untrusted.supported !== 'limited') problems.push(`capabilities.untrustedWorkspaces.supported is ${JSON.stringify(untrusted.supported)}, not "limited"`);
    if (!untrusted.description) problems.push('capabilities.untrustedWorkspaces needs a description of what works in Restricted Mode');
    for (const key of ['lode.path', 'lode.vault']) {
      if (!(untrusted.restrictedConfigurations || []).includes(key)) problems.push(`capabilities.untrustedWorkspaces.restrictedConfigurations lacks ${key} (a workspace could choose what runs)`);
    }
  }

  const exclude = (contributes.configurationDefaults || {})['files.exclude'] || {};
  if (exclude['**/.lode'] !== true) problems.push('contributes.configurationDefaults["files.exclude"] does not hide **/.lode');
  for (const glob of BUILT_IN_FILES_EXCLUDE) {
    if (exclude[glob] !== true) problems.push(`contributes.configurationDefaults["files.exclude"] lacks VS Code's own ${glob}`);
  }

  const repo = manifest.repository;
  if (!repo || typeof repo !== 'object' || !/^https:\/\//.test(repo.url || '') || repo.directory !== 'editors/vscode') {
    problems.push('repository must be {"type": "git", "url": "https://…", "directory": "editors/vscode"}');
  }

  const scripts = manifest.scripts || {};
  if (/--allow-missing-repository/.test(scripts.package || '')) problems.push('scripts.package still passes --allow-missing-repository');
  if (manifest.main !== './dist/extension.js') problems.push(`main is ${manifest.main}, not the bundle ./dist/extension.js`);
  if (!/\bbundle\b/.test(scripts['vscode:prepublish'] || '')) problems.push('scripts["vscode:prepublish"] does not run the bundle');
  if (!/esbuild\b.*--bundle\b/.test(scripts.bundle || '') || !/--external:vscode\b/.test(scripts.bundle || '') || !/--outfile=dist\/extension\.js\b/.test(scripts.bundle || '')) {
    problems.push('scripts.bundle must bundle src/extension.ts with esbuild into dist/extension.js, vscode external');
  }
  return problems;
}

module.exports = { manifestProblems, registeredCommands, CATEGORIES, BUILT_IN_FILES_EXCLUDE };
