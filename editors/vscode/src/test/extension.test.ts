// Tests (node:test) of the extension's wiring, with `vscode` and the language client replaced by fakes that record what the extension asks of them:
// Restricted Mode, one message for a missing binary, the start options, the setup warning and its terminal, the answer preview and citation links.
/* eslint-disable @typescript-eslint/no-explicit-any */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
// eslint-disable-next-line @typescript-eslint/no-require-imports
import Module = require('module');

type Call = { fn: string; args: any[] };

/** What one test's editor does and answers. */
interface World {
  trusted: boolean;
  settings: Record<string, unknown>;
  calls: Call[];
  /** Answers to showErrorMessage / showWarningMessage / showInformationMessage, in order (undefined: dismissed). */
  picks: (string | undefined)[];
  /** What the fake server answers, by method. */
  replies: Record<string, unknown>;
  startError?: Error;
  clients: any[];
  handlers: Record<string, (...a: any[]) => any>;
  listeners: Record<string, ((...a: any[]) => any)[]>;
  providers: Record<string, any>;
  uriHandler?: { handleUri(uri: any): any };
  statusText: string;
  /** The commands VS Code has besides the extension's (`getCommands`). */
  commands: string[];
}

let world: World;
const record = (fn: string, ...args: any[]) => world.calls.push({ fn, args });
const calls = (fn: string) => world.calls.filter((c) => c.fn === fn);
const listen = (name: string) => (f: (...a: any[]) => any) => {
  (world.listeners[name] ??= []).push(f);
  return { dispose() {} };
};
const fire = async (name: string, ...args: any[]) => {
  for (const f of world.listeners[name] ?? []) {
    await f(...args);
  }
};
const message = (fn: string) => (text: string, ...items: string[]) => {
  record(fn, text, ...items);
  return Promise.resolve(world.picks.shift());
};

class Uri {
  constructor(readonly scheme: string, readonly path: string, readonly query = '') {}
  get fsPath() {
    return this.path;
  }
  static from(c: { scheme: string; path: string; query?: string }) {
    return new Uri(c.scheme, c.path, c.query);
  }
  static file(p: string) {
    return new Uri('file', p);
  }
  toString() {
    return `${this.scheme}:${this.path}${this.query ? `?${this.query}` : ''}`;
  }
}
class Position {
  constructor(readonly line: number, readonly character: number) {}
}
class Range {
  constructor(readonly start: Position, readonly end: Position) {}
}

const fakeVscode = {
  Uri,
  Position,
  Range,
  StatusBarAlignment: { Left: 1, Right: 2 },
  ProgressLocation: { Notification: 15 },
  ViewColumn: { Active: -1, Beside: -2 },
  TextEditorRevealType: { InCenterIfOutsideViewport: 2 },
  env: { uriScheme: 'vscode', shell: '/bin/bash' },
  window: {
    createOutputChannel: () => ({ appendLine() {}, append() {}, show() {}, dispose() {} }),
    createStatusBarItem: () => {
      const item: any = { show() {}, dispose() {} };
      Object.defineProperty(item, 'text', { set: (t: string) => (world.statusText = t), get: () => world.statusText });
      return item;
    },
    showErrorMessage: message('showErrorMessage'),
    showWarningMessage: message('showWarningMessage'),
    showInformationMessage: message('showInformationMessage'),
    showInputBox: () => Promise.resolve('How often are certificates rotated?'),
    withProgress: (_o: unknown, task: (p: unknown, t: unknown) => unknown) => task({ report() {} }, { isCancellationRequested: false, onCancellationRequested: () => ({ dispose() {} }) }),
    createTerminal: (options: any) => {
      record('createTerminal', options);
      return { show: () => record('terminal.show'), sendText: (t: string) => record('terminal.sendText', t) };
    },
    onDidCloseTerminal: listen('closeTerminal'),
    registerUriHandler: (h: { handleUri(uri: any): any }) => {
      world.uriHandler = h;
      return { dispose() {} };
    },
    showTextDocument: (doc: any, options: any) => {
      record('showTextDocument', doc, options);
      return Promise.resolve({ revealRange() {} });
    },
    activeTextEditor: undefined,
  },
  workspace: {
    get isTrusted() {
      return world.trusted;
    },
    get workspaceFolders() {
      return [{ uri: Uri.file('/v') }];
    },
    getConfiguration: (section: string) => ({ get: (key: string) => world.settings[`${section}.${key}`] }),
    createFileSystemWatcher: () => ({ dispose() {} }),
    registerTextDocumentContentProvider: (scheme: string, p: any) => {
      world.providers[scheme] = p;
      return { dispose() {} };
    },
    onDidGrantWorkspaceTrust: listen('grantTrust'),
    onDidChangeConfiguration: listen('configuration'),
    openTextDocument: (uri: any) => Promise.resolve({ uri, languageId: 'markdown' }),
  },
  commands: {
    registerCommand: (id: string, f: (...a: any[]) => any) => {
      world.handlers[id] = f;
      return { dispose() {} };
    },
    executeCommand: (id: string, ...args: any[]) => {
      record('executeCommand', id, ...args);
      return Promise.resolve();
    },
    getCommands: () => Promise.resolve(world.commands),
  },
  languages: { setTextDocumentLanguage: (doc: unknown) => Promise.resolve(doc) },
};

