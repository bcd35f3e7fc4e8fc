//! Real tokenizers and exact-length text.
//!
//! [`Tokenizer`] is either OpenAI's `cl100k_base` (built into the binary, no download) or a
//! Hugging Face `tokenizer.json` loaded from a file. Counting is always over a whole text, never
//! per streamed delta (BPE merges across delta boundaries, so per-delta counts over-count).
//!
//! [`Tokenizer::synthesize`] builds text of an exact token length from the tokenizer's own
//! single-token words: prompts for synthetic workloads, and the output of the embedded server.

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
}

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
        let mut words = Vec::new();
        for rank in 0..100_256u32 {
            if let Ok(bytes) = bpe.decode_bytes(&[rank])
                && let Ok(s) = std::str::from_utf8(&bytes)
                && let Some(w) = plain_word(s, ' ')
                && bpe.count_ordinary(s) == 1
            {
                words.push(w.to_string());
                if words.len() == MAX_WORDS {
                    break;
                }
            }
        }
        Self::finish(Kind::Tiktoken(bpe), "cl100k_base".into(), words)
    }

    /// A Hugging Face `tokenizer.json` (read from the file only; nothing is downloaded).
    pub fn from_file(path: &Path) -> Result<Self, TokenizerError> {
        let load_err = |message: String| TokenizerError::Load { path: path.display().to_string(), message };
        if !path.is_file() {
            return Err(load_err("no such file (expected a Hugging Face tokenizer.json)".into()));
        }
        let tk = tokenizers::Tokenizer::from_file(path).map_err(|e| load_err(e.to_string()))?;
        let mut vocab: Vec<(u32, String)> = tk.get_vocab(false).into_iter().map(|(t, i)| (i, t)).collect();
        vocab.sort();
        let mut words = Vec::new();
        for (_, tok) in vocab {
            // byte-level BPE marks a leading space with 'Ġ', SentencePiece-style with '▁'
            let w = plain_word(&tok, 'Ġ').or_else(|| plain_word(&tok, '▁'));
            if let Some(w) = w {
                let spaced = format!(" {w}");
                if tk.encode(spaced.as_str(), false).map(|e| e.get_ids().len()).ok() == Some(1) {
                    words.push(w.to_string());
                    if words.len() == MAX_WORDS {
                        break;
                    }
                }
            }
        }
        let name = path.display().to_string();
        Self::finish(Kind::HuggingFace(Box::new(tk)), name, words)
    }

    /// `cl100k_base` when `path` is `None`, else the file.
    pub fn load(path: Option<&Path>) -> Result<Self, TokenizerError> {
        match path {
            Some(p) => Self::from_file(p),
            None => Self::cl100k(),
        }
    }

    fn finish(kind: Kind, name: String, words: Vec<String>) -> Result<Self, TokenizerError> {
        if words.len() < 64 {
            return Err(TokenizerError::NoWords { name, found: words.len() });
        }
        Ok(Tokenizer(Arc::new(Inner { kind, name, words })))
    }

    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Token ids of `text`, without special tokens (no BOS).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match &self.0.kind {
            Kind::Tiktoken(bpe) => bpe.encode_ordinary(text),
            Kind::HuggingFace(tk) => tk.encode(text, false).map(|e| e.get_ids().to_vec()).unwrap_or_default(),
        }
    }

    /// Number of tokens in `text`, without special tokens.
    pub fn count(&self, text: &str) -> usize {
        match &self.0.kind {
            Kind::Tiktoken(bpe) => bpe.count_ordinary(text),
            Kind::HuggingFace(_) => self.encode(text).len(),
        }
    }

    /// The single-token words this tokenizer offers (each is one token with a leading space).
    pub fn words(&self) -> &[String] {
        &self.0.words
    }

    /// Text of exactly `n` tokens (by this tokenizer), made of random single-token words.
    /// Returns the text and its verified token count (equal to `n` except in pathological cases).
    pub fn synthesize<R: Rng + ?Sized>(&self, n: usize, rng: &mut R) -> (String, usize) {
        let words = &self.0.words;
        let mut picked: Vec<&str> = (0..n).map(|_| words.choose(rng).expect("words").as_str()).collect();
        let mut text = join(&picked);
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
            .join("../../../shared/data/tokenizers")
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
        assert!(a.starts_with(&b));
        assert_eq!(t.count(&(a.clone() + &b)), 612, "blocks concatenate to the sum of their tokens");
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let e = Tokenizer::from_file(Path::new("/nonexistent/tokenizer.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/tokenizer.json"), "{e}");
    }
}
