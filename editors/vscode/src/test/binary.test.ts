// Unit tests (node:test) of finding the lode binary before starting the language client, and of the command line the setup terminal runs.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { Kind, SearchEnv, binaryProblem, chooseBinary, probeFile, resolveExecutable, shellCommandLine } from '../binary';

/** A file system of the given paths and kinds. */
const fake = (files: Record<string, Kind>) => (f: string): Kind => files[f] ?? 'missing';
const linux = (PATH: string): SearchEnv => ({ platform: 'linux', PATH, home: '/home/me', cwd: '/work/vault' });

test('an absolute path is taken as it is', () => {
  const probe = fake({ '/opt/lode/bin/lode': 'executable' });
  assert.deepEqual(resolveExecutable('/opt/lode/bin/lode', linux('/usr/bin'), probe), { ok: true, path: '/opt/lode/bin/lode' });
  assert.deepEqual(resolveExecutable('~/bin/lode', linux(''), fake({ '/home/me/bin/lode': 'executable' })), { ok: true, path: '/home/me/bin/lode' });
  assert.deepEqual(resolveExecutable('tools/lode', linux(''), fake({ '/work/vault/tools/lode': 'executable' })), { ok: true, path: '/work/vault/tools/lode' });
});

test('a bare name is found on PATH: the first executable wins, empty and relative entries are skipped', () => {
  const probe = fake({ '/usr/local/bin/lode': 'file', '/home/me/.cargo/bin/lode': 'executable', '/opt/bin/lode': 'executable' });
  const res = resolveExecutable('lode', linux('::bin:/usr/local/bin:/home/me/.cargo/bin:/opt/bin'), probe);
  assert.deepEqual(res, { ok: true, path: '/home/me/.cargo/bin/lode' });
});