const State = { Stopped: 1, Running: 2, Starting: 3 };

class FakeLanguageClient {
  state = State.Stopped;
  constructor(readonly id: string, readonly name: string, readonly serverOptions: any, readonly clientOptions: any) {
    world.clients.push(this);
  }
  async start() {
    this.state = State.Starting;
    if (world.startError) {
      // What vscode-languageclient does when the server cannot be started or initialized.
      this.error("lode client: couldn't create connection to server.", world.startError, 'force');
      this.state = State.Stopped;
      throw world.startError;
    }
    this.state = State.Running;
  }
  error(text: string, _data?: unknown, showNotification?: boolean | 'force') {
    record('client.error', text, showNotification);
  }
  async sendRequest(method: string) {
    return world.replies[typeof method === 'string' ? method : 'workspace/executeCommand'];
  }
  async dispose() {
    this.state = State.Stopped;
  }
}

const fakeClientLibrary = { LanguageClient: FakeLanguageClient, State, ExecuteCommandRequest: { type: 'workspace/executeCommand' } };

const load = (Module as any)._load;
(Module as any)._load = function (request: string, ...rest: unknown[]) {
  if (request === 'vscode') return fakeVscode;
  if (request === 'vscode-languageclient/node') return fakeClientLibrary;
  return load.call(this, request, ...rest);
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const extension = require('../extension') as { activate(c: unknown): Promise<void>; deactivate(): Promise<void> };

let dir: string;
let saved: { PATH?: string; HOME?: string };
let context: { subscriptions: { dispose(): unknown }[]; extension: { id: string } };

const settle = async () => {
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setImmediate(r));
  }
};

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lode-ext-'));
  saved = { PATH: process.env.PATH, HOME: process.env.HOME };
  // An empty PATH and home: nothing is found unless a test puts it there.
  process.env.PATH = path.join(dir, 'bin');
  process.env.HOME = dir;
  fs.mkdirSync(path.join(dir, 'bin'));
  world = { trusted: true, settings: {}, calls: [], picks: [], replies: {}, clients: [], handlers: {}, listeners: {}, providers: {}, statusText: '', commands: ['markdown.showPreview'] };
  context = { subscriptions: [], extension: { id: 'lode.lode' } };
});

