// lode for VS Code: starts `lode serve` for markdown files in a trusted workspace, shows the index's state in the status bar, and adds the "Lode: …" commands.
import { execFile } from 'child_process';
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import { ExecuteCommandRequest, LanguageClient, LanguageClientOptions, State } from 'vscode-languageclient/node';
import { SearchEnv, binaryProblem, chooseBinary, shellCommandLine } from './binary';
import { Answer, BarState, Status, citationAllowed, formatBar, parseCitationQuery, renderAnswer, setupPrompt } from './format';

const STATUS_EVERY_MS = 5000;
/** Answers kept for "Ask a question…" documents; older ones read as "no longer kept". */
const KEPT_ANSWERS = 50;
const DOCTOR_TIMEOUT_MS = 120_000;
/** The server of the active extension, stopped (and waited for) on deactivation. */
let active: Server | undefined;

const RESTRICTED =
  'lode does not run in Restricted Mode: the vault’s .lode/config.toml can name a library for lode to load and an endpoint to send notes to. Trust this folder to start it.';

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * The `lode.path` setting, from the user's settings only: its scope is `machine`, which VS Code
 * never reads from a workspace or folder (and in Restricted Mode, `restrictedConfigurations`
 * says the same), so a folder's `.vscode/settings.json` never chooses the binary that runs,
 * trusted workspace or not (docs/security.md).
 */
function lodeSetting(): string {
  return vscode.workspace.getConfiguration('lode').get<string>('path')?.trim() || 'lode';
}

/** The binary a platform-specific .vsix carries (`server/lode`), used when the user has none. */
let bundledBinary: string | undefined;

function vaultSetting(): string | undefined {
  return vscode.workspace.getConfiguration('lode').get<string>('vault')?.trim() || undefined;
}

/** Where a bare `lode` is looked up: the extension host's own PATH, as spawning it would. */
function searchEnv(): SearchEnv {
  return {
    platform: process.platform,
    PATH: process.env.PATH,
    PATHEXT: process.env.PATHEXT,
    home: os.homedir(),
    cwd: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath,
  };
}

/**
 * The language client, quiet about a failed start. The library reports one with a notification
 * no option turns off (`error(…, 'force')` in `start()`; `initializationFailedHandler` only covers
 * the `initialize` request), on top of the extension's own message with its "Open settings" and
 * "Show status" buttons; while `quiet`, such a message goes to the output channel only.
 */
class LodeClient extends LanguageClient {
  quiet = false;

  override error(message: string, data?: unknown, showNotification: boolean | 'force' = true): void {
    super.error(message, data, this.quiet ? false : showNotification);
  }
}

/** The one message for a server that cannot start: what is wrong, and where to fix it. */
async function reportStartFailure(message: string): Promise<void> {
  const pick = await vscode.window.showErrorMessage(message, 'Open settings', 'Show status');
  if (pick === 'Open settings') {
    await vscode.commands.executeCommand('workbench.action.openSettings', 'lode.path');
  } else if (pick === 'Show status') {
    await vscode.commands.executeCommand('lode.showStatus');
  }
}

/**
 * "Ask a question…" answers as read-only markdown documents under `lode-answer:`, shown in the
 * markdown preview. Unlike an untitled document they never ask to be saved.
 */
class AnswerDocuments implements vscode.TextDocumentContentProvider {
  static readonly scheme = 'lode-answer';
  // Insertion-ordered, so the first key is the oldest answer.
  private readonly texts = new Map<string, string>();
  private count = 0;

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.path) ?? 'This answer is no longer kept: ask again (Lode: Ask a question…).\n';
  }

  add(question: string, markdown: string): vscode.Uri {
    this.count += 1;
    const title = question.replace(/[^\p{L}\p{N} _-]+/gu, ' ').replace(/\s+/g, ' ').trim().slice(0, 60) || 'answer';
    const uri = vscode.Uri.from({ scheme: AnswerDocuments.scheme, path: `/${this.count}/${title}.md` });
    this.texts.set(uri.path, markdown);
    while (this.texts.size > KEPT_ANSWERS) {
      this.texts.delete(this.texts.keys().next().value as string);
    }
    return uri;
  }
}

