//! The `lode` binary end to end, as users and their tools drive it: one test binary (each
//! integration test file used to be its own, 400–800 MB each), one module per concern.

mod cli;
mod egress;
mod emacs;
mod embedder;
mod hostile;
mod install;
mod lsp;
mod mcp;
mod nvim;
mod setup;
mod shared;
mod support;
mod trust;
