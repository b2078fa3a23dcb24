-- Shared by the Neovim specs that server/lode/tests/it/nvim.rs drives: writing what a spec saw to
-- $LODE_OUT and quitting, and the running lode clients.
local M = {}

-- Writes `out` (with `err`, nil when the spec passed its own asserts) as JSON to $LODE_OUT, then quits.
function M.finish(out, err)
  out.error = err
  local f = io.open(os.getenv('LODE_OUT'), 'w')
  f:write(vim.fn.json_encode(out))
  f:close()
  vim.cmd('qall!')
end

-- The lode clients running now.
function M.clients()
  local found = {}
  for _, c in pairs((vim.lsp.get_clients or vim.lsp.get_active_clients)()) do
    if c.name == 'lode' then table.insert(found, c) end
  end
  return found
end

return M
