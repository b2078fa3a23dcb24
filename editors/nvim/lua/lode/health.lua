-- `:checkhealth lode`: the lode binary, `lode doctor --json` on the vault you are in, and the editor side.
local M = {}

-- vim.health.start/ok/… exist from 0.9; 0.7 and 0.8 have require('health').report_*.
local h = {}
do
  local new = vim.health and vim.health.start and vim.health
  local old = not new and ((vim.health and vim.health.report_start and vim.health) or require('health'))
  h.start = new and new.start or old.report_start
  h.ok = new and new.ok or old.report_ok
  h.info = new and new.info or old.report_info
  -- Advice is passed only when there is some: 0.7's report_warn/report_error reject a nil.
  local function with_advice(f)
    return function(msg, advice)
      if advice then return f(msg, advice) end
      return f(msg)
    end
  end
  h.warn = with_advice(new and new.warn or old.report_warn)
  h.error = with_advice(new and new.error or old.report_error)
end

local SETUP_ADVICE = 'run `lode setup`: it installs ONNX Runtime and the default embedding model into ~/.local/share/lode'

local function thousands(n)
  local out = tostring(math.floor(n)):reverse():gsub('(%d%d%d)', '%1,'):reverse()
  return (out:gsub('^,', ''))
end

-- The buffer the report is about: the current one unless it is the report itself.
local function subject_buffer(lode)
  local cur = vim.api.nvim_get_current_buf()
  if vim.bo[cur].buftype == '' and vim.api.nvim_buf_get_name(cur) ~= '' then return cur end
  local last = lode.last_file_buf
  if last and vim.api.nvim_buf_is_valid(last) then return last end
end

local function check_binary(bin)
  if vim.fn.executable(bin) ~= 1 then
    h.error(('`%s` is not an executable on PATH'):format(bin), {
      'install lode: cargo install --locked --path server/lode (from a clone of the lode repository)',
      "or point the plugin at it: require('lode').setup({ cmd = { '/path/to/lode', 'serve' } })",
    })
    return false
  end
  local version = vim.trim(vim.fn.system({ bin, '--version' }))
  h.ok(('`%s` is executable: %s (%s)'):format(bin, vim.fn.exepath(bin), version))
  return true
end

