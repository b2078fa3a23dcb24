-- lode for Neovim: starts `lode serve` for markdown buffers and adds :LodeAsk, :LodeAskNote,
-- :LodeQuestion and :LodeStatus; `:checkhealth lode` is lua/lode/health.lua. Works with Neovim
-- 0.7 (vim.lsp.start_client) through 0.11 (vim.lsp.start), no lspconfig needed; an
-- lspconfig-style table is exported as `require('lode').lspconfig` for those who use it.
local M = {}

M.config = {
  cmd = { 'lode', 'serve' },
  filetypes = { 'markdown' },
  -- The vault is the nearest folder holding one of these, else the buffer's folder.
  root_markers = { '.lode', '.git', '.obsidian' },
  -- A folder whose .lode/config.toml holds settings it may not set without your approval (an
  -- LLM endpoint, a runtime library, a bucket: docs/security.md): 'ask' asks once per session
  -- before starting lode there; 'restricted' starts lode without asking (lode ignores those
  -- settings until you run `lode trust`).
  trust = 'ask',
}

-- The last buffer holding a file that the user was in. `:checkhealth` reports on it, because by
-- the time a health check runs, the current buffer is the report's own scratch buffer.
M.last_file_buf = nil

function M.root_for(bufnr)
  local path = vim.api.nvim_buf_get_name(bufnr)
  local dir = path ~= '' and vim.fn.fnamemodify(path, ':p:h') or vim.fn.getcwd()
  for _, marker in ipairs(M.config.root_markers) do
    local found = vim.fn.finddir(marker, dir .. ';')
    if found == '' then found = vim.fn.findfile(marker, dir .. ';') end
    if found ~= '' then return vim.fn.fnamemodify(found, ':p:h:h') end
  end
  return dir
end

-- Client methods are called as `client:request(…)` from 0.11 on (the `client.request(…)` form is
-- deprecated there) and only as `client.request(…)` before 0.10.
local colon_calls = vim.fn.has('nvim-0.11') == 1

function M.request(client, method, params, handler, bufnr)
  if colon_calls then return client:request(method, params, handler, bufnr) end
  return client.request(method, params, handler, bufnr)
end

function M.request_sync(client, method, params, timeout_ms, bufnr)
  if colon_calls then return client:request_sync(method, params, timeout_ms, bufnr) end
  return client.request_sync(method, params, timeout_ms, bufnr)
end

-- Every running lode client, or those attached to `bufnr`. (`get_clients` is 0.10+;
-- `get_active_clients` is deprecated there.)
function M.clients(bufnr)
  local all = (vim.lsp.get_clients or vim.lsp.get_active_clients)()
  local found = {}
  for _, c in pairs(all) do
    if c.name == 'lode' and (bufnr == nil or vim.lsp.buf_is_attached(bufnr, c.id)) then
      table.insert(found, c)
    end
  end
  return found
end

local function client_config(root)
  return {
    name = 'lode',
    cmd = M.config.cmd,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
  }
end

-- Client ids by root, for Neovim 0.7 (vim.lsp.start keeps this bookkeeping itself).
local started = {}

