//! The KV cache: a paged block pool, per-sequence block tables, and the KV manager that owns
//! them (allocation, growth, freeing, and the prefix cache).
//!
//! - [`BlockPool`]: fixed-size blocks with a free list (a stack: O(1) allocate and free) and
//!   reference counts (a prefix block can be shared by several sequences).
//! - [`BlockTable`]: one sequence's blocks, in token order.
//! - [`KvManager`]: what the scheduler talks to. It grows tables all-or-nothing, frees them, and,
//!   with prefix caching on, keeps the full blocks it has seen by content hash: a block whose last
//!   user left stays cached (evictable, least recently used first) until its space is needed, and
//!   a new sequence whose leading block hashes are cached shares those blocks instead of
//!   computing them again (vLLM's automatic prefix caching).
//!
//! Block hashes are chained, each over its parent's hash and its own content, so a hash stands
//! for the whole prefix up to the end of its block ([`block_hashes`]). The cache finds a block by
//! its hash in a [`HashIndex`].

pub mod alloc;
pub mod paged;
pub mod prealloc;

use crate::config::{EngineConfig, KvAlloc};

/// The allocation rule of `cfg` (`--kv-alloc`, `--prealloc`): here, beside the modules that
/// implement them, so that `alloc` (the trait) names none of them and nothing imports back.
pub fn rule(cfg: &EngineConfig) -> std::sync::Arc<dyn alloc::Allocation> {
    match cfg.kv_alloc {
        KvAlloc::Paged => std::sync::Arc::new(paged::Paged),
        KvAlloc::Prealloc => std::sync::Arc::new(prealloc::Reserve::new(cfg.prealloc, cfg.context())),
    }
}

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

    /// Another reference to a block: an allocated one (prefix sharing) or a kept one whose count
    /// is zero ([`BlockPool::release_keep`]). O(1).
    pub fn share(&mut self, b: BlockId) {
        self.refs[b as usize] += 1;
    }

    /// Drops one reference; the block returns to the free list when none remain. O(1).
    pub fn release(&mut self, b: BlockId) {
        if self.release_keep(b) {
            self.free.push(b);
        }
    }

    /// Drops one reference without freeing the block at zero (a cached block stays readable);
    /// returns whether none remain. O(1).
    pub fn release_keep(&mut self, b: BlockId) -> bool {
        let r = &mut self.refs[b as usize];
        assert!(*r > 0, "double free of block {b}");
        *r -= 1;
        *r == 0
    }

    /// Returns a kept block with no references to the free list. O(1).
    pub fn free_kept(&mut self, b: BlockId) {
        debug_assert_eq!(self.refs[b as usize], 0);
        self.free.push(b);
    }

    pub fn ref_count(&self, b: BlockId) -> u32 {
        self.refs[b as usize]
    }

    /// Brings in block `b`'s reference count ([`crate::prefetch`]).
    pub fn prefetch(&self, b: BlockId) {
        if let Some(r) = self.refs.get(b as usize) {
            crate::hint::prefetch(r);
        }
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
}

/// The chained hashes of the full blocks of a token sequence described by its segments
/// (`(content id, tokens)`: runs of tokens whose content is identified by the id). Block `i`'s
/// hash covers its parent's hash and the (segment, offset, length) pieces it holds, so equal
/// hashes mean equal prefixes up to the end of that block.
pub fn block_hashes(segments: &[(u64, u32)], block_size: u32) -> Vec<u64> {
    let bs = block_size.max(1);
    let total: u64 = segments.iter().map(|s| s.1 as u64).sum();
    let mut out = Vec::with_capacity((total / bs as u64) as usize);
    let (mut parent, mut h, mut filled) = (0x6b76_6361_6368_6521u64, 0u64, 0u32);
    for &(id, tokens) in segments {
        let mut offset = 0u32;
        while offset < tokens {
            let take = (bs - filled).min(tokens - offset);
            h = mix(&[h, id, offset as u64, take as u64]);
            filled += take;
            offset += take;
            if filled == bs {
                parent = mix(&[parent, h]);
                out.push(parent);
                (h, filled) = (0, 0);
            }
        }
    }
    out
}

/// A 64-bit mix of a few integers (splitmix64 over their sequence).
fn mix(parts: &[u64]) -> u64 {
    let mut h: u64 = 0x9E37_79B9_7F4A_7C15;
    for &p in parts {
        h ^= p;
        let mut z = h.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h = z ^ (z >> 31);
    }
    h
}

