//! Real tokenizers and exact-length text.
//!
//! [`Tokenizer`] is either OpenAI's `cl100k_base` (built into the binary, no download) or a
//! Hugging Face `tokenizer.json` loaded from a file. Counting is always over a whole text, never
//! per streamed delta (BPE merges across delta boundaries, so per-delta counts over-count).
//!
//! [`Tokenizer::synthesize`] builds text of an exact token length from the tokenizer's own
//! single-token words: prompts for synthetic workloads, and the output of the embedded server.
//!
//! Counting runs in time linear in the text: BPE on one long piece without spaces is quadratic,
//! so a run of more than [`MAX_PIECE`] bytes without whitespace is counted in parts, cut where
//! the pre-tokenizer splits anyway (before punctuation that follows a word: CJK prose, which has
//! no spaces, splits at its punctuation) or, in a run with no such place, every [`MAX_PIECE`]
//! bytes. Text of words and sentences is counted exactly as one piece.
//! [`Tokenizer::count_at_most`] stops as soon as a limit is passed, so a server can refuse an
//! oversized prompt after a bounded amount of work.

use std::path::Path;
use std::sync::Arc;

use rand::Rng;
use rand::seq::IndexedRandom;

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("cannot read tokenizer file {path}: {message}")]
    Load { path: String, message: String },
    #[error("tokenizer {name} has too few plain single-token words ({found}) to synthesize text")]
    NoWords { name: String, found: usize },
}

enum Kind {
    Tiktoken(&'static tiktoken_rs::CoreBPE),
    HuggingFace(Box<tokenizers::Tokenizer>),
}

/// A loaded tokenizer plus its list of single-token words. Cheap to clone (shared).
#[derive(Clone)]
pub struct Tokenizer(Arc<Inner>);

struct Inner {
    kind: Kind,
    name: String,
    /// Words `w` such that `" " + w` is exactly one token, in vocabulary order.
    words: Vec<String>,
    /// The token id of each word (with its leading space).
    word_ids: Vec<u32>,
    /// Joined words count as exactly one token each (checked at load): synthesized text needs
    /// no re-encoding to verify its length.
    additive: bool,
    /// The longest token, in bytes: a text of `b` bytes holds at least `b / max_token_bytes` tokens.
    max_token_bytes: usize,
}

/// Longest run of bytes without whitespace that BPE sees at once (longer runs are split).
pub const MAX_PIECE: usize = 256;

/// `count_at_most` counts in parts of about this many bytes, checking the limit after each.
const COUNT_PART: usize = 64 * 1024;

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokenizer({})", self.0.name)
    }
}

/// How many single-token words to keep (the most frequent merges come first in the vocabulary).
const MAX_WORDS: usize = 4096;

impl Tokenizer {
    /// OpenAI's `cl100k_base`, compiled into the binary.
    pub fn cl100k() -> Result<Self, TokenizerError> {
        let bpe = tiktoken_rs::cl100k_base_singleton();
        let (mut words, mut ids) = (Vec::new(), Vec::new());
        for rank in 0..100_256u32 {
            if let Ok(bytes) = bpe.decode_bytes(&[rank])
                && let Ok(s) = std::str::from_utf8(&bytes)
                && let Some(w) = plain_word(s, ' ')
                && bpe.count_ordinary(s) == 1
            {
                words.push(w.to_string());
                ids.push(rank);
                if words.len() == MAX_WORDS {
                    break;
                }
            }
        }
        // the longest cl100k token is 128 bytes (runs of spaces and punctuation)
        let max_bytes =
            (0..100_256u32).filter_map(|r| bpe.decode_bytes(&[r]).ok()).map(|b| b.len()).max().unwrap_or(128);
        Self::finish(Kind::Tiktoken(bpe), "cl100k_base".into(), words, ids, max_bytes)
    }