/** The status bar item: the server's state, then `lode/status` every few seconds and at each scan's start and end. */
class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('lode.status', vscode.StatusBarAlignment.Left, 10);
  private readonly timer: NodeJS.Timeout;
  private busy = false;
  // A refresh asked for while one is running runs after it, so a scan's end is never missed.
  private again = false;
  state: BarState = { kind: 'starting' };
  /** The last `lode/status` reply, for "Lode: Show status", the answer links and the citation handler. */
  last: Status | undefined;

  constructor(
    private readonly client: () => LanguageClient | undefined,
    private readonly onStatus: (status: Status) => void,
  ) {
    this.item.name = 'lode';
    this.item.command = 'lode.showStatus';
    this.set(vscode.workspace.isTrusted ? { kind: 'starting' } : { kind: 'restricted' });
    this.item.show();
    this.timer = setInterval(() => void this.refresh(), STATUS_EVERY_MS);
  }

  set(state: BarState): void {
    this.state = state;
    const { text, details } = formatBar(state);
    this.item.text = text;
    this.item.tooltip = [...details, state.kind === 'restricted' ? 'Click for details' : 'Click for `lode doctor`'].join('\n');
  }

  async refresh(): Promise<void> {
    if (this.busy) {
      this.again = true;
      return;
    }
    this.busy = true;
    try {
      do {
        this.again = false;
        await this.update();
      } while (this.again);
    } finally {
      this.busy = false;
    }
  }

  private async update(): Promise<void> {
    const client = this.client();
    // Without a client the state stays what the server set (restricted, binary not found, failed start).
    if (!client || client.state === State.Starting) {
      return;
    }
    if (client.state === State.Stopped) {
      this.set({ kind: 'stopped' });
      return;
    }
    try {
      // tower-lsp wants a params member even for a request without params.
      const status = await client.sendRequest<Status>('lode/status', {});
      this.last = status;
      this.set({ kind: 'status', status });
      this.onStatus(status);
    } catch (e) {
      this.set({ kind: 'error', error: errorText(e) });
    }
  }

  dispose(): void {
    clearInterval(this.timer);
    this.item.dispose();
  }
}

/** `lode serve`: started once the workspace is trusted and the binary is found, restarted when `lode.path` or `lode.vault` changes. */
class Server implements vscode.Disposable {
  client: LodeClient | undefined;
  /** The binary the client runs, resolved when it started. */
  binary: string | undefined;
  bar!: StatusBar;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly output: vscode.OutputChannel,
    private readonly options: () => LanguageClientOptions,
  ) {}

  /** Runs `op` after any start or stop in progress, so they never overlap. */
  private serial(op: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(op, op);
    return this.queue;
  }

  start(): Promise<void> {
    return this.serial(() => this.doStart());
  }

  restart(): Promise<void> {
    return this.serial(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  stop(): Promise<void> {
    return this.serial(() => this.doStop());
  }

  private async doStart(): Promise<void> {
    if (this.client) {
      return;
    }
    if (!vscode.workspace.isTrusted) {
      this.bar.set({ kind: 'restricted' });
      return;
    }
    const command = lodeSetting();
    const env = searchEnv();
    const found = chooseBinary(command, bundledBinary, env);
    if (!found.ok) {
      const message = binaryProblem(command, found, env) ?? `lode: ${command} was not found`;
      this.binary = undefined;
      this.bar.set({ kind: 'missing', message });
      this.output.appendLine(message);
      this.output.appendLine(`(looked for: ${found.searched.join(', ') || command}; PATH: ${env.PATH ?? ''})`);
      void reportStartFailure(message);
      return;
    }
    this.binary = found.path;
    const args = ['serve'];
    const vault = vaultSetting();
    if (vault) {
      args.push('--vault', vault);
    }
    // The resolved path, so the library spawns exactly the file found above.
    const client = new LodeClient('lode', 'lode', { command: found.path, args }, this.options());
    this.client = client;
    this.bar.set({ kind: 'starting' });
    client.quiet = true;
    try {
      await client.start();
    } catch (e) {
      // A client that failed to start cannot be stopped or started again: a restart makes a new one.
      this.client = undefined;
      this.bar.set({ kind: 'failed', error: errorText(e) });
      void reportStartFailure(`lode: \`${found.path} serve\` could not start: ${errorText(e)}`);
      return;
    } finally {
      client.quiet = false;
    }
    void this.bar.refresh();
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.dispose();
      } catch (e) {
        this.output.appendLine(`lode: stopping the server: ${errorText(e)}`);
      }
    }
  }

  dispose(): void {
    void this.stop();
  }
}

/**
 * Runs `work` under a cancellable "lode: asking…" notification. Cancelling it cancels the
 * request (`$/cancelRequest`); lode stops the ask and nothing is reported.
 */
function asking<T>(work: (token: vscode.CancellationToken) => Promise<T>): Thenable<T | undefined> {
  return vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, cancellable: true, title: 'lode: asking…' },
    async (_progress, token) => {
      try {
        return await work(token);
      } catch (e) {
        if (!token.isCancellationRequested) {
          void vscode.window.showErrorMessage(`lode: ${errorText(e)}`);
        }
        return undefined;
      }
    },
  );
}

