// lode for VS Code: starts `lode serve` for markdown files and adds the "Lode: Ask" commands.
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions } from 'vscode-languageclient/node';

let client: LanguageClient | undefined;

interface Citation { path: string; line: number; quoted_span: string }
interface Claim { text: string; label: string; citations: Citation[] }
interface Answer { claims: Claim[]; abstained: boolean; abstain_reason: string | null }

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const config = vscode.workspace.getConfiguration('lode');
  const args = ['serve'];
  const vault = config.get<string>('vault');
  if (vault) {
    args.push('--vault', vault);
  }
  const serverOptions: ServerOptions = { command: config.get<string>('path') || 'lode', args };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file', language: 'markdown' }],
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/*.md') },
  };
  client = new LanguageClient('lode', 'lode', serverOptions, clientOptions);
  await client.start();

  const askAt = async (pinned: boolean) => {
    const editor = vscode.window.activeTextEditor;
    if (!editor || !client) {
      return;
    }
    const sel = editor.selection;
    const range = sel.isEmpty ? editor.document.lineAt(sel.active.line).range : sel;
    await client.sendRequest('workspace/executeCommand', {
      command: 'lode.ask',
      arguments: [{ uri: editor.document.uri.toString(), range: client.code2ProtocolConverter.asRange(range), pinned }],
    });
  };
  context.subscriptions.push(
    vscode.commands.registerCommand('lode.askLine', () => askAt(false)),
    vscode.commands.registerCommand('lode.askNote', () => askAt(true)),
    vscode.commands.registerCommand('lode.question', async () => {
      const question = await vscode.window.showInputBox({ prompt: 'Ask your notes' });
      if (!question || !client) {
        return;
      }
      const answer = await client.sendRequest<Answer>('lode/ask', { question });
      const lines = answer.abstained
        ? [answer.abstain_reason ?? "Your notes don't answer this."]
        : answer.claims.map((c) => `${c.text} — ${c.citations.map((x) => `${x.path}:${x.line}`).join(', ')} (${c.label})`);
      const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content: `# ${question}\n\n- ${lines.join('\n- ')}\n` });
      await vscode.window.showTextDocument(doc, { preview: true });
    }),
  );
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
