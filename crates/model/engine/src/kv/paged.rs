//! PagedAttention: a sequence takes blocks as it grows and reserves nothing up front.

use super::alloc::Allocation;

/// Blocks as the sequence grows.
#[derive(Clone, Copy, Debug, Default)]
pub struct Paged;

impl Allocation for Paged {
    fn reservation(&self, _prompt: u64, _max_output: u64) -> u64 {
        0
    }
}
