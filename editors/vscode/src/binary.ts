// Finding the `lode` binary the way spawning it would, with the PATH the extension host has, so a
// missing binary is reported once, by the extension, before the language client tries (and fails
// with its own notifications). No `vscode` import: unit-tested under plain Node.
import * as fs from 'fs';
import * as path from 'path';

/** What a path is: an executable file, a file without execute permission, a folder, or nothing. */
export type Kind = 'executable' | 'file' | 'directory' | 'missing';
export type Probe = (file: string) => Kind;

/** The environment a bare command name is looked up in. */
export interface SearchEnv {
  platform: NodeJS.Platform;
  /** The PATH of the extension host (which, for a VS Code started from the desktop, comes from the login shell). */
  PATH?: string;
  /** Windows: the extensions a bare name may lack (`.COM;.EXE;…`). */
  PATHEXT?: string;
  /** The user's home folder, for `~/…`. */
  home?: string;
  /** The folder a relative path with a separator is resolved against (the server's working folder: the first workspace folder). */
  cwd?: string;
}

export type Resolution =
  | { ok: true; path: string }
  | { ok: false; problem: 'not-found' | 'not-executable' | 'directory'; path: string; searched: string[] };

/** The file system's answer for `file`; on Windows any file counts as executable (it has no execute bit). */
export function probeFile(file: string): Kind {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch {
    return 'missing';
  }
  if (stat.isDirectory()) {
    return 'directory';
  }
  if (process.platform === 'win32') {
    return 'executable';
  }
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return 'executable';
  } catch {
    return 'file';
  }
}

function pathApi(platform: NodeJS.Platform): path.PlatformPath {
  return platform === 'win32' ? path.win32 : path.posix;
}

/** `file` and, on Windows when it has no extension, `file` with each PATHEXT extension. */
function candidates(file: string, env: SearchEnv): string[] {
  const p = pathApi(env.platform);
  if (env.platform !== 'win32' || p.extname(file) !== '') {
    return [file];
  }
  const exts = (env.PATHEXT || '.COM;.EXE;.BAT;.CMD').split(';').filter((e) => e.startsWith('.'));
  return exts.map((e) => file + e.toLowerCase());
}

/**
 * Where `command` (the `lode.path` setting) leads: an absolute path (`~/…` expanded) is taken as
 * it is; a relative path with a separator is resolved against `env.cwd`; a bare name is looked up
 * in each PATH folder in order (empty entries skipped), the first executable file winning. A file
 * found without execute permission, or a folder, is reported as such rather than as "not found".
 */
export function resolveExecutable(command: string, env: SearchEnv, probe: Probe = probeFile): Resolution {
  const p = pathApi(env.platform);
  let cmd = command.trim();
  if (env.home && (cmd === '~' || cmd.startsWith('~/') || (env.platform === 'win32' && cmd.startsWith('~\\')))) {
    cmd = p.join(env.home, cmd.slice(1));
  }
  const hasSeparator = cmd.includes('/') || (env.platform === 'win32' && cmd.includes('\\'));
  let dirs: string[];
  let name: string;
  if (p.isAbsolute(cmd) || hasSeparator) {
    const abs = p.isAbsolute(cmd) ? cmd : p.resolve(env.cwd ?? p.sep, cmd);
    dirs = [p.dirname(abs)];
    name = p.basename(abs);
  } else {
    const delimiter = env.platform === 'win32' ? ';' : ':';
    dirs = (env.PATH ?? '').split(delimiter).filter((d) => d.trim() !== '' && p.isAbsolute(d));
    name = cmd;
  }
  const searched: string[] = [];
  let problem: { problem: 'not-executable' | 'directory'; path: string } | undefined;
  for (const dir of dirs) {
    for (const file of candidates(p.join(dir, name), env)) {
      searched.push(file);
      const kind = probe(file);
      if (kind === 'executable') {
        return { ok: true, path: file };
      }
      if (kind === 'file' && problem?.problem !== 'not-executable') {
        problem = { problem: 'not-executable', path: file };
      } else if (kind === 'directory' && !problem) {
        problem = { problem: 'directory', path: file };
      }
    }
  }
  if (problem) {
    return { ok: false, ...problem, searched };
  }
  return { ok: false, problem: 'not-found', path: searched[0] ?? cmd, searched };
}

