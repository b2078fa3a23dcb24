// lode for VS Code: starts `lode serve` for markdown files, shows the index's state in the status bar, and adds the "Lode: …" commands.
import { execFile } from 'child_process';
import * as vscode from 'vscode';
import { ExecuteCommandRequest, LanguageClient, LanguageClientOptions, ServerOptions, State } from 'vscode-languageclient/node';
import { Answer, Status, formatStatus, renderAnswer } from './format';

const STATUS_EVERY_MS = 5000;
/** Answers kept for "Ask a question…" documents; older ones read as "no longer kept". */
const KEPT_ANSWERS = 50;
const DOCTOR_TIMEOUT_MS = 120_000;

let client: LanguageClient | undefined;

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function lodePath(): string {
  return vscode.workspace.getConfiguration('lode').get<string>('path') || 'lode';
}

/**
 * "Ask a question…" answers as read-only markdown documents under `lode-answer:`. Unlike an
 * untitled document they never ask to be saved, and being markdown, VS Code's markdown support
 * makes their `file:` citation links clickable (Ctrl/Cmd+click; also in the preview).
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

/** The status bar item, fed by `lode/status` every few seconds and at each scan's start and end. */
class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('lode.status', vscode.StatusBarAlignment.Left, 10);
  private readonly timer: NodeJS.Timeout;
  private busy = false;
  // A refresh asked for while one is running runs after it, so a scan's end is never missed.
  private again = false;
  /** The last `lode/status` reply, for "Lode: Show status" and the answer links. */
  last: Status | undefined;

  constructor() {
    this.item.name = 'lode';
    this.item.command = 'lode.showStatus';
    this.item.text = '$(book) lode: starting…';
    this.item.tooltip = 'Click for `lode doctor`';
    this.item.show();
    this.timer = setInterval(() => void this.refresh(), STATUS_EVERY_MS);
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
    if (!client || client.state === State.Starting) {
      return;
    }
    if (client.state === State.Stopped) {
      this.show('$(warning) lode: not running', [`\`${lodePath()} serve\` is not running (see the "lode" output).`]);
      return;
    }
    try {
      // tower-lsp wants a params member even for a request without params.
      const status = await client.sendRequest<Status>('lode/status', {});
      this.last = status;
      const { text, details } = formatStatus(status);
      this.show(text, details);
    } catch (e) {
      this.show('$(warning) lode', [`lode/status failed: ${errorText(e)}`]);
    }
  }

  private show(text: string, details: string[]): void {
    this.item.text = text;
    this.item.tooltip = [...details, 'Click for `lode doctor`'].join('\n');
  }

  dispose(): void {
    clearInterval(this.timer);
    this.item.dispose();
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
  return bar.last?.vault || vscode.workspace.getConfiguration('lode').get<string>('vault') || vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
}

/** "Lode: Show status": the server's live state, then `lode doctor`'s report in the "lode" channel (shown even when it exits non-zero: that output is the explanation). */
async function showStatus(output: vscode.OutputChannel, bar: StatusBar): Promise<void> {
  await bar.refresh();
  // The channel is the language client's too: the report is appended after the server's log.
  output.appendLine(`\n──── lode status, ${new Date().toLocaleString()} ────`);
  output.show(true);
  if (bar.last) {
    output.appendLine('Language server:');
    for (const line of formatStatus(bar.last).details) {
      output.appendLine(`  ${line}`);
    }
    output.appendLine('');
  }
  const bin = lodePath();
  const vault = doctorVault(bar);
  const args = vault ? ['doctor', '--vault', vault] : ['doctor'];
  output.appendLine(`$ ${bin} ${args.join(' ')}`);
  await new Promise<void>((resolve) => {
    execFile(bin, args, { timeout: DOCTOR_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      output.append(stdout);
      if (stderr) {
        output.append(stderr);
      }
      if (err) {
        const code = (err as { code?: unknown }).code;
        if (code === 'ENOENT') {
          output.appendLine(`\n${bin} was not found: install lode (cargo install --locked --path server/lode) or set "lode.path".`);
        } else if (typeof code === 'number') {
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
  const config = vscode.workspace.getConfiguration('lode');
  const args = ['serve'];
  const vault = config.get<string>('vault');
  if (vault) {
    args.push('--vault', vault);
  }
  const output = vscode.window.createOutputChannel('lode');
  const bar = new StatusBar();
  const answers = new AnswerDocuments();
  const serverOptions: ServerOptions = { command: lodePath(), args };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file', language: 'markdown' }],
    outputChannel: output,
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/*.md') },
    middleware: {
      handleWorkDoneProgress: (token, params, next) => {
        next(token, params);
        if (typeof token === 'string' && token.startsWith('lode/scan/') && params.kind !== 'report') {
          void bar.refresh();
        }
      },
    },
  };
  client = new LanguageClient('lode', 'lode', serverOptions, clientOptions);

  const askAt = async (pinned: boolean) => {
    const editor = vscode.window.activeTextEditor;
    const c = client;
    if (!editor || !c) {
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
  const question = async () => {
    const text = await vscode.window.showInputBox({ prompt: 'Ask your notes' });
    const c = client;
    if (!text || !c) {
      return;
    }
    const doc = await asking(async (token) => {
      const answer = await c.sendRequest<Answer>('lode/ask', { question: text }, token);
      // Citation paths are relative to the vault `lode/ask` answers from: the first folder, the one `lode/status` reports.
      const status = await c.sendRequest<Status>('lode/status', {}, token);
      return vscode.workspace.openTextDocument(answers.add(text, renderAnswer(text, answer, status.vault)));
    });
    if (doc) {
      const shown = doc.languageId === 'markdown' ? doc : await vscode.languages.setTextDocumentLanguage(doc, 'markdown');
      await vscode.window.showTextDocument(shown, { preview: true });
    }
  };

  context.subscriptions.push(
    output,
    bar,
    vscode.workspace.registerTextDocumentContentProvider(AnswerDocuments.scheme, answers),
    vscode.commands.registerCommand('lode.askLine', () => askAt(false)),
    vscode.commands.registerCommand('lode.askNote', () => askAt(true)),
    vscode.commands.registerCommand('lode.question', question),
    vscode.commands.registerCommand('lode.showStatus', () => showStatus(output, bar)),
  );

  try {
    await client.start();
  } catch (e) {
    // Not awaited: activation must not wait for the user to read the message.
    void vscode.window
      .showErrorMessage(`lode: could not start \`${lodePath()} serve\`: ${errorText(e)}. Install lode and run \`lode setup\`, or set "lode.path".`, 'Show status')
      .then((pick) => pick && vscode.commands.executeCommand('lode.showStatus'));
    return;
  }
  void bar.refresh();
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
