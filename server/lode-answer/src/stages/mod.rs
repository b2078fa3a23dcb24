//! The answer path as named stages, in order: [`withhold`] (egress) → [`synthesize`] (and
//! parse the model's reply) → [`ladder`] (the gate, and each outcome onto its rung) → render
//! (`crate::render`). `crate::answer_gathered` only chains them.

pub(crate) mod ladder;
pub(crate) mod synthesize;
pub(crate) mod withhold;
