; Block-grammar query used by lode's structural chunker (server/lode-core/src/chunk.rs).
; Each capture name assigns a role to a node type; the chunker walks the tree and asks
; this table what every node is. Nodes with no capture are transparent (walked through).
;
;   @section      heading section: its heading names the passages inside it
;   @heading      the heading line of a section (text goes into the heading path)
;   @container    a block split into its children when it does not fit (lists, quotes)
;   @item         a list item: one passage when it fits, else split into its children
;   @prose        paragraph-like text: sub-split at sentence boundaries
;   @lines        line-oriented text (code, tables, html): sub-split at line boundaries
;   @frontmatter  YAML/TOML metadata: never a passage

(section) @section
(atx_heading) @heading
(setext_heading) @heading

(list) @container
(block_quote) @container

(list_item) @item

(paragraph) @prose

(fenced_code_block) @lines
(indented_code_block) @lines
(pipe_table) @lines
(html_block) @lines

(minus_metadata) @frontmatter
(plus_metadata) @frontmatter
