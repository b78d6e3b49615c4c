//! Scaled dot-product attention, its weights and masks, and multi-head attention built from them.

pub(crate) mod attention_mask;
pub(crate) mod attention_probs;
pub(crate) mod heads;
pub(crate) mod sdpa;

pub use heads::{multi_head_attention, AttentionSpec, AttentionWeights};
