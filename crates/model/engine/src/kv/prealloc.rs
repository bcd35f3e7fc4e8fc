//! Contiguous pre-allocation, as serving systems did before paged KV: a sequence reserves, when
//! admitted, the longest it may grow (the model's context, or its own prompt plus `max_tokens`).

use super::alloc::Allocation;
use crate::config::Prealloc;

/// A reservation at admission.
#[derive(Clone, Copy, Debug)]
pub struct Reserve {
    what: Prealloc,
    /// `--max-model-len` (the model's context when not set), tokens.
    context: u64,
}

impl Reserve {
    pub fn new(what: Prealloc, context: u64) -> Self {
        Reserve { what, context }
    }
}

impl Allocation for Reserve {
    fn reservation(&self, prompt: u64, max_output: u64) -> u64 {
        match self.what {
            Prealloc::MaxModelLen => self.context,
            Prealloc::Request => prompt + max_output,
        }
    }

    fn seq_capacity(&self, kv_tokens: u64) -> Option<u64> {
        (self.what == Prealloc::MaxModelLen).then(|| kv_tokens / self.context.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_by_hand() {
        let by_len = Reserve::new(Prealloc::MaxModelLen, 4096);
        assert_eq!(by_len.reservation(100, 50), 4096);
        // 100,000 tokens of KV hold 24 sequences of 4,096
        assert_eq!(by_len.seq_capacity(100_000), Some(24));
        let by_request = Reserve::new(Prealloc::Request, 4096);
        assert_eq!(by_request.reservation(100, 50), 150);
        assert_eq!(by_request.seq_capacity(100_000), None);
    }
}
