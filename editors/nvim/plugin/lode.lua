-- Loaded by Neovim from the plugin folder; call require('lode').setup({...}) to configure it.
if vim.g.loaded_lode then return end
vim.g.loaded_lode = true
