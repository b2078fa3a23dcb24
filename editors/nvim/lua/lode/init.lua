-- lode for Neovim: starts `lode serve` for markdown buffers and adds :LodeAsk, :LodeAskNote and
-- :LodeQuestion. Works with Neovim 0.7+ (vim.lsp.start_client), no lspconfig needed; an
-- lspconfig-style table is exported as `require('lode').lspconfig` for those who use it.
local M = {}

M.config = {
  cmd = { 'lode', 'serve' },
  filetypes = { 'markdown' },
  -- The vault is the nearest folder holding one of these, else the buffer's folder.
  root_markers = { '.lode', '.git', '.obsidian' },
}

local function root_for(bufnr)
  local path = vim.api.nvim_buf_get_name(bufnr)
  local dir = vim.fn.fnamemodify(path, ':p:h')
  for _, marker in ipairs(M.config.root_markers) do
    local found = vim.fn.finddir(marker, dir .. ';')
    if found == '' then found = vim.fn.findfile(marker, dir .. ';') end
    if found ~= '' then return vim.fn.fnamemodify(found, ':p:h:h') end
  end
  return dir
end

local clients = {}

local function attach(bufnr)
  local root = root_for(bufnr)
  local id = clients[root]
  if not id or vim.lsp.get_client_by_id(id) == nil then
    id = vim.lsp.start_client({
      name = 'lode',
      cmd = M.config.cmd,
      root_dir = root,
      workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    })
    clients[root] = id
  end
  if id then vim.lsp.buf_attach_client(bufnr, id) end
end

-- The lode client attached to the buffer, or nil after telling the user there is none.
local function client_for(bufnr)
  for _, c in pairs(vim.lsp.get_active_clients()) do
    if c.name == 'lode' and vim.lsp.buf_is_attached(bufnr, c.id) then return c end
  end
  vim.notify('lode: no language server attached to this buffer', vim.log.levels.WARN)
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
  client.request('workspace/executeCommand', { command = 'lode.ask', arguments = { args } }, function(err, result)
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
  client.request('lode/ask', { question = text }, function(err, answer)
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

M.lspconfig = {
  default_config = {
    cmd = M.config.cmd,
    filetypes = M.config.filetypes,
    root_dir = function(fname) return root_for(vim.fn.bufadd(fname)) end,
  },
}

function M.setup(user)
  M.config = vim.tbl_deep_extend('force', M.config, user or {})
  local group = vim.api.nvim_create_augroup('lode', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = M.config.filetypes,
    callback = function(ev) attach(ev.buf) end,
  })
  vim.api.nvim_create_user_command('LodeAsk', function(o) M.ask({ line1 = o.line1, line2 = o.line2 }) end, { range = true })
  vim.api.nvim_create_user_command('LodeAskNote', function(o) M.ask({ line1 = o.line1, line2 = o.line2, pinned = true }) end, { range = true })
  vim.api.nvim_create_user_command('LodeQuestion', function(o) M.question(o.args) end, { nargs = '+' })
end

return M
