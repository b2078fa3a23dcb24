; Inline-grammar query used by lode's link extractor (server/lode-core/src/links.rs).
;   @link.destination  target of an inline markdown link: [text](target)
;   @code              code spans: wiki-link syntax inside them is not a link

(inline_link (link_destination) @link.destination)
(code_span) @code