-- The folder's trust, asked of lode itself: nil when nothing waits for approval, else the
-- question to ask (lode's notice and every setting it would approve, with its value) and the
-- hash of those settings. `lode trust --status` exits 3 while settings wait for approval.
function M.trust_notice(root)
  local exe = M.config.cmd[1]
  if vim.fn.executable(exe) ~= 1 then return nil end
  local cmd = { exe, 'trust', '--status', '--json', '--vault', root }
  local out, code
  if vim.system then
    -- stdout alone: a warning on stderr must not spoil the JSON.
    local r = vim.system(cmd, { text = true }):wait(10000)
    out, code = r.stdout or '', r.code
  else
    out = vim.fn.system(cmd)
    code = vim.v.shell_error
  end
  if code ~= 3 then return nil end
  local ok, status = pcall(vim.fn.json_decode, out)
  if not (ok and type(status) == 'table' and type(status.notice) == 'string') then
    return 'lode: this folder holds settings that need your approval; run `lode trust --status` in a terminal', nil
  end
  local lines = { status.notice, 'Approving accepts exactly these settings:' }
  for _, g in ipairs(status.guarded or {}) do table.insert(lines, '  ' .. g) end
  return table.concat(lines, '\n'), type(status.hash) == 'string' and status.hash or nil
end

-- Roots asked about this session: 'approved', 'restricted' or 'off'.
local decided = {}

local attach_now

local function attach(bufnr)
  local root = M.root_for(bufnr)
  if decided[root] == 'off' then return end
  if decided[root] == nil then
    local notice, hash = M.trust_notice(root)
    if notice == nil then
      decided[root] = 'approved'
    elseif M.config.trust ~= 'ask' then
      decided[root] = 'restricted'
      vim.notify(notice, vim.log.levels.WARN)
    else
      decided[root] = 'asking'
      -- Approving from here only what was shown: without the settings' hash, no "Approve".
      local choices = hash and { 'Approve (lode trust)', 'Start restricted', "Don't start" } or { 'Start restricted', "Don't start" }
      vim.schedule(function()
        -- Every line is shown before the question: pickers that replace vim.ui.select often
        -- show only a prompt's first line.
        local chunks = {}
        for line in notice:gmatch('[^\n]+') do table.insert(chunks, { line .. '\n' }) end
        vim.api.nvim_echo(chunks, true, {})
        vim.ui.select(choices, { prompt = notice }, function(choice)
          if choice == 'Approve (lode trust)' then
            -- What was shown is what is approved: lode refuses if the settings changed since.
            local cmd = { M.config.cmd[1], 'trust', '--vault', root, '--expect', hash }
            local said = vim.fn.system(cmd)
            if vim.v.shell_error ~= 0 then vim.notify(said, vim.log.levels.WARN) end
            decided[root] = vim.v.shell_error == 0 and 'approved' or 'restricted'
          elseif choice == 'Start restricted' then
            decided[root] = 'restricted'
          else
            decided[root] = 'off'
            return
          end
          if vim.api.nvim_buf_is_valid(bufnr) then attach_now(bufnr, root) end
        end)
      end)
      return
    end
  end
  if decided[root] == 'asking' then return end
  attach_now(bufnr, root)
end

attach_now = function(bufnr, root)
  if vim.lsp.start then
    -- vim.lsp.start reuses the client with the same name and root, and attaches the current
    -- buffer (0.8 has no bufnr option), hence nvim_buf_call.
    vim.api.nvim_buf_call(bufnr, function() vim.lsp.start(client_config(root), { bufnr = bufnr }) end)
    return
  end
  local id = started[root]
  if not id or vim.lsp.get_client_by_id(id) == nil then
    id = vim.lsp.start_client(client_config(root))
    started[root] = id
  end
  if id then vim.lsp.buf_attach_client(bufnr, id) end
end

-- The lode client attached to the buffer, or nil after telling the user there is none.
local function client_for(bufnr)
  local c = M.clients(bufnr)[1]
  if not c then vim.notify('lode: no language server attached to this buffer', vim.log.levels.WARN) end
  return c
end

-- Runs the `lode.ask` command on the current line (or the given line range), which inserts the
-- verified answer below it.
function M.ask(opts)
  opts = opts or {}
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then return end
  local first = (opts.line1 or vim.fn.line('.')) - 1
  local last = (opts.line2 or vim.fn.line('.')) - 1
  local last_text = vim.api.nvim_buf_get_lines(bufnr, last, last + 1, false)[1] or ''
  local args = {
    uri = vim.uri_from_bufnr(bufnr),
    range = { start = { line = first, character = 0 }, ['end'] = { line = last, character = #last_text } },
    pinned = opts.pinned or false,
  }
  M.request(client, 'workspace/executeCommand', { command = 'lode.ask', arguments = { args } }, function(err, result)
    if err then
      vim.notify('lode: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    elseif opts.on_done then
      opts.on_done(result)
    end
  end, bufnr)
end

-- Asks a question given as text and shows the answer in a floating window.
function M.question(text)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then return end
  M.request(client, 'lode/ask', { question = text }, function(err, answer)
    if err then
      vim.notify('lode: ' .. err.message, vim.log.levels.ERROR)
      return
    end
    local lines = { '# ' .. text, '' }
    if answer.abstained then table.insert(lines, answer.abstain_reason) end
    for _, c in ipairs(answer.claims or {}) do
      table.insert(lines, '- ' .. c.text .. '  (' .. c.label .. ')')
      for _, cit in ipairs(c.citations) do
        table.insert(lines, '    ' .. cit.path .. ':' .. cit.line)
      end
    end
    vim.lsp.util.open_floating_preview(lines, 'markdown', { border = 'rounded' })
  end, bufnr)
end

-- `n` with thousands separators: 5183 -> "5,183".
local function thousands(n)
  local s = tostring(math.floor(n))
  local out = s:reverse():gsub('(%d%d%d)', '%1,'):reverse()
  return (out:gsub('^,', ''))
end

-- One line for a `lode/status` reply: "lode: 5,183 notes · embedding 87% · scanning", "… · loading
-- model" while the embedder loads, "… · lexical only (<why>)" only when dense retrieval is off or
-- the vector table cannot serve now; nothing about vectors once every passage has one.
function M.format_status(st)
  local parts = { 'lode: ' .. thousands(st.notes) .. ' notes' }
  local function pct(with)
    -- Rounded down: 100% only when every passage has a vector.
    local p = st.passages > 0 and math.floor(100 * with / st.passages) or 100
    return math.min(p, 100)
  end
  if type(st.dense) == 'table' then
    local with = st.dense.with_vectors
    if st.dense.lexical_only then
      table.insert(parts, 'lexical only (' .. tostring(st.dense.lexical_only) .. ')')
    elseif type(st.dense.switching) == 'table' and type(st.dense.switching.with_vectors) == 'number' then
      table.insert(parts, 'embedding ' .. pct(st.dense.switching.with_vectors) .. '% (new model)')
    elseif type(with) ~= 'number' then
      table.insert(parts, 'vectors ?')
    elseif pct(with) < 100 then
      table.insert(parts, 'embedding ' .. pct(with) .. '%')
    end
  elseif tostring(st.dense):sub(1, 7) == 'loading' then
    table.insert(parts, 'loading model')
  else
    table.insert(parts, 'lexical only (' .. tostring(st.dense) .. ')')
  end
  if st.scanning then table.insert(parts, 'scanning') end
  return table.concat(parts, ' · ')
end

-- Sends `lode/status` and echoes the one-line summary (kept in :messages); `on_done(line, status)`
-- also gets it.
function M.status(on_done)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then return end
  -- The server wants a params member even though lode/status takes none.
  M.request(client, 'lode/status', vim.empty_dict(), function(err, st)
    if err or type(st) ~= 'table' then
      vim.notify('lode: lode/status failed: ' .. (err and err.message or 'no result'), vim.log.levels.ERROR)
      return
    end
    local line = M.format_status(st)
    vim.api.nvim_echo({ { line } }, true, {})
    if on_done then on_done(line, st) end
  end, bufnr)
end

M.lspconfig = {
  default_config = {
    cmd = M.config.cmd,
    filetypes = M.config.filetypes,
    root_dir = function(fname) return M.root_for(vim.fn.bufadd(fname)) end,
  },
}

function M.setup(user)
  M.config = vim.tbl_deep_extend('force', M.config, user or {})
  M.lspconfig.default_config.cmd = M.config.cmd
  M.lspconfig.default_config.filetypes = M.config.filetypes
  local group = vim.api.nvim_create_augroup('lode', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = M.config.filetypes,
    callback = function(ev) attach(ev.buf) end,
  })
  vim.api.nvim_create_autocmd('BufEnter', {
    group = group,
    callback = function(ev)
      if vim.bo[ev.buf].buftype == '' and vim.api.nvim_buf_get_name(ev.buf) ~= '' then M.last_file_buf = ev.buf end
    end,
  })
  vim.api.nvim_create_user_command('LodeAsk', function(o) M.ask({ line1 = o.line1, line2 = o.line2 }) end, { range = true })
  vim.api.nvim_create_user_command('LodeAskNote', function(o) M.ask({ line1 = o.line1, line2 = o.line2, pinned = true }) end, { range = true })
  vim.api.nvim_create_user_command('LodeQuestion', function(o) M.question(o.args) end, { nargs = '+' })
  vim.api.nvim_create_user_command('LodeStatus', function() M.status() end, { nargs = 0 })
  M.setup_done = true
end

return M
