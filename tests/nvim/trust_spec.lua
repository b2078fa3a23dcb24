-- Driven by server/lode/tests/it/nvim.rs: the plugin on a folder whose .lode/config.toml holds
-- settings the user has not approved. vim.ui.select is answered with $LODE_CHOICE; the script
-- records what was asked, whether lode was running before the answer, and whether it runs after.
local h = dofile(os.getenv('LODE_SPECS') .. '/harness.lua')
local clients = h.clients
local out = {}

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
h.finish(out, ok and vim.NIL or tostring(err))