    /// A Hugging Face `tokenizer.json` (read from the file only; nothing is downloaded).
    pub fn from_file(path: &Path) -> Result<Self, TokenizerError> {
        let load_err = |message: String| TokenizerError::Load { path: path.display().to_string(), message };
        if path.is_dir() {
            let hint = if path.join("tokenizer.json").is_file() {
                format!("; {} is there", path.join("tokenizer.json").display())
            } else {
                String::new()
            };
            return Err(load_err(format!(
                "is a directory: expected the path of a Hugging Face tokenizer.json file{hint}"
            )));
        }
        if !path.is_file() {
            return Err(load_err("no such file (expected a Hugging Face tokenizer.json)".into()));
        }
        let tk = tokenizers::Tokenizer::from_file(path).map_err(|e| load_err(e.to_string()))?;
        let mut vocab: Vec<(u32, String)> = tk.get_vocab(false).into_iter().map(|(t, i)| (i, t)).collect();
        vocab.sort();
        // a vocabulary entry is at most its own length in bytes once decoded (byte-level markers
        // such as 'Ġ' take two bytes for one), so this bounds the bytes per token from above
        let max_bytes = vocab.iter().map(|(_, t)| t.len()).max().unwrap_or(1).max(1);
        let (mut words, mut ids) = (Vec::new(), Vec::new());
        for (id, tok) in vocab {
            // byte-level BPE marks a leading space with 'Ġ', SentencePiece-style with '▁'
            let w = plain_word(&tok, 'Ġ').or_else(|| plain_word(&tok, '▁'));
            if let Some(w) = w {
                let spaced = format!(" {w}");
                if tk.encode(spaced.as_str(), false).map(|e| e.get_ids().to_vec()).ok() == Some(vec![id]) {
                    words.push(w.to_string());
                    ids.push(id);
                    if words.len() == MAX_WORDS {
                        break;
                    }
                }
            }
        }
        let name = path.display().to_string();
        Self::finish(Kind::HuggingFace(Box::new(tk)), name, words, ids, max_bytes)
    }

    /// `cl100k_base` when `path` is `None`, else the file.
    pub fn load(path: Option<&Path>) -> Result<Self, TokenizerError> {
        match path {
            Some(p) => Self::from_file(p),
            None => Self::cl100k(),
        }
    }

    fn finish(
        kind: Kind,
        name: String,
        words: Vec<String>,
        word_ids: Vec<u32>,
        max_token_bytes: usize,
    ) -> Result<Self, TokenizerError> {
        if words.len() < 64 {
            return Err(TokenizerError::NoWords { name, found: words.len() });
        }
        let mut t = Tokenizer(Arc::new(Inner { kind, name, words, word_ids, additive: false, max_token_bytes }));
        let additive = t.joins_exactly();
        Arc::get_mut(&mut t.0).expect("not shared yet").additive = additive;
        Ok(t)
    }