/// No block (an empty list link, an empty index slot).
const NIL: u32 = u32::MAX;

/// The prefix cache's index: block content hash → the block holding it, at most one block per
/// hash. An open-addressing table with linear probing, in one array of (hash, block) pairs, so
/// that a lookup or an insertion is one cache miss in a large cache and not two (a general hash
/// map keeps its control bytes apart from its entries); removal shifts the entries after it back
/// (no tombstones), so an evicted block's entry goes at once and the table never needs sweeping.
/// Its load stays at most one half: the table has twice as many slots as the pool has blocks, and
/// a block holds at most one entry.
#[derive(Debug, Clone)]
pub struct HashIndex {
    slots: Vec<(u64, BlockId)>,
    shift: u32,
    len: usize,
}

impl HashIndex {
    /// An index for at most `max` entries.
    pub fn new(max: usize) -> Self {
        let n = (2 * max).next_power_of_two().max(2);
        HashIndex { slots: vec![(0, NIL); n], shift: 64 - n.trailing_zeros(), len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where probing for `h` starts (Fibonacci hashing: the high bits of one multiply).
    #[inline]
    fn home(&self, h: u64) -> usize {
        (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding `h`, or the empty slot where probing for it ended.
    #[inline]
    fn find(&self, h: u64) -> Result<usize, usize> {
        let mut i = self.home(h);
        loop {
            let (k, b) = self.slots[i];
            if b == NIL {
                return Err(i);
            }
            if k == h {
                return Ok(i);
            }
            i = (i + 1) & self.mask();
        }
    }

    /// Brings in the slot where looking for `h` starts ([`crate::prefetch`]).
    #[inline]
    pub fn prefetch(&self, h: u64) {
        crate::hint::prefetch(&self.slots[self.home(h)]);
    }

    #[inline]
    pub fn get(&self, h: u64) -> Option<BlockId> {
        self.find(h).ok().map(|i| self.slots[i].1)
    }

    /// Maps `h` to `b` unless `h` is present; returns the block it maps to afterwards.
    #[inline]
    pub fn insert_new(&mut self, h: u64, b: BlockId) -> BlockId {
        debug_assert_ne!(b, NIL);
        match self.find(h) {
            Ok(i) => self.slots[i].1,
            Err(i) => {
                assert!(2 * (self.len + 1) <= self.slots.len(), "more entries than the index was sized for");
                self.slots[i] = (h, b);
                self.len += 1;
                b
            }
        }
    }

    /// Removes `h`'s entry, if any (backward-shift deletion: each entry after it in its probe run
    /// moves back into the hole if its home allows).
    pub fn remove(&mut self, h: u64) {
        let Ok(mut hole) = self.find(h) else { return };
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let (k, b) = self.slots[j];
            if b == NIL {
                break;
            }
            // the entry at j may fill the hole if the hole lies on its probe path (home..=j)
            if (j.wrapping_sub(self.home(k)) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = (k, b);
                hole = j;
            }
        }
        self.slots[hole] = (0, NIL);
        self.len -= 1;
    }
}

/// What the prefix cache keeps per block, in one place (one cache line holds a block's whole
/// record): the hash it is cached under, and its links in the evictable list.
#[derive(Debug, Clone, Copy)]
struct BlockMeta {
    hash: u64,
    cached: bool,
    prev: u32,
    next: u32,
}

const NO_META: BlockMeta = BlockMeta { hash: 0, cached: false, prev: NIL, next: NIL };

/// Prefix-cache counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CacheCounters {
    /// Blocks looked up at admission (a request's cacheable prompt blocks).
    pub queried_blocks: u64,
    /// Of those, blocks found cached.
    pub hit_blocks: u64,
    /// Cached blocks evicted to make room.
    pub evicted_blocks: u64,
}

/// The KV manager: the block pool, and the prefix cache when it is on.
#[derive(Debug, Clone)]
pub struct KvManager {
    pool: BlockPool,
    block_size: u32,
    caching: bool,
    /// hash → the cached block holding it.
    index: HashIndex,
    /// Per block: its hash when cached, and its links in the evictable list.
    meta: Vec<BlockMeta>,
    /// Cached blocks nobody references, least recently used at the head (an intrusive list).
    head: u32,
    tail: u32,
    evictable: u32,
    pub counters: CacheCounters,
    /// How a sequence's KV is handed out (paged, or reserved at admission).
    alloc: std::sync::Arc<dyn alloc::Allocation>,
}

impl KvManager {
    /// A paged manager of `blocks` blocks of `block_size` tokens.
    pub fn new(blocks: u32, block_size: u32, prefix_caching: bool) -> Self {
        Self::with_rule(blocks, block_size, prefix_caching, std::sync::Arc::new(paged::Paged))
    }

    /// A manager that hands out KV by `rule` ([`rule`]).
    pub fn with_rule(
        blocks: u32,
        block_size: u32,
        prefix_caching: bool,
        rule: std::sync::Arc<dyn alloc::Allocation>,
    ) -> Self {
        let n = if prefix_caching { blocks as usize } else { 0 };
        KvManager {
            alloc: rule,
            pool: BlockPool::new(blocks),
            block_size,
            caching: prefix_caching,
            index: HashIndex::new(n),
            meta: vec![NO_META; n],
            head: NIL,
            tail: NIL,
            evictable: 0,
            counters: CacheCounters::default(),
        }
    }

    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Tokens of KV a sequence reserves at admission ([`alloc::Allocation::reservation`]).
    pub fn reservation(&self, prompt: u64, max_output: u64) -> u64 {
        self.alloc.reservation(prompt, max_output)
    }

    /// Sequences the cache holds at once, where the allocation rule alone fixes it.
    pub fn seq_capacity(&self, kv_tokens: u64) -> Option<u64> {
        self.alloc.seq_capacity(kv_tokens)
    }

    pub fn capacity(&self) -> u32 {
        self.pool.capacity()
    }

    pub fn prefix_caching(&self) -> bool {
        self.caching
    }

    /// Blocks that can be handed out now: free ones and evictable cached ones.
    pub fn available(&self) -> u32 {
        self.pool.free_count() + self.evictable
    }

    /// Blocks referenced by running sequences.
    pub fn used(&self) -> u32 {
        self.capacity() - self.available()
    }

    /// Blocks holding cached content nobody references.
    pub fn evictable(&self) -> u32 {
        self.evictable
    }

    fn unlink(&mut self, b: BlockId) {
        let BlockMeta { prev: p, next: n, .. } = self.meta[b as usize];
        if p == NIL {
            self.head = n
        } else {
            self.meta[p as usize].next = n
        }
        if n == NIL {
            self.tail = p
        } else {
            self.meta[n as usize].prev = p
        }
        let m = &mut self.meta[b as usize];
        (m.prev, m.next) = (NIL, NIL);
        self.evictable -= 1;
    }

    fn push_lru(&mut self, b: BlockId) {
        let m = &mut self.meta[b as usize];
        (m.prev, m.next) = (self.tail, NIL);
        if self.tail == NIL {
            self.head = b
        } else {
            self.meta[self.tail as usize].next = b
        }
        self.tail = b;
        self.evictable += 1;
    }

    /// One block for a sequence: a free one, else the least recently used cached one (its
    /// content is dropped from the cache).
    fn take(&mut self) -> Option<BlockId> {
        if let Some(b) = self.pool.allocate() {
            return Some(b);
        }
        let b = self.head;
        if b == NIL {
            return None;
        }
        self.unlink(b);
        let m = &mut self.meta[b as usize];
        if std::mem::take(&mut m.cached) {
            let h = m.hash;
            self.index.remove(h);
        }
        self.counters.evicted_blocks += 1;
        self.pool.share(b); // 0 → 1: the caller's reference
        self.prefetch_next_eviction();
        Some(b)
    }

    /// Brings in what evicting the new head of the evictable list will touch (its index slot and
    /// reference count) and the record of the block after it. Evictions go in list order, which
    /// is the order blocks were freed in, long ago: without this each one waits for memory.
    fn prefetch_next_eviction(&self) {
        let Some(m) = self.meta.get(self.head as usize) else { return };
        if let Some(after) = self.meta.get(m.next as usize) {
            crate::hint::prefetch(after);
        }
        if m.cached {
            self.index.prefetch(m.hash);
        }
        self.pool.prefetch(self.head);
    }

    /// Grows `table` to hold `tokens` tokens. All-or-nothing: on failure nothing is taken.
    #[inline]
    pub fn grow(&mut self, table: &mut BlockTable, tokens: u64) -> bool {
        if tokens <= table.blocks.len() as u64 * self.block_size as u64 {
            return true; // the common case: the last block has room
        }
        self.grow_more(table, tokens)
    }

    fn grow_more(&mut self, table: &mut BlockTable, tokens: u64) -> bool {
        let need = tokens.div_ceil(self.block_size as u64) as usize;
        if need <= table.blocks.len() {
            return true;
        }
        let more = need - table.blocks.len();
        if more as u32 > self.available() {
            return false;
        }
        for _ in 0..more {
            table.blocks.push(self.take().expect("checked available blocks"));
        }
        true
    }

    /// Releases every block of `table` (the sequence finished or was preempted). Cached blocks
    /// nobody references any more stay cached, evictable.
    pub fn free(&mut self, table: &mut BlockTable) {
        for b in table.blocks.drain(..) {
            if !self.caching {
                self.pool.release(b);
            } else if self.pool.release_keep(b) {
                if self.meta[b as usize].cached {
                    self.push_lru(b);
                } else {
                    self.pool.free_kept(b);
                }
            }
        }
    }

    /// The cached block holding `h`, if any.
    #[inline]
    fn cached(&self, h: u64) -> Option<BlockId> {
        self.index.get(h)
    }

    /// How many of `hashes`' leading blocks are cached (0 with caching off). Counts the query.
    pub fn lookup(&mut self, hashes: &[u64]) -> usize {
        if !self.caching {
            return 0;
        }
        let hit = hashes.iter().take_while(|&&h| self.cached(h).is_some()).count();
        self.counters.queried_blocks += hashes.len() as u64;
        self.counters.hit_blocks += hit as u64;
        hit
    }

    /// How many of `hashes`' leading blocks are cached, without counting a query.
    pub fn peek(&self, hashes: &[u64]) -> usize {
        if !self.caching {
            return 0;
        }
        hashes.iter().take_while(|&&h| self.cached(h).is_some()).count()
    }

    /// How many of the cached blocks of `hashes` no sequence references (they sit in the LRU,
    /// counted as available).
    pub fn unreferenced(&self, hashes: &[u64]) -> u32 {
        hashes.iter().filter(|&&h| self.cached(h).is_some_and(|b| self.pool.ref_count(b) == 0)).count() as u32
    }

    /// Puts the cached blocks of `hashes[..n]` at the start of an empty `table` (one more
    /// reference each). `n` must not exceed what [`KvManager::lookup`] found.
    pub fn attach(&mut self, table: &mut BlockTable, hashes: &[u64]) {
        debug_assert!(table.blocks.is_empty());
        for h in hashes {
            let b = self.cached(*h).expect("attached blocks are cached");
            if self.pool.ref_count(b) == 0 {
                self.unlink(b);
            }
            self.pool.share(b);
            table.blocks.push(b);
        }
    }

    /// Caches the full blocks of `table` whose hashes are `hashes` (those already cached are
    /// left as they are). Call it once their tokens are computed.
    pub fn register(&mut self, table: &BlockTable, hashes: &[u64]) {
        self.register_from(table, hashes, 0);
    }

    /// As [`KvManager::register`], looking only at blocks from index `from` on: the caller knows
    /// the blocks before it are cached (a block the table holds cannot be evicted, so they stay
    /// cached). Returns the next such index: the first block, from `from` on, left uncached (its
    /// content is cached in another block), or the end of `hashes`. Calling it again with that
    /// index does exactly what calling [`KvManager::register`] would, in O(new blocks).
    pub fn register_from(&mut self, table: &BlockTable, hashes: &[u64], from: usize) -> usize {
        if !self.caching {
            return from;
        }
        let mut next = None;
        let n = hashes.len().min(table.blocks.len());
        let start = from.min(n);
        // a prefill registers many blocks at once: bring in their index slots together, so that
        // the misses overlap instead of coming one after the other
        if n - start > 1 {
            for &h in &hashes[start..n] {
                self.index.prefetch(h);
            }
        }
        for (i, (&b, &h)) in (start..n).zip(table.blocks[start..n].iter().zip(&hashes[start..n])) {
            if !self.meta[b as usize].cached {
                if self.index.insert_new(h, b) == b {
                    let m = &mut self.meta[b as usize];
                    (m.hash, m.cached) = (h, true);
                } else {
                    next.get_or_insert(i); // cached in another block
                }
            }
        }
        next.unwrap_or(from.max(n))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use proptest::prelude::*;

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
        let mut kv = KvManager::new(4, 16, false);
        let mut t = BlockTable::default();
        assert!(kv.grow(&mut t, 17)); // 2 blocks
        assert_eq!(t.len(), 2);
        assert!(kv.grow(&mut t, 32)); // still 2
        assert!(!kv.grow(&mut t, 100)); // needs 7: refused, nothing taken
        assert_eq!((t.len(), kv.available()), (2, 2));
        kv.free(&mut t);
        assert_eq!(kv.available(), 4);
    }

    #[test]
    fn block_hashes_by_hand() {
        // 40 tokens of segment 7 then 30 of segment 9, blocks of 16: four full blocks (64 tokens)
        let a = block_hashes(&[(7, 40), (9, 30)], 16);
        assert_eq!(a.len(), 4);
        // the same prefix gives the same leading hashes; a different second segment diverges at
        // the block where it starts (block 2 holds tokens 32..48: 8 of segment 7, 8 of 9)
        let b = block_hashes(&[(7, 40), (8, 30)], 16);
        assert_eq!(a[..2], b[..2]);
        assert_ne!(a[2], b[2]);
        // a hash stands for the whole prefix: the same block content after another prefix differs
        let c = block_hashes(&[(1, 16), (7, 40)], 16);
        assert_ne!(c[1], a[0]);
        // splitting a segment into two with other ids is different content
        assert_ne!(block_hashes(&[(7, 8), (7, 8)], 16), block_hashes(&[(7, 16)], 16));
        assert!(block_hashes(&[(7, 15)], 16).is_empty());
    }

    #[test]
    fn prefix_cache_shares_keeps_and_evicts() {
        let mut kv = KvManager::new(4, 16, true);
        let h = block_hashes(&[(1, 32)], 16);
        // a first sequence computes two blocks and registers them
        let mut t1 = BlockTable::default();
        assert_eq!(kv.lookup(&h), 0);
        assert!(kv.grow(&mut t1, 32));
        kv.register(&t1, &h);
        // a second one finds both cached and shares them
        let mut t2 = BlockTable::default();
        assert_eq!(kv.lookup(&h), 2);
        kv.attach(&mut t2, &h);
        assert_eq!(t2.blocks, t1.blocks);
        assert_eq!((kv.available(), kv.used()), (2, 2));
        kv.free(&mut t1);
        kv.free(&mut t2);
        // nobody uses them: cached, evictable, and available
        assert_eq!((kv.available(), kv.evictable()), (4, 2));
        assert_eq!(kv.lookup(&h), 2, "still cached");
        // room for 4 blocks: the 2 free ones first, then the least recently used cached ones
        let mut t3 = BlockTable::default();
        assert!(kv.grow(&mut t3, 48));
        assert_eq!(kv.evictable(), 1, "one cached block evicted");
        assert_eq!(kv.counters.evicted_blocks, 1);
        assert_eq!(kv.lookup(&h), 0, "the first block of the prefix is gone, so the chain misses");
        kv.free(&mut t3);
        assert_eq!(kv.available(), 4);
        assert_eq!(kv.counters, CacheCounters { queried_blocks: 8, hit_blocks: 4, evicted_blocks: 1 });
    }

    #[test]
    fn without_caching_nothing_is_kept() {
        let mut kv = KvManager::new(2, 16, false);
        let h = block_hashes(&[(1, 32)], 16);
        let mut t = BlockTable::default();
        assert!(kv.grow(&mut t, 32));
        kv.register(&t, &h);
        kv.free(&mut t);
        assert_eq!((kv.available(), kv.evictable(), kv.lookup(&h)), (2, 0, 0));
    }

    #[test]
    fn hash_index_probes_and_shifts_back() {
        // a table of 8 slots (for up to 4 entries); three keys with the same home and one with
        // the next home: they sit in one probe run
        let mut ix = HashIndex::new(4);
        assert_eq!(ix.slots.len(), 8);
        let home = ix.home(1);
        let same: Vec<u64> = (2..).filter(|&k| ix.home(k) == home).take(2).collect();
        let next = (2..).find(|&k| ix.home(k) == (home + 1) % 8).unwrap();
        let keys = [1, same[0], same[1]];
        for (b, &k) in keys.iter().enumerate() {
            assert_eq!(ix.insert_new(k, b as u32), b as u32);
        }
        assert_eq!(ix.insert_new(next, 9), 9); // its home is taken: it lands after the run
        assert_eq!(ix.insert_new(same[0], 7), 1, "present: the block it already maps to");
        assert_eq!((ix.len(), ix.get(next), ix.get(same[1])), (4, Some(9), Some(2)));
        // removing the run's head shifts the two keys of its home back, and `next` behind them
        ix.remove(1);
        assert_eq!(ix.slots[home], (same[0], 1));
        assert_eq!(ix.slots[(home + 1) % 8], (same[1], 2));
        assert_eq!(ix.slots[(home + 2) % 8], (next, 9));
        assert_eq!(ix.slots[(home + 3) % 8].1, NIL);
        assert_eq!((ix.get(1), ix.get(next), ix.len()), (None, Some(9), 3));
        ix.remove(1); // absent: nothing happens
        assert_eq!(ix.len(), 3);
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
            let mut kv = KvManager::new(cap, 16, false);
            let mut tables: HashMap<usize, BlockTable> = HashMap::new();
            for o in ops {
                match o {
                    Op::Grow(s, t) => {
                        let tb = tables.entry(s).or_default();
                        let before = tb.len();
                        let ok = kv.grow(tb, t);
                        if !ok { prop_assert_eq!(tb.len(), before); }
                    }
                    Op::Finish(s) | Op::Preempt(s) => {
                        if let Some(mut tb) = tables.remove(&s) {
                            let victim: Vec<BlockId> = tb.blocks.clone();
                            let free_before = kv.available();
                            kv.free(&mut tb);
                            // exactly the victim's blocks were freed
                            prop_assert_eq!(kv.available(), free_before + victim.len() as u32);
                            for b in victim { prop_assert_eq!(kv.pool.ref_count(b), 0); }
                        }
                    }
                }
                // no block owned twice; free + owned = capacity
                let mut owned = std::collections::HashSet::new();
                for tb in tables.values() {
                    for &b in &tb.blocks {
                        prop_assert!(owned.insert(b), "block {} owned twice", b);
                        prop_assert_eq!(kv.pool.ref_count(b), 1);
                    }
                }
                prop_assert_eq!(kv.available() as usize + owned.len(), cap as usize);
            }
            for (_, mut tb) in tables.drain() { kv.free(&mut tb); }
            prop_assert_eq!(kv.available(), cap);
        }

        /// The index answers as a map would, through insertions and removals that collide often
        /// (few distinct keys, a small table).
        #[test]
        fn hash_index_is_a_map(ops in proptest::collection::vec((any::<bool>(), 0u64..40, 0u32..1000), 1..400)) {
            let mut ix = HashIndex::new(20);
            let mut model: HashMap<u64, BlockId> = HashMap::new();
            for (insert, k, b) in ops {
                // spread the keys over the whole range, as content hashes are
                let k = k.wrapping_mul(0x2545_F491_4F6C_DD1D);
                if insert && model.len() < 20 {
                    let want = *model.entry(k).or_insert(b);
                    prop_assert_eq!(ix.insert_new(k, b), want);
                } else {
                    model.remove(&k);
                    ix.remove(k);
                }
                prop_assert_eq!(ix.len(), model.len());
                for j in 0u64..40 {
                    let j = j.wrapping_mul(0x2545_F491_4F6C_DD1D);
                    prop_assert_eq!(ix.get(j), model.get(&j).copied());
                }
            }
        }

        /// With prefix caching, sequences sharing prefixes: used + available = capacity, a block
        /// is referenced exactly by the tables holding it, and freeing everything makes every
        /// block available again.
        #[test]
        fn cache_invariants(ops in proptest::collection::vec((0usize..6, 0u64..3, 1u64..80, any::<bool>()), 1..200), cap in 4u32..40) {
            let mut kv = KvManager::new(cap, 16, true);
            let mut tables: HashMap<usize, BlockTable> = HashMap::new();
            for (s, prefix, len, finish) in ops {
                if finish {
                    if let Some(mut t) = tables.remove(&s) { kv.free(&mut t); }
                    continue;
                }
                if tables.contains_key(&s) { continue; }
                let h = block_hashes(&[(prefix, len as u32)], 16);
                let hit = kv.lookup(&h);
                let mut t = BlockTable::default();
                kv.attach(&mut t, &h[..hit]);
                if kv.grow(&mut t, len) {
                    kv.register(&t, &h);
                    tables.insert(s, t);
                } else {
                    kv.free(&mut t);
                }
                let mut refs: HashMap<BlockId, u32> = HashMap::new();
                for t in tables.values() { for &b in &t.blocks { *refs.entry(b).or_default() += 1; } }
                for (b, n) in &refs { prop_assert_eq!(kv.pool.ref_count(*b), *n); }
                prop_assert_eq!(kv.used() as usize, refs.len());
            }
            for (_, mut t) in tables.drain() { kv.free(&mut t); }
            prop_assert_eq!(kv.available(), cap);
            prop_assert_eq!(kv.used(), 0);
        }
    }
}
