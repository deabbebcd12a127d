//! The recall scenarios' corpus — sentences shaped like a chat history, stored as a run would
//! store them — and how well the store's semantic search finds in it (recall@k against an exact
//! scan of the same vectors).
//!
//! A sentence keeps to one of 64 topics: most of its twelve words come from its topic's own
//! words, the rest from the whole vocabulary of 4,096, each drawn with Zipf-like frequencies, so
//! that messages cluster by topic and share common words as real ones do. The words are made of
//! syllables (`kalomi`), never English: the bench's own runs ("my coffee order …") match none.

use std::time::{Duration, Instant};

use crate::domain::{Message, Part, Role};
use crate::memory::embedder::{Embedder, Lexical};
use crate::storage::{EmbeddingRecord, RecallScope, RunSave, Store, VectorQuery, dot};

const SYLLABLES: [&str; 16] =
    ["ka", "lo", "mi", "su", "te", "ra", "no", "vi", "pe", "zu", "ga", "bo", "fi", "de", "ju", "xo"];

/// Words of the vocabulary: every three-syllable word.
const VOCABULARY: u64 = 4096;

/// Topics; each owns `VOCABULARY / TOPICS` words.
const TOPICS: u64 = 64;

/// Of ten words of a sentence, those from its topic.
const ON_TOPIC: u64 = 6;

/// Seeds of queries start here, far past any corpus.
const QUERY_SEEDS: u64 = 1 << 40;

/// Queries a recall measurement asks.
pub(super) const RECALL_QUERIES: usize = 200;

/// The `index`th word of the vocabulary.
fn word(index: u64) -> String {
    (0..3).map(|digit| SYLLABLES[(index >> (4 * digit)) as usize % SYLLABLES.len()]).collect()
}

/// A deterministic stream of pseudo-random draws.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    /// Log-uniform below `n`: the k-th most frequent value about 1/k as often as the first.
    fn zipf(&mut self, n: u64) -> u64 {
        let uniform = self.next() as f64 / (1u64 << 31) as f64;
        ((n as f64).powf(uniform) as u64).saturating_sub(1).min(n - 1)
    }
}