    /// Whether texts joined from single-token words count as one token per word: checked on
    /// every word once, and on random texts (byte-level BPE tokenizers pass; a tokenizer that
    /// normalizes or merges across spaces does not, and its synthesized text is re-encoded).
    fn joins_exactly(&self) -> bool {
        let words = &self.0.words;
        let all: Vec<&str> = words.iter().map(String::as_str).collect();
        if self.count(&join(&all)) != all.len() {
            return false;
        }
        let mut rng = check_rng(0x6a6f_696e);
        (0..4).all(|_| {
            let picked: Vec<&str> = (0..500).map(|_| words.choose(&mut rng).expect("words").as_str()).collect();
            self.count(&join(&picked)) == picked.len()
        })
    }

    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Token ids of `text`, without special tokens (no BOS), in time linear in its length (long
    /// runs without whitespace in parts, as [`Tokenizer::count`] counts them).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        for part in split_long_runs(text) {
            ids.extend(self.encode_piece(part));
        }
        ids
    }

    fn encode_piece(&self, text: &str) -> Vec<u32> {
        match &self.0.kind {
            Kind::Tiktoken(bpe) => bpe.encode_ordinary(text),
            Kind::HuggingFace(tk) => tk.encode(text, false).map(|e| e.get_ids().to_vec()).unwrap_or_default(),
        }
    }

    /// Number of tokens in `text`, without special tokens, in time linear in its length (see
    /// the module documentation: runs of over [`MAX_PIECE`] bytes without whitespace are counted
    /// in parts, which may count a token or two more per part than whole-text BPE would).
    pub fn count(&self, text: &str) -> usize {
        split_long_runs(text).map(|part| self.count_piece(part)).sum()
    }

    fn count_piece(&self, text: &str) -> usize {
        match &self.0.kind {
            Kind::Tiktoken(bpe) => bpe.count_ordinary(text),
            Kind::HuggingFace(tk) => tk.encode(text, false).map(|e| e.get_ids().len()).unwrap_or(0),
        }
    }

    /// The tokens of `texts` together (counted one after another), or `Err(at_least)` as soon as
    /// they pass `limit`: the work done is bounded by about `limit` tokens' worth of text, plus a
    /// check on the byte length (a text of `b` bytes has at least `b / max_token_bytes` tokens).
    pub fn count_at_most<'a>(
        &self,
        texts: impl IntoIterator<Item = &'a str> + Clone,
        limit: usize,
    ) -> Result<usize, usize> {
        self.at_most(texts, limit, |_, part| self.count(part))
    }

    /// [`Tokenizer::count_at_most`] keeping the tokens: each text's ids (encoded in the same
    /// parts, so their total is the count `count_at_most` gives), or `Err(at_least)` as soon as
    /// they pass `limit`. For a caller that needs both the count and the ids, one pass.
    pub fn encode_at_most<'a>(
        &self,
        texts: impl IntoIterator<Item = &'a str> + Clone,
        limit: usize,
    ) -> Result<Vec<Vec<u32>>, usize> {
        let mut out = vec![Vec::new(); texts.clone().into_iter().count()];
        self.at_most(texts, limit, |i, part| {
            let ids = self.encode(part);
            let n = ids.len();
            out[i].extend(ids);
            n
        })?;
        Ok(out)
    }

    /// Walks `texts` in parts of [`COUNT_PART`] bytes, `part(text index, part)` giving each
    /// part's tokens, and stops with `Err(at_least)` as soon as they pass `limit` (or at once
    /// when the byte length alone proves it): the bound both of the above keep.
    fn at_most<'a>(
        &self,
        texts: impl IntoIterator<Item = &'a str> + Clone,
        limit: usize,
        mut part: impl FnMut(usize, &str) -> usize,
    ) -> Result<usize, usize> {
        let bytes: usize = texts.clone().into_iter().map(str::len).sum();
        let floor = bytes.div_ceil(self.0.max_token_bytes);
        if floor > limit {
            return Err(floor);
        }
        let mut n = 0;
        for (i, text) in texts.into_iter().enumerate() {
            for p in parts(text, COUNT_PART) {
                n += part(i, p);
                if n > limit {
                    return Err(n);
                }
            }
        }
        Ok(n)
    }

    /// The longest token of the vocabulary, in bytes.
    pub fn max_token_bytes(&self) -> usize {
        self.0.max_token_bytes
    }

    /// Whether synthesized text is exact without re-encoding (see [`Tokenizer::synthesize`]).
    pub fn is_additive(&self) -> bool {
        self.0.additive
    }

    /// The single-token words this tokenizer offers (each is one token with a leading space).
    pub fn words(&self) -> &[String] {
        &self.0.words
    }

    /// Text of exactly `n` tokens (by this tokenizer), made of random single-token words.
    /// Returns the text and its token count (equal to `n` except in pathological cases). For an
    /// additive tokenizer (checked at load) the text is exact by construction and is not
    /// re-encoded, so building a prompt costs no tokenizer work.
    pub fn synthesize<R: Rng + ?Sized>(&self, n: usize, rng: &mut R) -> (String, usize) {
        let words = &self.0.words;
        let mut picked: Vec<&str> = (0..n).map(|_| words.choose(rng).expect("words").as_str()).collect();
        let mut text = join(&picked);
        if self.0.additive {
            return (text, n);
        }
        let mut count = self.count(&text);
        // Normalizers or prefix rules can shift the count by a token or two: adjust and re-check.
        for _ in 0..8 {
            if count == n {
                break;
            }
            if count > n {
                let drop = (count - n).min(picked.len());
                picked.truncate(picked.len() - drop);
            } else {
                for _ in 0..(n - count) {
                    picked.push(words.choose(rng).expect("words").as_str());
                }
            }
            text = join(&picked);
            count = self.count(&text);
        }
        (text, count)
    }

    /// `n` single-token words (each with a leading space), without re-encoding to verify: for
    /// byte-level BPE tokenizers (cl100k_base, GPT-2, Llama 3) words never merge across their
    /// leading spaces, so the text is exactly `n` tokens; the same `rng` state gives the same
    /// words, and a shorter `n` gives a prefix of a longer one.
    pub fn words_text<R: Rng + ?Sized>(&self, n: usize, rng: &mut R) -> String {
        let picked: Vec<&str> = (0..n).map(|_| self.word(rng)).collect();
        join(&picked)
    }

    /// The token ids of the words [`Tokenizer::words_text`] gives for the same `n` and `rng`
    /// state (it picks the same words).
    pub fn words_ids<R: Rng + ?Sized>(&self, n: usize, rng: &mut R) -> Vec<u32> {
        // the same draws as `word` (a pick among as many entries)
        (0..n).map(|_| *self.0.word_ids.choose(rng).expect("words")).collect()
    }

    /// One token's worth of text for streamed output: `" word"`.
    pub fn word<R: Rng + ?Sized>(&self, rng: &mut R) -> &str {
        self.0.words.choose(rng).expect("words")
    }
}