local function report_doctor(d)
  h.ok('lode ' .. tostring(d.version))

  local rt = d.runtime or {}
  if rt.found then
    h.ok(('ONNX Runtime %s: %s'):format(rt.version or '(version unknown)', tostring(rt.path)))
  else
    h.warn('ONNX Runtime not found: ' .. tostring(rt.error or 'no error given') .. ' (lode runs lexical-only without it)', { SETUP_ADVICE })
  end

  for _, m in ipairs(d.models or {}) do
    if not m.configured then
      if m.role == 'embedder' then
        h.warn('embedder: none configured, so retrieval is lexical only', { 'set [models] embedder in <vault>/.lode/config.toml, then ' .. SETUP_ADVICE })
      else
        h.ok(m.role .. ': none configured (optional)')
      end
    elseif m.loaded then
      h.ok(('%s: %s from %s'):format(m.role, tostring(m.id or m.name), tostring(m.path)))
    else
      local advice = m.role == 'embedder' and { SETUP_ADVICE } or { 'check [models] ' .. m.role .. ' in <vault>/.lode/config.toml' }
      h.error(('%s %s does not load: %s'):format(m.role, tostring(m.name), tostring(m.error)), advice)
    end
  end

  local cfg = d.config or {}
  if cfg.ok == false then
    h.error(('settings %s: %s'):format(tostring(cfg.path), tostring(cfg.error)), { 'fix the file; lode uses the defaults meanwhile' })
  elseif cfg.exists then
    h.ok(('settings: %s parses'):format(tostring(cfg.path)))
  else
    h.ok(('settings: defaults (%s does not exist)'):format(tostring(cfg.path)))
  end

  local v = d.vault or {}
  if v.error then
    h.error(('vault %s: %s'):format(tostring(v.path), tostring(v.error)))
  elseif not v.indexed then
    h.warn(('vault %s has no index yet'):format(tostring(v.path)), {
      'open a note of it here (the language server indexes the vault), or run `lode index --vault ' .. tostring(v.path) .. '`',
    })
  else
    h.ok(('vault %s: %s notes, %s passages'):format(tostring(v.path), thousands(v.notes or 0), thousands(v.passages or 0)))
    local vec = v.vectors or {}
    if not vec.model or vec.model == '' then
      h.warn('vectors: none (no embedder configured)')
    elseif (vec.with_vectors or 0) >= (vec.passages or 0) then
      h.ok(('vectors: all %s passages (%s)'):format(thousands(vec.passages or 0), vec.model))
    else
      local pct = math.floor(100 * vec.with_vectors / math.max(vec.passages, 1))
      h.warn(('vectors: %s of %s passages (%d%%, %s)'):format(thousands(vec.with_vectors), thousands(vec.passages), pct, vec.model), {
        'the language server embeds the rest in the background while it runs; `lode index` does it too',
      })
    end
    local p = v.pending or {}
    local pending = (p.new or 0) + (p.changed or 0) + (p.renamed or 0) + (p.deleted or 0)
    if pending == 0 then
      h.ok('the index matches the folder')
    else
      h.warn(('%d new, %d changed, %d renamed, %d deleted on disk since the last scan'):format(p.new or 0, p.changed or 0, p.renamed or 0, p.deleted or 0), {
        'the language server picks them up; or run `lode index`',
      })
    end
  end

  local e = d.egress or {}
  if e.error then
    h.error('egress rules: ' .. tostring(e.error))
  elseif e.withheld then
    h.ok(('egress: %d notes never go to a remote model'):format(e.withheld))
  end

  local problems = d.problems or {}
  if d.ok ~= false and #problems == 0 then
    h.ok('`lode doctor`: no problems')
  else
    local joined = table.concat(problems, '; ')
    local advice = { 'the lines above say what to do; `lode doctor` in a terminal prints the full report' }
    if joined:find('lode setup', 1, true) then table.insert(advice, 1, SETUP_ADVICE) end
    h.error(('`lode doctor` reports %d problem(s): %s'):format(#problems, joined), advice)
  end
end

-- JSON null decodes to vim.NIL, which is truthy: turned into nil so `x or default` works.
local function denil(v)
  if v == vim.NIL then return nil end
  if type(v) == 'table' then
    for k, x in pairs(v) do v[k] = denil(x) end
  end
  return v
end

local function check_doctor(bin, root)
  -- A non-zero exit is expected when doctor finds a problem; the JSON report is printed either way.
  local out = vim.fn.system({ bin, 'doctor', '--json', '--vault', root })
  local code = vim.v.shell_error
  -- system() mixes stderr (logs, ONNX Runtime warnings) into the output: the report is the one
  -- line that is a JSON object.
  local ok, d = false, nil
  for line in out:gmatch('[^\n]+') do
    if line:match('^%s*{') then
      ok, d = pcall(function() return denil(vim.fn.json_decode(line)) end)
      if ok and type(d) == 'table' then break end
    end
  end
  if not ok or type(d) ~= 'table' then
    h.error(('`%s doctor --json --vault %s` exited with %d and printed no report'):format(bin, root, code), {
      'a lode without `doctor` is too old: reinstall it (cargo install --locked --path server/lode)',
      'its output: ' .. vim.trim(out):sub(1, 400),
    })
    return
  end
  report_doctor(d)
end

local function check_editor(lode, bufnr)
  if not lode.setup_done then
    h.warn("require('lode').setup() has not run: no commands and no language server", { "call require('lode').setup({ cmd = { 'lode', 'serve' } }) in your init.lua" })
  end
  if not bufnr then
    h.info('no note buffer seen yet: open a markdown note to start the language server')
    return
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  local attached = lode.clients(bufnr)[1]
  if not attached then
    local ft = vim.bo[bufnr].filetype
    h.warn(('no lode client is attached to %s (filetype %s)'):format(name, ft ~= '' and ft or 'none'), {
      'lode attaches to the filetypes ' .. table.concat(lode.config.filetypes, ', ') .. '; `:set filetype?` shows the buffer\'s',
    })
    return
  end
  h.ok(('lode client %d is attached to %s (root %s)'):format(attached.id, name, tostring(attached.config.root_dir)))
  local res = lode.request_sync(attached, 'lode/status', vim.empty_dict(), 5000, bufnr)
  if res and res.result then
    h.ok('server: ' .. lode.format_status(res.result):gsub('^lode: ', ''))
  else
    h.warn('the server did not answer lode/status: ' .. tostring(res and res.err and res.err.message or 'timeout'))
  end
end

function M.check()
  local lode = require('lode')
  local bufnr = subject_buffer(lode)
  local root = bufnr and lode.root_for(bufnr) or vim.fn.getcwd()
  h.start('lode')
  local bin = lode.config.cmd[1]
  if check_binary(bin) then check_doctor(bin, root) end
  h.start('lode: editor')
  check_editor(lode, bufnr)
end

return M
