//! The loopback model every answer test talks to (`lode_testing::llm`).
#![allow(unused_imports)] // each test module uses part of it

pub use lode_testing::llm::{completion, label_of, user_message, FakeLlm, Responder};
