//! `lexical`: a deterministic embedder that hashes word unigrams, word bigrams and character
//! trigrams into a fixed dimension (signed feature hashing), then L2-normalises. It knows no
//! synonyms, but shares words and word pieces well, costs microseconds, and needs nothing.

use super::{EmbedError, Embedder};
use crate::domain::fnv1a;

/// The config name.
pub(super) const NAME: &str = "lexical";
/// The id stored with every vector; bump the version when the features change.
const ID: &str = "lexical-v1";
/// The vector dimension.
const DIMENSION: usize = 384;

/// Words too common to tell texts apart.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "do", "for", "from", "has", "have", "i", "if",
    "in", "is", "it", "its", "me", "my", "of", "on", "or", "so", "that", "the", "this", "to", "was", "we",
    "what", "with", "you", "your",
];

/// The built-in lexical embedder.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lexical;

impl Lexical {
    /// The embedder.
    pub fn new() -> Lexical {
        Lexical
    }

    /// Embeds one text.
    pub fn embed_one(text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; DIMENSION];
        let lowered = text.to_lowercase();
        let words: Vec<&str> = lowered
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty() && !STOPWORDS.contains(word))
            .collect();
        for word in &words {
            add(&mut vector, &[b"w:", word.as_bytes()], 1.0);
            let padded: Vec<char> = format!("^{word}$").chars().collect();
            for trigram in padded.windows(3) {
                let trigram: String = trigram.iter().collect();
                add(&mut vector, &[b"c:", trigram.as_bytes()], 0.4);
            }
        }
        for pair in words.windows(2) {
            add(&mut vector, &[b"b:", pair[0].as_bytes(), b" ", pair[1].as_bytes()], 0.7);
        }
        super::normalise(&mut vector);
        vector
    }
}

/// Adds a feature: its hash picks the slot and the sign.
fn add(vector: &mut [f32], pieces: &[&[u8]], weight: f32) {
    let hash = fnv1a(pieces);
    let slot = usize::try_from(hash % DIMENSION as u64).expect("the slot fits");
    let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
    vector[slot] += sign * weight;
}

#[async_trait::async_trait]
impl Embedder for Lexical {
    fn id(&self) -> &str {
        ID
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|text| Lexical::embed_one(text)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::dot;

    /// Texts sharing words are closer than unrelated ones; vectors are unit length and stable.
    #[test]
    fn shared_words_score_higher() {
        let query = Lexical::embed_one("What is my favourite colour?");
        let related = Lexical::embed_one("My favourite colour is teal.");
        let unrelated = Lexical::embed_one("The train leaves at noon from platform nine.");
        assert!(dot(&query, &related) > 0.5, "{}", dot(&query, &related));
        assert!(dot(&query, &unrelated) < 0.2, "{}", dot(&query, &unrelated));
        assert!((dot(&related, &related) - 1.0).abs() < 1e-5);
        assert_eq!(Lexical::embed_one("Same text"), Lexical::embed_one("same TEXT!"));
        assert!(Lexical::embed_one("").iter().all(|value| *value == 0.0));
    }
}