/**
 * The binary to run: `setting` (the user's `lode.path`) when it is set; else `lode` on PATH; else
 * the binary a platform-specific .vsix carries (`bundled`, `<extension>/server/lode`), when it is
 * there. A `lode` of the user's own (set, or on PATH) always wins over the bundled one; a set
 * `lode.path` that leads nowhere is reported, not replaced.
 */
export function chooseBinary(setting: string | undefined, bundled: string | undefined, env: SearchEnv, probe: Probe = probeFile): Resolution {
  if (setting && setting.trim() !== '' && setting.trim() !== 'lode') {
    return resolveExecutable(setting, env, probe);
  }
  const onPath = resolveExecutable('lode', env, probe);
  if (onPath.ok || !bundled) {
    return onPath;
  }
  if (probe(bundled) === 'executable') {
    return { ok: true, path: bundled };
  }
  return onPath;
}

/** Where `cargo install` and common installers put a binary, to point at when it is not on PATH. */
export function usualPlaces(env: SearchEnv): string[] {
  if (!env.home) {
    return [];
  }
  const p = pathApi(env.platform);
  const exe = env.platform === 'win32' ? 'lode.exe' : 'lode';
  return [p.join(env.home, '.cargo', 'bin', exe), p.join(env.home, '.local', 'bin', exe)];
}

/**
 * The one message for a `lode.path` that does not lead to an executable: what is wrong and the
 * fix, naming where the binary is when it is in one of the usual places.
 */
export function binaryProblem(command: string, res: Resolution, env: SearchEnv, probe: Probe = probeFile): string | undefined {
  if (res.ok) {
    return undefined;
  }
  switch (res.problem) {
    case 'not-executable':
      return `lode: ${res.path} is not executable: make it executable (chmod +x), or set "lode.path" to the lode binary.`;
    case 'directory':
      return `lode: ${res.path} is a folder: set "lode.path" to the lode binary.`;
    case 'not-found': {
      const p = pathApi(env.platform);
      const bare = !(p.isAbsolute(command.trim()) || command.includes('/') || command.includes('\\') || command.trim().startsWith('~'));
      if (!bare) {
        return `lode: "lode.path" is ${command.trim()}, and ${res.path} does not exist: set it to the lode binary's absolute path.`;
      }
      const at = usualPlaces(env).find((f) => probe(f) === 'executable');
      const hint = at
        ? ` It is at ${at}: set "lode.path" to that path, or add its folder to PATH where your login shell reads it${env.platform === 'win32' ? '' : ' (~/.profile)'} and restart VS Code.`
        : ` Set "lode.path" to the lode binary's absolute path, or add its folder to PATH where your login shell reads it${env.platform === 'win32' ? '' : ' (~/.profile)'} and restart VS Code.`;
      return `lode: \`${command.trim()}\` is not on the PATH VS Code was started with.${hint}`;
    }
  }
}

/** `s` as one word for a POSIX shell (bash, zsh, sh, fish): as it is when nothing in it is special, else single-quoted. */
function posixWord(s: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * The command line that runs `bin` with `args` in a terminal whose shell is `shell` (VS Code's
 * `env.shell`; empty means the platform's default, PowerShell on Windows): PowerShell needs the
 * call operator before a quoted path, cmd double quotes, other shells single quotes.
 */
export function shellCommandLine(bin: string, args: string[], shell: string | undefined, platform: NodeJS.Platform): string {
  const name = (shell ?? '').split(/[\\/]/).pop()!.toLowerCase().replace(/\.exe$/, '');
  const powershell = name === 'pwsh' || name === 'powershell' || (name === '' && platform === 'win32');
  if (powershell) {
    const q = (s: string) => `'${s.replace(/'/g, "''")}'`;
    return `& ${q(bin)}${args.map((a) => ` ${q(a)}`).join('')}`;
  }
  if (name === 'cmd') {
    const q = (s: string) => (/[\s&()^|<>"]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
    return [bin, ...args].map(q).join(' ');
  }
  return [bin, ...args].map(posixWord).join(' ');
}