fn join(words: &[&str]) -> String {
    let mut s = String::with_capacity(words.len() * 7);
    for w in words {
        s.push(' ');
        s.push_str(w);
    }
    s
}

/// A fixed generator for the load-time checks.
fn check_rng(seed: u64) -> rand::rngs::SmallRng {
    use rand::SeedableRng;
    rand::rngs::SmallRng::seed_from_u64(seed)
}

/// `text` in pieces such that no piece holds a run of more than [`MAX_PIECE`] bytes without
/// whitespace: cuts fall only inside such runs, at the run's last word boundary (a character
/// that is neither a letter nor a digit after one that is, where pre-tokenizers split anyway:
/// CJK prose splits at its punctuation) in the run's second half, else at a character boundary.
/// A text of words and sentences is one piece.
fn split_long_runs(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let (mut start, mut run_start, mut i) = (0, 0, 0);
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        while i < bytes.len() {
            if bytes[i].is_ascii_whitespace() {
                run_start = i + 1;
            } else if i - run_start >= MAX_PIECE && text.is_char_boundary(i) {
                let cut = soft_cut(&text[run_start..i]).map_or(i, |k| run_start + k);
                let piece = &text[start..cut];
                (start, run_start) = (cut, cut);
                return Some(piece);
            }
            i += 1;
        }
        let piece = &text[start..];
        start = bytes.len();
        Some(piece)
    })
}

/// The last offset in the second half of `run` where a character that is not alphanumeric
/// follows one that is.
fn soft_cut(run: &str) -> Option<usize> {
    let mut after: Option<(usize, char)> = None;
    for (j, c) in run.char_indices().rev() {
        if j < run.len() / 2 {
            break;
        }
        if let Some((k, n)) = after
            && c.is_alphanumeric()
            && !n.is_alphanumeric()
        {
            return Some(k);
        }
        after = Some((j, c));
    }
    None
}

/// `text` in parts of about `size` bytes, cut at whitespace where one is near (else at a
/// character boundary).
fn parts(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() <= size {
            return Some(std::mem::take(&mut rest));
        }
        let mut cut = size;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        // prefer a cut just before whitespace within the last 1 KiB of the part
        if let Some(ws) = rest[..cut].rfind(char::is_whitespace).filter(|&w| w + 1024 >= cut && w > 0) {
            cut = ws;
        }
        let (head, tail) = rest.split_at(cut);
        rest = tail;
        Some(head)
    })
}

