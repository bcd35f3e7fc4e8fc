// Shared by the fuzz tests of every crate (`include!`d): the checked-in seed corpus under
// `fuzz/corpus/<target>/` and byte-level mutations of its seeds. Needs `proptest::prelude::*` in scope.

/// The checked-in seeds of one fuzz target (`fuzz/corpus/<target>/`), sorted by name.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    // the workspace's `fuzz/` is above every crate's directory, at whatever depth
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|a| a.join("fuzz/corpus"))
        .find(|p| p.is_dir())
        .expect("fuzz/corpus above the crate")
        .join(target);
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

/// One byte-level edit of a seed: overwrite, insert or delete at a position (taken modulo the
/// length), or splice in a token that parsers treat specially.
#[derive(Clone, Debug)]
enum Edit {
    Set(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Splice(usize, &'static [u8]),
}

const TOKENS: &[&[u8]] = &[
    b"\n", b"\r\n", b"\r", b"\"", b",", b":", b"{", b"}", b"[", b"]", b"\\", b"null", b"-1", b"1e999", b"0",
    b"4294967296", b"\xff", b"\xc3", b"\xef\xbb\xbf", b"data: ", b"[DONE]", b"..", b"(", b")", b"<=", b"p",
];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), proptest::sample::select(TOKENS)).prop_map(|(i, t)| Edit::Splice(i, t)),
    ]
}

fn mutate(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for e in edits {
        let at = |i: usize, n: usize| if n == 0 { 0 } else { i % n };
        match *e {
            Edit::Set(i, v) if !b.is_empty() => {
                let i = at(i, b.len());
                b[i] = v;
            }
            Edit::Insert(i, v) => b.insert(at(i, b.len() + 1), v),
            Edit::Delete(i) if !b.is_empty() => {
                b.remove(at(i, b.len()));
            }
            Edit::Splice(i, t) => {
                let i = at(i, b.len() + 1);
                b.splice(i..i, t.iter().copied());
            }
            _ => {}
        }
    }
    b
}

/// A mutated seed of `target`: a seed chosen by index, then up to `max_edits` edits.
fn mutated(target: &'static str, max_edits: usize) -> impl Strategy<Value = Vec<u8>> {
    let seeds = corpus(target);
    (0..seeds.len(), proptest::collection::vec(edit(), 0..=max_edits))
        .prop_map(move |(i, edits)| mutate(&seeds[i].1, &edits))
}
