-- Driven by server/lode/tests/nvim.rs: the plugin on a folder whose .lode/config.toml holds
-- settings the user has not approved. vim.ui.select is answered with $LODE_CHOICE; the script
-- records what was asked, whether lode was running before the answer, and whether it runs after.
local out = {}
local function finish(err)
  out.error = err
  local f = io.open(os.getenv('LODE_OUT'), 'w')
  f:write(vim.fn.json_encode(out))
  f:close()
  vim.cmd('qall!')
end

local function clients()
  local found = {}
  for _, c in pairs((vim.lsp.get_clients or vim.lsp.get_active_clients)()) do
    if c.name == 'lode' then table.insert(found, c) end
  end
  return found
end

local ok, err = pcall(function()
  vim.opt.runtimepath:append(os.getenv('LODE_PLUGIN'))
  vim.cmd('filetype on')
  local asked = {}
  vim.ui.select = function(items, opts, on_choice)
    table.insert(asked, { prompt = opts.prompt, items = items, running = #clients() })
    on_choice(os.getenv('LODE_CHOICE'))
  end
  require('lode').setup({ cmd = { os.getenv('LODE_BIN'), 'serve' } })
  vim.cmd('edit ' .. os.getenv('LODE_NOTE'))
  assert(vim.wait(10000, function() return #asked > 0 end, 50), 'asked')
  vim.wait(os.getenv('LODE_CHOICE') == "Don't start" and 1500 or 20000, function() return #clients() > 0 end, 50)
  out.running = #clients()
  -- Another note of the same folder: not asked again this session.
  vim.cmd('edit ' .. os.getenv('LODE_NOTE2'))
  vim.wait(500)
  out.asked = asked
end)
finish(ok and vim.NIL or tostring(err))