test('not found: every PATH folder searched, and the message says where to set it (naming ~/.cargo/bin/lode when it is there)', () => {
  const res = resolveExecutable('lode', linux('/usr/bin:/bin'), fake({}));
  assert.deepEqual(res, { ok: false, problem: 'not-found', path: '/usr/bin/lode', searched: ['/usr/bin/lode', '/bin/lode'] });
  const plain = binaryProblem('lode', res, linux('/usr/bin:/bin'), fake({}));
  assert.match(plain ?? '', /^lode: `lode` is not on the PATH VS Code was started with\. Set "lode\.path" to the lode binary's absolute path, or add its folder to PATH where your login shell reads it \(~\/\.profile\)/);
  const there = binaryProblem('lode', res, linux('/usr/bin:/bin'), fake({ '/home/me/.cargo/bin/lode': 'executable' }));
  assert.match(there ?? '', /It is at \/home\/me\/\.cargo\/bin\/lode: set "lode\.path" to that path/);
  const absolute = resolveExecutable('/opt/lode', linux('/usr/bin'), fake({}));
  assert.match(binaryProblem('/opt/lode', absolute, linux('/usr/bin'), fake({})) ?? '', /"lode\.path" is \/opt\/lode, and \/opt\/lode does not exist/);
});

test('a file without execute permission, or a folder, is said to be one', () => {
  const notExec = resolveExecutable('lode', linux('/usr/bin:/opt/bin'), fake({ '/usr/bin/lode': 'file' }));
  assert.deepEqual(notExec, { ok: false, problem: 'not-executable', path: '/usr/bin/lode', searched: ['/usr/bin/lode', '/opt/bin/lode'] });
  assert.match(binaryProblem('lode', notExec, linux('')) ?? '', /\/usr\/bin\/lode is not executable/);
  const folder = resolveExecutable('/opt/lode', linux(''), fake({ '/opt/lode': 'directory' }));
  assert.equal(folder.ok ? '' : folder.problem, 'directory');
  assert.match(binaryProblem('/opt/lode', folder, linux('')) ?? '', /is a folder/);
});

test('Windows: PATH separated by ";" and PATHEXT extensions tried', () => {
  const env: SearchEnv = { platform: 'win32', PATH: 'C:\\Windows;C:\\Users\\me\\.cargo\\bin', PATHEXT: '.COM;.EXE', home: 'C:\\Users\\me' };
  const res = resolveExecutable('lode', env, fake({ 'C:\\Users\\me\\.cargo\\bin\\lode.exe': 'executable' }));
  assert.deepEqual(res, { ok: true, path: 'C:\\Users\\me\\.cargo\\bin\\lode.exe' });
});

test('the real file system: an executable file, a plain file, a folder, nothing', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lode-bin-'));
  try {
    const exe = path.join(dir, 'lode');
    fs.writeFileSync(exe, '#!/bin/sh\n');
    fs.chmodSync(exe, 0o755);
    const plain = path.join(dir, 'plain');
    fs.writeFileSync(plain, '');
    fs.chmodSync(plain, 0o644);
    assert.equal(probeFile(exe), 'executable');
    assert.equal(probeFile(dir), 'directory');
    assert.equal(probeFile(path.join(dir, 'none')), 'missing');
    if (process.platform !== 'win32') {
      assert.equal(probeFile(plain), 'file');
      assert.deepEqual(resolveExecutable('lode', { platform: process.platform, PATH: `/nonexistent${path.delimiter}${dir}` }), { ok: true, path: exe });
      const res = resolveExecutable('plain', { platform: process.platform, PATH: dir });
      assert.equal(res.ok ? '' : res.problem, 'not-executable');
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the setup terminal’s command line is quoted for its shell', () => {
  assert.equal(shellCommandLine('/home/me/.cargo/bin/lode', ['setup'], '/bin/bash', 'linux'), '/home/me/.cargo/bin/lode setup');
  assert.equal(shellCommandLine("/home/me/my tools/it's/lode", ['setup'], '/usr/bin/zsh', 'darwin'), "'/home/me/my tools/it'\\''s/lode' setup");
  assert.equal(shellCommandLine('C:\\Program Files\\lode\\lode.exe', ['setup'], 'C:\\Program Files\\PowerShell\\7\\pwsh.exe', 'win32'), "& 'C:\\Program Files\\lode\\lode.exe' 'setup'");
  assert.equal(shellCommandLine('C:\\Program Files\\lode\\lode.exe', ['setup'], '', 'win32'), "& 'C:\\Program Files\\lode\\lode.exe' 'setup'");
  assert.equal(shellCommandLine('C:\\Program Files\\lode\\lode.exe', ['setup'], 'C:\\Windows\\System32\\cmd.exe', 'win32'), '"C:\\Program Files\\lode\\lode.exe" setup');
});

test('the bundled binary of a platform .vsix is used only when the user has no lode of their own', () => {
  const bundled = '/ext/lode-0.1.0-linux-x64/server/lode';
  const env = linux('/usr/bin:/home/me/.cargo/bin');
  // No lode on PATH, lode.path unset: the bundled one.
  assert.deepEqual(chooseBinary(undefined, bundled, env, fake({ [bundled]: 'executable' })), { ok: true, path: bundled });
  assert.deepEqual(chooseBinary('lode', bundled, env, fake({ [bundled]: 'executable' })), { ok: true, path: bundled });
  // A lode on PATH wins over it.
  const both = fake({ [bundled]: 'executable', '/home/me/.cargo/bin/lode': 'executable' });
  assert.deepEqual(chooseBinary(undefined, bundled, env, both), { ok: true, path: '/home/me/.cargo/bin/lode' });
  // So does lode.path; and a lode.path that leads nowhere is reported, not replaced.
  assert.deepEqual(chooseBinary('/opt/lode', bundled, env, fake({ [bundled]: 'executable', '/opt/lode': 'executable' })), { ok: true, path: '/opt/lode' });
  const wrong = chooseBinary('/opt/nothing/lode', bundled, env, fake({ [bundled]: 'executable' }));
  assert.equal(wrong.ok, false);
  // A universal .vsix (no server/lode) or a bundled file that is not executable: PATH's "not found".
  assert.deepEqual(chooseBinary(undefined, bundled, env, fake({})), { ok: false, problem: 'not-found', path: '/usr/bin/lode', searched: ['/usr/bin/lode', '/home/me/.cargo/bin/lode'] });
  assert.equal(chooseBinary(undefined, bundled, env, fake({ [bundled]: 'file' })).ok, false);
});
