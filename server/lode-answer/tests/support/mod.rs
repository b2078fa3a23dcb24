#![allow(unused_imports)] // each test binary uses part of it
//! The loopback model every answer test talks to (`lode_testing::llm`).

pub use lode_testing::llm::{completion, label_of, user_message, FakeLlm, Responder};