afterEach(async () => {
  await extension.deactivate();
  for (const s of context.subscriptions) {
    s.dispose();
  }
  process.env.PATH = saved.PATH;
  process.env.HOME = saved.HOME;
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A `lode` the PATH finds (never run: the language client is a fake). */
const installLode = () => {
  const bin = path.join(dir, 'bin', 'lode');
  fs.writeFileSync(bin, '#!/bin/sh\nexit 0\n');
  fs.chmodSync(bin, 0o755);
  return bin;
};

test('Restricted Mode: nothing is started, the status bar says why, and trusting the folder starts lode', async () => {
  world.trusted = false;
  installLode();
  await extension.activate(context);
  assert.equal(world.clients.length, 0);
  assert.equal(world.statusText, '$(shield) lode: Restricted Mode');
  world.trusted = true;
  await fire('grantTrust');
  await settle();
  assert.equal(world.clients.length, 1);
});

test('a binary not on PATH: one message, with "Open settings" (lode.path) and "Show status", and no client', async () => {
  world.picks = ['Open settings'];
  await extension.activate(context);
  await settle();
  assert.equal(world.clients.length, 0);
  const errors = calls('showErrorMessage');
  assert.equal(errors.length, 1);
  assert.match(errors[0].args[0], /^lode: `lode` is not on the PATH VS Code was started with/);
  assert.deepEqual(errors[0].args.slice(1), ['Open settings', 'Show status']);
  assert.deepEqual(calls('executeCommand')[0].args, ['workbench.action.openSettings', 'lode.path']);
  assert.equal(world.statusText, '$(warning) lode: binary not found');
  // Setting lode.path to the binary starts it.
  world.settings['lode.path'] = installLode();
  await fire('configuration', { affectsConfiguration: (k: string) => k === 'lode.path' });
  await settle();
  assert.equal(world.clients.length, 1);
});

test('a failed start: one message (the library’s own is kept out of notifications)', async () => {
  installLode();
  world.startError = new Error('the server exited with code 1');
  await extension.activate(context);
  await settle();
  assert.deepEqual(calls('client.error').map((c) => c.args[1]), [false]);
  const errors = calls('showErrorMessage');
  assert.equal(errors.length, 1);
  assert.match(errors[0].args[0], /could not start: the server exited with code 1/);
  assert.deepEqual(errors[0].args.slice(1), ['Open settings', 'Show status']);
});

test('the server runs the binary found, told the client prompts for setup; the setup warning comes once and opens the terminal', async () => {
  const bin = installLode();
  world.replies['lode/status'] = { vault: '/v', notes: 3, passages: 10, scanning: false, dense: 'off: no ONNX Runtime at /opt/ort/lib/libonnxruntime.so (fix: `lode setup`; `lode doctor` for details)' };
  world.picks = ['Run lode setup'];
  await extension.activate(context);
  await settle();
  const client = world.clients[0];
  assert.deepEqual(client.serverOptions, { command: bin, args: ['serve'] });
  assert.deepEqual(client.clientOptions.initializationOptions, { setupPrompt: 'client' });
  assert.equal(world.statusText, '$(book) lode: 3 notes · lexical only');
  const warnings = calls('showWarningMessage');
  assert.equal(warnings.length, 1);
  assert.match(warnings[0].args[0], /^lode: run `lode setup` to turn on semantic search — answers are lexical only \(no ONNX Runtime at …\/lib\/libonnxruntime\.so\)$/);
  assert.deepEqual(warnings[0].args.slice(1), ['Run lode setup', 'Details']);
  await settle();
  assert.deepEqual(calls('createTerminal')[0].args[0], { name: 'lode setup', cwd: '/v' });
  assert.equal(calls('terminal.show').length, 1);
  assert.deepEqual(calls('terminal.sendText')[0].args, [`${bin} setup`]);
  // Later refreshes do not repeat it.
  await world.handlers['lode.showStatus']();
  await settle();
  assert.equal(calls('showWarningMessage').length, 1);
});

test('no setup warning when no embedder is configured', async () => {
  installLode();
  world.replies['lode/status'] = { vault: '/v', notes: 3, passages: 10, scanning: false, dense: 'off (no embedder configured)' };
  await extension.activate(context);
  await settle();
  assert.equal(calls('showWarningMessage').length, 0);
});

test('an answer opens in the markdown preview, and its citation links open the note at the line', async () => {
  installLode();
  world.replies['lode/status'] = { vault: '/v', vaults: ['/v'], notes: 3, passages: 10, scanning: false, dense: { model: 'm', with_vectors: 10 } };
  world.replies['lode/ask'] = {
    abstained: false,
    abstain_reason: null,
    claims: [{ text: 'Every 60 days.', label: 'verified', citations: [{ path: 'runbooks/certs.md', line: 5, version_id: 'ab'.repeat(32), start: 1, end: 9, quoted_span: 'Every 60 days.' }] }],
  };
  await extension.activate(context);
  await settle();
  await world.handlers['lode.question']();
  const preview = calls('executeCommand').find((c) => c.args[0] === 'markdown.showPreview');
  assert.ok(preview, JSON.stringify(world.calls));
  const uri = preview.args[1];
  assert.equal(uri.scheme, 'lode-answer');
  assert.equal(calls('showTextDocument').length, 0);
  const markdown: string = world.providers['lode-answer'].provideTextDocumentContent(uri);
  const link = /\]\((vscode:\/\/lode\.lode\/open\?[^ )]+) "lode/.exec(markdown)?.[1];
  assert.ok(link, markdown);
  // VS Code gives the handler the link's query decoded.
  const query = decodeURIComponent(new URL(link).search.slice(1));
  await world.uriHandler!.handleUri(new Uri('vscode', '/open', query));
  const [doc, options] = calls('showTextDocument')[0].args;
  assert.equal(doc.fsPath, '/v/runbooks/certs.md');
  assert.equal(options.selection.start.line, 4);
  // Nothing outside the vaults.
  await world.uriHandler!.handleUri(new Uri('vscode', '/open', 'line=1&path=/etc/notes.md'));
  assert.equal(calls('showTextDocument').length, 1);
  assert.match(calls('showWarningMessage').at(-1)!.args[0], /not opening/);
});

test('without the markdown preview, an answer opens as markdown source', async () => {
  installLode();
  world.commands = [];
  world.replies['lode/status'] = { vault: '/v', notes: 3, passages: 10, scanning: false, dense: { model: 'm', with_vectors: 10 } };
  world.replies['lode/ask'] = { abstained: true, abstain_reason: 'nothing on this', claims: [] };
  await extension.activate(context);
  await settle();
  await world.handlers['lode.question']();
  assert.equal(calls('executeCommand').filter((c) => c.args[0] === 'markdown.showPreview').length, 0);
  const [doc, options] = calls('showTextDocument')[0].args;
  assert.equal(doc.uri.scheme, 'lode-answer');
  assert.deepEqual(options, { preview: true });
});