/// `marker` followed by 3–12 lowercase ASCII letters: returns the letters.
fn plain_word(tok: &str, marker: char) -> Option<&str> {
    let rest = tok.strip_prefix(marker)?;
    let ok = (3..=12).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_lowercase());
    ok.then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn shared(name: &str) -> Option<std::path::PathBuf> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../../shared/data/tokenizers")
            .join(name)
            .join("tokenizer.json");
        p.is_file().then_some(p)
    }

    #[test]
    fn cl100k_counts_and_synthesizes_exactly() {
        let t = Tokenizer::cl100k().unwrap();
        assert_eq!(t.encode("Hello world"), vec![9906, 1917]);
        assert!(t.words().len() >= 1000);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for n in [1, 2, 17, 128, 512, 2000] {
            let (text, c) = t.synthesize(n, &mut rng);
            assert_eq!(c, n);
            assert_eq!(t.count(&text), n);
        }
    }

    #[test]
    fn hf_files_from_shared_data() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        if let Some(p) = shared("gpt2") {
            let t = Tokenizer::from_file(&p).unwrap();
            assert_eq!(t.encode("Hello world"), vec![15496, 995]);
            assert_eq!(t.encode(" Claude"), vec![40559]);
            let (text, c) = t.synthesize(300, &mut rng);
            assert_eq!((c, t.count(&text)), (300, 300));
        }
        if let Some(p) = shared("llama3") {
            let t = Tokenizer::from_file(&p).unwrap();
            assert_eq!(&t.encode("Hello, my dog is cute.")[..3], &[9906, 11, 856]);
            let (_, c) = t.synthesize(257, &mut rng);
            assert_eq!(c, 257);
        }
    }

    #[test]
    fn words_text_is_exact_and_prefix_stable() {
        let t = Tokenizer::cl100k().unwrap();
        let a = t.words_text(512, &mut rand_chacha::ChaCha8Rng::seed_from_u64(5));
        let b = t.words_text(100, &mut rand_chacha::ChaCha8Rng::seed_from_u64(5));
        assert_eq!(t.count(&a), 512);
        let ids = t.words_ids(512, &mut rand_chacha::ChaCha8Rng::seed_from_u64(5));
        assert_eq!(t.encode(&a), ids, "the ids are the words' own, in order");
        assert!(a.starts_with(&b));
        assert_eq!(t.count(&(a.clone() + &b)), 612, "blocks concatenate to the sum of their tokens");
    }

    #[test]
    fn long_runs_are_counted_in_linear_time() {
        let t = Tokenizer::cl100k().unwrap();
        // natural text is one piece, counted exactly
        let natural = "Hello world, this is a test. ".repeat(1000);
        assert_eq!(split_long_runs(&natural).count(), 1);
        assert_eq!(t.count(&natural), t.encode(&natural).len());
        // 4 MB without a space: quadratic BPE would take minutes; in parts it takes milliseconds
        let blob = "a".repeat(4 << 20);
        let pieces: Vec<&str> = split_long_runs(&blob).collect();
        assert_eq!(pieces.len(), (4 << 20) / MAX_PIECE);
        assert!(pieces.iter().all(|p| p.len() == MAX_PIECE));
        let started = std::time::Instant::now();
        let n = t.count(&blob);
        assert!(n > 0 && n < blob.len());
        // generous: the point is minutes vs. well under a few seconds, on any machine
        assert!(started.elapsed().as_secs_f64() < 30.0);
        // CJK prose (no spaces) is cut only at its punctuation, so it counts as a whole
        let cjk = "我们今天在这里讨论大型语言模型的推理服务性能以及如何衡量它们的延迟和吞吐量。".repeat(40);
        let pieces: Vec<&str> = split_long_runs(&cjk).collect();
        assert!(pieces.len() > 1);
        assert!(pieces[1..].iter().all(|p| p.starts_with('。')), "cut before the full stop");
        assert_eq!(t.count(&cjk), t.encode(&cjk).len());
        // multi-byte characters are never cut inside
        let wide = "é".repeat(1000);
        assert!(split_long_runs(&wide).all(|p| p.chars().count() > 0));
        assert_eq!(split_long_runs(&wide).map(str::len).sum::<usize>(), wide.len());
    }

    #[test]
    fn count_at_most_stops_early() {
        let t = Tokenizer::cl100k().unwrap();
        let text = " hello".repeat(100_000);
        assert_eq!(t.count_at_most([text.as_str()], 200_000), Ok(100_000));
        let e = t.count_at_most([text.as_str()], 1000).unwrap_err();
        assert!(e > 1000 && e < 100_000, "stopped after about one part: {e}");
        // a huge text is refused by its byte length alone
        let huge = "x".repeat(10 << 20);
        assert!(t.count_at_most([huge.as_str()], 1000).is_err());
        assert_eq!(t.count_at_most(["a b", " c"], 10), Ok(t.count("a b") + t.count(" c")));
        // the same in one pass, keeping the ids
        let ids = t.encode_at_most([text.as_str()], 200_000).unwrap();
        assert_eq!(ids[0].len(), 100_000);
        assert!(t.encode_at_most([text.as_str()], 1000).unwrap_err() > 1000);
        assert!(t.encode_at_most([huge.as_str()], 1000).is_err());
        assert_eq!(t.encode_at_most(["a b", " c"], 10), Ok(vec![t.encode("a b"), t.encode(" c")]));
    }

    #[test]
    fn byte_level_tokenizers_are_additive() {
        assert!(Tokenizer::cl100k().unwrap().is_additive());
        if let Some(p) = shared("llama3") {
            assert!(Tokenizer::from_file(&p).unwrap().is_additive());
        }
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let e = Tokenizer::from_file(Path::new("/nonexistent/tokenizer.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/tokenizer.json"), "{e}");
    }
}
