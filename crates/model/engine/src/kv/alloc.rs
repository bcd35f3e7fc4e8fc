//! How KV memory is handed to a sequence: the rule the KV manager applies when it admits one.
//! Each rule is a file ([`super::paged`], [`super::prealloc`]) implementing [`Allocation`];
//! [`super::rule`] is where a configuration picks one, the only place that names them all.

/// An allocation rule.
pub trait Allocation: std::fmt::Debug + Send + Sync {
    /// Tokens of KV a sequence with `prompt` tokens that may generate `max_output` reserves
    /// when it is admitted (0: blocks as it grows).
    fn reservation(&self, prompt: u64, max_output: u64) -> u64;

    /// Sequences a cache of `kv_tokens` holds at once, where the rule alone fixes it.
    fn seq_capacity(&self, kv_tokens: u64) -> Option<u64> {
        let _ = kv_tokens;
        None
    }
}
