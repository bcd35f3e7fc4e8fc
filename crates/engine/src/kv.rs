//! The paged KV cache allocator: fixed-size blocks, a free list, reference counts.
//!
//! A plain synchronous struct with O(1) allocate and free (a stack of free block ids). Blocks are
//! reference-counted so that prefix caching can share a block between sequences: `share` takes
//! another reference, `release` drops one and returns the block to the free list at zero.
//! Per-sequence block tables ([`BlockTable`]) live with the sequences.

/// A block's index in the pool.
pub type BlockId = u32;

#[derive(Debug, Clone)]
pub struct BlockPool {
    free: Vec<BlockId>,
    refs: Vec<u32>,
    capacity: u32,
}

impl BlockPool {
    pub fn new(capacity: u32) -> Self {
        // pop from the end: hand out low ids first
        BlockPool { free: (0..capacity).rev().collect(), refs: vec![0; capacity as usize], capacity }
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    pub fn free_count(&self) -> u32 {
        self.free.len() as u32
    }

    pub fn used_count(&self) -> u32 {
        self.capacity - self.free_count()
    }

    /// Takes a free block (reference count 1), or `None` when the pool is exhausted. O(1).
    pub fn allocate(&mut self) -> Option<BlockId> {
        let b = self.free.pop()?;
        debug_assert_eq!(self.refs[b as usize], 0);
        self.refs[b as usize] = 1;
        Some(b)
    }

    /// Another reference to an allocated block (prefix sharing). O(1).
    pub fn share(&mut self, b: BlockId) {
        debug_assert!(self.refs[b as usize] > 0, "sharing a free block");
        self.refs[b as usize] += 1;
    }

    /// Drops one reference; the block returns to the free list when none remain. O(1).
    pub fn release(&mut self, b: BlockId) {
        let r = &mut self.refs[b as usize];
        assert!(*r > 0, "double free of block {b}");
        *r -= 1;
        if *r == 0 {
            self.free.push(b);
        }
    }

    pub fn ref_count(&self, b: BlockId) -> u32 {
        self.refs[b as usize]
    }
}

/// One sequence's blocks, in token order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockTable {
    pub blocks: Vec<BlockId>,
}

impl BlockTable {
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Token slots the table holds.
    pub fn slots(&self, block_size: u32) -> u64 {
        self.blocks.len() as u64 * block_size as u64
    }

    /// Grows the table to hold `tokens` tokens. All-or-nothing: on failure nothing is taken.
    pub fn grow_to(&mut self, pool: &mut BlockPool, tokens: u64, block_size: u32) -> bool {
        let need = tokens.div_ceil(block_size as u64) as usize;
        if need <= self.blocks.len() {
            return true;
        }
        let more = need - self.blocks.len();
        if more as u32 > pool.free_count() {
            return false;
        }
        for _ in 0..more {
            self.blocks.push(pool.allocate().expect("checked free count"));
        }
        true
    }

    /// Releases every block (sequence finished or preempted).
    pub fn release_all(&mut self, pool: &mut BlockPool) {
        for b in self.blocks.drain(..) {
            pool.release(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn allocate_and_free() {
        let mut p = BlockPool::new(3);
        let a = p.allocate().unwrap();
        let b = p.allocate().unwrap();
        let c = p.allocate().unwrap();
        assert!(p.allocate().is_none());
        assert_eq!((a, b, c), (0, 1, 2));
        p.release(b);
        assert_eq!(p.free_count(), 1);
        assert_eq!(p.allocate(), Some(1));
    }

    #[test]
    fn shared_blocks_free_on_last_release() {
        let mut p = BlockPool::new(2);
        let a = p.allocate().unwrap();
        p.share(a);
        p.release(a);
        assert_eq!(p.free_count(), 1);
        p.release(a);
        assert_eq!(p.free_count(), 2);
    }

    #[test]
    fn tables_grow_all_or_nothing() {
        let mut p = BlockPool::new(4);
        let mut t = BlockTable::default();
        assert!(t.grow_to(&mut p, 17, 16)); // 2 blocks
        assert_eq!(t.len(), 2);
        assert!(t.grow_to(&mut p, 32, 16)); // still 2
        assert!(!t.grow_to(&mut p, 100, 16)); // needs 7: refused, nothing taken
        assert_eq!((t.len(), p.free_count()), (2, 2));
        t.release_all(&mut p);
        assert_eq!(p.free_count(), 4);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Grow(usize, u64),
        Finish(usize),
        Preempt(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0usize..8, 1u64..200).prop_map(|(s, t)| Op::Grow(s, t)),
            1 => (0usize..8).prop_map(Op::Finish),
            1 => (0usize..8).prop_map(Op::Preempt),
        ]
    }

    proptest! {
        #[test]
        fn invariants(ops in proptest::collection::vec(op(), 1..300), cap in 1u32..64) {
            let mut pool = BlockPool::new(cap);
            let mut tables: HashMap<usize, BlockTable> = HashMap::new();
            for o in ops {
                match o {
                    Op::Grow(s, t) => {
                        let tb = tables.entry(s).or_default();
                        let before = tb.len();
                        let ok = tb.grow_to(&mut pool, t, 16);
                        if !ok { prop_assert_eq!(tb.len(), before); }
                    }
                    Op::Finish(s) | Op::Preempt(s) => {
                        if let Some(mut tb) = tables.remove(&s) {
                            let victim: Vec<BlockId> = tb.blocks.clone();
                            let free_before = pool.free_count();
                            tb.release_all(&mut pool);
                            // exactly the victim's blocks were freed
                            prop_assert_eq!(pool.free_count(), free_before + victim.len() as u32);
                            for b in victim { prop_assert_eq!(pool.ref_count(b), 0); }
                        }
                    }
                }
                // no block owned twice; free + owned = capacity
                let mut owned = std::collections::HashSet::new();
                for tb in tables.values() {
                    for &b in &tb.blocks {
                        prop_assert!(owned.insert(b), "block {} owned twice", b);
                        prop_assert_eq!(pool.ref_count(b), 1);
                    }
                }
                prop_assert_eq!(pool.free_count() as usize + owned.len(), cap as usize);
            }
            for (_, mut tb) in tables.drain() { tb.release_all(&mut pool); }
            prop_assert_eq!(pool.free_count(), cap);
        }
    }
}