/// A deterministic pseudo-random sentence of twelve words on one topic.
pub fn sentence(seed: u64) -> String {
    let mut draws = Draws(seed);
    draws.next();
    let topic_words = VOCABULARY / TOPICS;
    let topic = draws.zipf(TOPICS);
    (0..12)
        .map(|_| {
            let on_topic = draws.next() % 10 < ON_TOPIC;
            word(if on_topic {
                topic * topic_words + draws.zipf(topic_words)
            } else {
                draws.zipf(VOCABULARY)
            })
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Fills `resource` with `count` messages (sentences, embedded by the built-in lexical embedder)
/// over 100 threads, as recalled messages would be stored.
pub async fn fill(store: &dyn Store, resource: &str, count: usize) -> Result<(), String> {
    let per_save = 500.min(count.max(1));
    for batch in 0..count.div_ceil(per_save) {
        let thread = format!("{resource}-thread-{}", batch % 100);
        let messages: Vec<Message> = (0..per_save.min(count - batch * per_save))
            .map(|index| {
                let role = if index % 2 == 0 { Role::User } else { Role::Assistant };
                Message::new(role, vec![Part::text(sentence((batch * per_save + index) as u64))])
            })
            .collect();
        let embeddings = messages
            .iter()
            .map(|message| EmbeddingRecord {
                message_id: message.id.clone(),
                embedder: Lexical::new().id().to_owned(),
                vector: Lexical::embed_one(&message.text()),
            })
            .collect();
        let save = RunSave {
            thread_id: thread,
            resource_id: resource.into(),
            messages,
            embeddings,
            working_memory: None,
            quota: crate::domain::ResourceQuota::UNLIMITED,
        };
        store.save_run(save).await.map_err(|error| error.to_string())?;
    }
    Ok(())
}

/// Messages of the resource searched while another's index loads ([`first_search`]).
const BYSTANDER_MESSAGES: usize = 1_000;
/// The pause between two of its searches: other tenants' recall, not a load of its own.
const BYSTANDER_PAUSE: Duration = Duration::from_millis(10);

/// The first search of a resource after a start, which loads its index, and what it cost the
/// others: searches of a small resource already loaded, made every [`BYSTANDER_PAUSE`] while it
/// ran.
#[derive(Debug, Clone, Copy)]
pub struct FirstSearch {
    /// The first search.
    pub took: Duration,
    /// Searches of the other resource made meanwhile.
    pub bystander_searches: usize,
    /// The slowest of them.
    pub bystander_slowest: Duration,
}

/// The top `top_k` of `resource` for `vector`, of the lexical embedder, with no threshold.
fn resource_query(resource: &str, vector: Vec<f32>, top_k: usize) -> VectorQuery {
    VectorQuery {
        scope: RecallScope::Resource(resource.to_owned()),
        embedder: Lexical::new().id().to_owned(),
        vector,
        top_k,
        threshold: None,
    }
}

/// One search of `resource` for a fixed query.
async fn search_once(store: &dyn Store, resource: &str) -> Result<Duration, String> {
    let search = resource_query(resource, Lexical::embed_one(&sentence(QUERY_SEEDS - 1)), 3);
    let started = Instant::now();
    store.search(search).await.map_err(|error| error.to_string())?;
    Ok(started.elapsed())
}

/// The first search of `resource` ([`FirstSearch`]), a small resource beside it filled (when
/// it is not yet) and loaded first.
pub(super) async fn first_search(store: &dyn Store, resource: &str) -> Result<FirstSearch, String> {
    let bystander = format!("{resource}-bystander");
    if store.list_threads(&bystander, "", 1).await.map_err(|error| error.to_string())?.threads.is_empty() {
        fill(store, &bystander, BYSTANDER_MESSAGES).await?;
    }
    search_once(store, &bystander).await?;
    let (slowest, searches, done) =
        (std::cell::Cell::new(Duration::ZERO), std::cell::Cell::new(0), std::cell::Cell::new(false));
    let first = async {
        let took = search_once(store, resource).await;
        done.set(true);
        took
    };
    // Each search made is counted, the one under way when the first search ends too.
    let meanwhile = async {
        while !done.get() {
            let took = search_once(store, &bystander).await?;
            slowest.set(slowest.get().max(took));
            searches.set(searches.get() + 1);
            tokio::time::sleep(BYSTANDER_PAUSE).await;
        }
        Ok::<_, String>(())
    };
    let (took, meanwhile) = tokio::join!(first, meanwhile);
    let took = took?;
    meanwhile?;
    Ok(FirstSearch { took, bystander_searches: searches.get(), bystander_slowest: slowest.get() })
}

/// Recall@`k` of `store`'s search in `resource`, which [`fill`] gave `count` messages: the
/// share of its hits, over `RECALL_QUERIES` new sentences, that score at least the `k`th best
/// of an exact scan of the corpus (ties count as found). The corpus is embedded again in one pass
/// and never held, so measuring a million messages costs no more memory than measuring ten.
pub async fn recall_at(store: &dyn Store, resource: &str, count: usize, k: usize) -> Result<f64, String> {
    let queries: Vec<Vec<f32>> =
        (0..RECALL_QUERIES as u64).map(|query| Lexical::embed_one(&sentence(QUERY_SEEDS + query))).collect();
    let kth = exact_kth_scores(&queries, count, k);
    let mut found = 0;
    for (vector, kth) in queries.into_iter().zip(kth) {
        let hits =
            store.search(resource_query(resource, vector, k)).await.map_err(|error| error.to_string())?;
        found += hits.iter().filter(|hit| hit.score >= kth - 1e-5).count().min(k);
    }
    Ok(found as f64 / (k * RECALL_QUERIES) as f64)
}

/// For each query, the `k`th best score over the `count` sentences [`fill`] stores (the worst
/// score when there are fewer), by an exact scan that embeds them one at a time.
fn exact_kth_scores(queries: &[Vec<f32>], count: usize, k: usize) -> Vec<f32> {
    let k = k.clamp(1, count.max(1));
    let mut best: Vec<Vec<f32>> = vec![Vec::with_capacity(k + 1); queries.len()];
    for seed in 0..count as u64 {
        let stored = Lexical::embed_one(&sentence(seed));
        for (query, best) in queries.iter().zip(&mut best) {
            let score = dot(&stored, query);
            if best.len() < k || score > best[k - 1] {
                let at = best.partition_point(|other| *other >= score);
                best.insert(at, score);
                best.truncate(k);
            }
        }
    }
    best.into_iter().map(|best| best.last().copied().unwrap_or(f32::NEG_INFINITY)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sentences are deterministic, twelve words long, made of the vocabulary's words, and
    /// spread over many words (not a handful repeated).
    #[test]
    fn sentences_are_deterministic_and_varied() {
        assert_eq!(sentence(7), sentence(7));
        assert_ne!(sentence(7), sentence(8));
        let words: std::collections::HashSet<String> = (0..1000)
            .flat_map(|seed| sentence(seed).split(' ').map(str::to_owned).collect::<Vec<_>>())
            .collect();
        assert!(words.len() > 1000, "{} distinct words", words.len());
        assert!(sentence(3).split(' ').all(|word| word.len() == 6), "{}", sentence(3));
    }

    /// An exact store finds what the exact scan finds: recall 1 on the sled store.
    #[tokio::test]
    async fn an_exact_search_recalls_everything() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::storage::SledStore::open(dir.path()).unwrap();
        fill(&store, "r", 300).await.unwrap();
        assert_eq!(recall_at(&store, "r", 300, 3).await.unwrap(), 1.0);
    }
}
