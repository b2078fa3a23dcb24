---@brief
--- https://github.com/lode-notes/lode
---
--- lode: ask your markdown notes; every citation checked against the text it quotes. A language
--- server for a folder of notes (a vault): a verified answer under a question (the `lode.ask`
--- command), hover and goto on citations, link navigation and diagnostics.
---
--- Install the `lode` binary (`cargo install --locked --path server/lode` from a checkout), then
--- `lode setup` for semantic search. With Neovim 0.11 or later and this folder (or
--- nvim-lspconfig, which carries this file) on 'runtimepath':
---
--- ```lua
--- vim.lsp.enable('lode')
--- ```
---
--- The vault is the nearest folder holding `.lode`, `.obsidian` or `.git`. The plugin in
--- editors/nvim adds :LodeAsk, :LodeStatus and :checkhealth lode on top of this.
return {
  cmd = { 'lode', 'serve' },
  filetypes = { 'markdown' },
  root_markers = { '.lode', '.obsidian', '.git' },
}