/** The vault `lode doctor` should look at: the one the server reports, else the setting, else the first folder. */
function doctorVault(bar: StatusBar): string | undefined {
  return bar.last?.vault || vaultSetting() || vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

/** "Lode: Show status": the server's live state, then `lode doctor`'s report in the "lode" channel (shown even when it exits non-zero: that output is the explanation). */
async function showStatus(output: vscode.OutputChannel, bar: StatusBar): Promise<void> {
  if (!vscode.workspace.isTrusted) {
    // `lode doctor` reads the vault's config as the server does: it does not run here either.
    const pick = await vscode.window.showInformationMessage(RESTRICTED, 'Manage Workspace Trust');
    if (pick) {
      await vscode.commands.executeCommand('workbench.trust.manage');
    }
    return;
  }
  await bar.refresh();
  // The channel is the language client's too: the report is appended after the server's log.
  output.appendLine(`\n──── lode status, ${new Date().toLocaleString()} ────`);
  output.show(true);
  output.appendLine('Language server:');
  for (const line of formatBar(bar.state).details) {
    output.appendLine(`  ${line}`);
  }
  output.appendLine('');
  const command = lodeSetting();
  const env = searchEnv();
  const found = chooseBinary(command, bundledBinary, env);
  if (!found.ok) {
    output.appendLine(binaryProblem(command, found, env) ?? `${command} was not found`);
    output.appendLine(`Looked for: ${found.searched.join(', ') || command}`);
    output.appendLine(`PATH as VS Code has it: ${env.PATH ?? '(unset)'}`);
    return;
  }
  const vault = doctorVault(bar);
  const args = vault ? ['doctor', '--vault', vault] : ['doctor'];
  output.appendLine(`$ ${found.path} ${args.join(' ')}`);
  await new Promise<void>((resolve) => {
    execFile(found.path, args, { timeout: DOCTOR_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      output.append(stdout);
      if (stderr) {
        output.append(stderr);
      }
      if (err) {
        const code = (err as { code?: unknown }).code;
        if (typeof code === 'number') {
          output.appendLine(`\n(lode doctor exited with status ${code}: the FAIL lines above say what is wrong; \`lode setup\` installs ONNX Runtime and the embedding model)`);
        } else {
          output.appendLine(`\n${errorText(err)}`);
        }
      }
      resolve();
    });
  });
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  bundledBinary = context.extensionPath ? path.join(context.extensionPath, 'server', process.platform === 'win32' ? 'lode.exe' : 'lode') : undefined;
  const output = vscode.window.createOutputChannel('lode');
  const answers = new AnswerDocuments();
  const watcher = vscode.workspace.createFileSystemWatcher('**/*.md');
  // Citation links in answer documents: `<scheme>://<extension id>/open?…`, see `citationLink`.
  const citationHandler = `${vscode.env.uriScheme}://${context.extension.id}/open`;
  // The setup warning is shown once per vault in a session.
  const prompted = new Set<string>();

  const server = new Server(output, () => ({
    documentSelector: [{ scheme: 'file', language: 'markdown' }],
    outputChannel: output,
    synchronize: { fileEvents: watcher },
    // The extension says itself when dense retrieval is off, with the fix first and a button for it.
    initializationOptions: { setupPrompt: 'client' },
    // A failed `initialize` is reported once, by `Server.doStart`.
    initializationFailedHandler: () => false,
    middleware: {
      handleWorkDoneProgress: (token, params, next) => {
        next(token, params);
        if (typeof token === 'string' && token.startsWith('lode/scan/') && params.kind !== 'report') {
          void bar.refresh();
        }
      },
    },
  }));

  const runSetup = (vault: string) => {
    const terminal = vscode.window.createTerminal({ name: 'lode setup', cwd: vault });
    terminal.show();
    terminal.sendText(shellCommandLine(server.binary ?? lodeSetting(), ['setup'], vscode.env.shell, process.platform));
    // The server loads the models when it starts: restart it once the setup terminal is closed.
    const closed = vscode.window.onDidCloseTerminal((t) => {
      if (t === terminal) {
        closed.dispose();
        void server.restart();
      }
    });
    context.subscriptions.push(closed);
  };

  const promptSetup = (status: Status) => {
    const message = setupPrompt(status.dense);
    if (!message || prompted.has(status.vault)) {
      return;
    }
    prompted.add(status.vault);
    void vscode.window.showWarningMessage(message, 'Run lode setup', 'Details').then((pick) => {
      if (pick === 'Run lode setup') {
        runSetup(status.vault);
      } else if (pick === 'Details') {
        void vscode.commands.executeCommand('lode.showStatus');
      }
    });
  };

  const bar = new StatusBar(() => server.client, promptSetup);
  server.bar = bar;
  active = server;

  /** The client when it is running, else a message saying why not (and undefined). */
  const running = (): LodeClient | undefined => {
    const c = server.client;
    if (c && c.state === State.Running) {
      return c;
    }
    const state = bar.state;
    if (!vscode.workspace.isTrusted) {
      void showStatus(output, bar);
    } else if (state.kind === 'missing') {
      void reportStartFailure(state.message);
    } else if (state.kind === 'failed') {
      void reportStartFailure(`lode: \`lode serve\` could not start: ${state.error}`);
    } else {
      const why = state.kind === 'stopped' ? '`lode serve` has stopped (the "lode" output says why)' : 'the language server is still starting; try again in a moment';
      void vscode.window.showInformationMessage(`lode: ${why}.`, 'Show status').then((pick) => {
        if (pick) {
          void vscode.commands.executeCommand('lode.showStatus');
        }
      });
    }
    return undefined;
  };

  const askAt = async (pinned: boolean) => {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      return;
    }
    const c = running();
    if (!c) {
      return;
    }
    const sel = editor.selection;
    const range = sel.isEmpty ? editor.document.lineAt(sel.active.line).range : sel;
    const params = {
      command: 'lode.ask',
      arguments: [{ uri: editor.document.uri.toString(), range: c.code2ProtocolConverter.asRange(range), pinned }],
    };
    await asking((token) => c.sendRequest(ExecuteCommandRequest.type, params, token));
  };

  const showAnswer = async (uri: vscode.Uri) => {
    // Rendered: the answer reads as text, and its citation links open the notes (see `citationLink`).
    if ((await vscode.commands.getCommands(true)).includes('markdown.showPreview')) {
      try {
        await vscode.commands.executeCommand('markdown.showPreview', uri);
        return;
      } catch (e) {
        output.appendLine(`lode: the markdown preview failed (${errorText(e)}); showing the answer's source`);
      }
    }
    const doc = await vscode.workspace.openTextDocument(uri);
    const shown = doc.languageId === 'markdown' ? doc : await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
    await vscode.window.showTextDocument(shown, { preview: true });
  };

  const question = async () => {
    const c = running();
    if (!c) {
      return;
    }
    const text = await vscode.window.showInputBox({ prompt: 'Ask your notes' });
    if (!text) {
      return;
    }
    const uri = await asking(async (token) => {
      const answer = await c.sendRequest<Answer>('lode/ask', { question: text }, token);
      // Citation paths are relative to the vault `lode/ask` answers from: the first folder, the one `lode/status` reports.
      const status = await c.sendRequest<Status>('lode/status', {}, token);
      return answers.add(text, renderAnswer(text, answer, status.vault, citationHandler));
    });
    if (uri) {
      await showAnswer(uri);
    }
  };

  /** A citation link from an answer document: the note at the cited line, if it is a note in one of the vaults. */
  const openCitation = async (uri: vscode.Uri) => {
    const target = uri.path === '/open' ? parseCitationQuery(uri.query) : undefined;
    const roots = [
      ...(vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath),
      ...(bar.last?.vaults ?? []),
      ...[bar.last?.vault, vaultSetting()].filter((v): v is string => !!v),
    ];
    if (!target || !citationAllowed(target.path, roots)) {
      void vscode.window.showWarningMessage(`lode: not opening ${uri.toString(true)}: a citation link opens a note of your vault.`);
      return;
    }
    const at = new vscode.Position(target.line - 1, 0);
    const beside = vscode.workspace.getConfiguration('markdown').get<string>('links.openLocation') === 'beside';
    const editor = await vscode.window.showTextDocument(vscode.Uri.file(target.path), {
      selection: new vscode.Range(at, at),
      viewColumn: beside ? vscode.ViewColumn.Beside : vscode.ViewColumn.Active,
      preview: false,
    });
    editor.revealRange(new vscode.Range(at, at), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  };

  context.subscriptions.push(
    output,
    watcher,
    bar,
    server,
    vscode.workspace.registerTextDocumentContentProvider(AnswerDocuments.scheme, answers),
    vscode.window.registerUriHandler({ handleUri: (uri) => openCitation(uri) }),
    vscode.commands.registerCommand('lode.askLine', () => askAt(false)),
    vscode.commands.registerCommand('lode.askNote', () => askAt(true)),
    vscode.commands.registerCommand('lode.question', question),
    vscode.commands.registerCommand('lode.showStatus', () => showStatus(output, bar)),
    vscode.workspace.onDidGrantWorkspaceTrust(() => void server.start()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('lode.path') || e.affectsConfiguration('lode.vault')) {
        void server.restart();
      }
    }),
  );

  // Not awaited past the start: activation must not wait for the server's first reply.
  await server.start();
}

export async function deactivate(): Promise<void> {
  await active?.stop();
}
