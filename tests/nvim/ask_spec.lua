-- Driven by server/lode/tests/it/nvim.rs: real Neovim (headless) with the lode plugin against the
-- real `lode serve`. Asks with :LodeAsk, waits for the inserted answer, hovers its citation, runs
-- :LodeStatus and :checkhealth lode, and writes what it saw to $LODE_OUT as JSON.
local h = dofile(os.getenv('LODE_SPECS') .. '/harness.lua')
local out = {}

local ok, err = pcall(function()
  vim.opt.runtimepath:append(os.getenv('LODE_PLUGIN'))
  vim.cmd('filetype on')
  require('lode').setup({ cmd = { os.getenv('LODE_BIN'), 'serve' } })
  vim.cmd('edit ' .. os.getenv('LODE_NOTE'))
  out.nvim = vim.version().major .. '.' .. vim.version().minor .. '.' .. vim.version().patch

  local function client() return h.clients()[1] end

  assert(vim.wait(20000, function() return client() ~= nil and client().initialized end, 50), 'lode attached')

  -- Wait until the vault is indexed: the answer to the question exists.
  local ready = vim.wait(30000, function()
    local res = vim.lsp.buf_request_sync(0, 'lode/ask', { question = 'How often are staging certificates rotated?' }, 5000)
    for _, r in pairs(res or {}) do
      if r.result and r.result.index_partial == false and r.result.claims and #r.result.claims > 0 then return true end
    end
    return false
  end, 200)
  assert(ready, 'vault indexed')

  -- :LodeAsk on the question line inserts the verified answer below it.
  vim.api.nvim_win_set_cursor(0, { 3, 0 })
  vim.cmd('LodeAsk')
  local inserted = vim.wait(20000, function()
    for _, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
      if l:find('"lode ', 1, true) then return true end
    end
    return false
  end, 50)
  assert(inserted, 'answer inserted')
  out.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)

  -- Hover on the first citation link.
  for i, l in ipairs(out.lines) do
    local col = l:find('](', 1, true)
    if col and l:find('"lode ', 1, true) then
      local params = { textDocument = { uri = vim.uri_from_bufnr(0) }, position = { line = i - 1, character = col - 1 } }
      local res = vim.lsp.buf_request_sync(0, 'textDocument/hover', params, 10000)
      for _, r in pairs(res or {}) do
        if r.result then out.hover = r.result.contents.value end
      end
      break
    end
  end

  -- :LodeStatus echoes one line; the test compares its note count with lode/status's own.
  local res = vim.lsp.buf_request_sync(0, 'lode/status', vim.empty_dict(), 10000)
  for _, r in pairs(res or {}) do
    if r.result then out.status_notes = r.result.notes end
  end
  vim.cmd('messages clear')
  vim.cmd('LodeStatus')
  local echoed = vim.wait(10000, function()
    for line in vim.fn.execute('messages'):gmatch('[^\n]+') do
      if line:find('^lode: ') then
        out.status_message = line
        return true
      end
    end
    return false
  end, 50)
  assert(echoed, ':LodeStatus echoed a line')
  -- The status line for each state lode/status reports (docs/lsp-extensions.md).
  local fmt = require('lode').format_status
  out.status_forms = {
    loading = fmt({ notes = 3, passages = 10, dense = 'loading the embedding model', scanning = true }),
    embedding = fmt({ notes = 3, passages = 10, dense = { model = 'm', with_vectors = 4 } }),
    complete = fmt({ notes = 3, passages = 10, dense = { model = 'm', with_vectors = 10 } }),
    switching = fmt({ notes = 3, passages = 10, dense = { model = 'm', with_vectors = 10, switching = { to = 'n', with_vectors = 5 } } }),
    off = fmt({ notes = 3, passages = 10, dense = 'off: no ONNX Runtime' }),
    mended = fmt({ notes = 3, passages = 10, dense = { model = 'm', with_vectors = 0, lexical_only = 'the vector table is being rebuilt' } }),
  }

  -- :checkhealth lode opens its report in a new buffer, which becomes the current one.
  vim.cmd('checkhealth lode')
  out.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
end)
h.finish(out, ok and vim.NIL or tostring(err))
