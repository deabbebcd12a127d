//! Client API keys through every `AgentService` and `MemoryService` RPC: no key or an unknown key
//! is UNAUTHENTICATED; a key used beyond its resources or agents is PERMISSION_DENIED and leaves
//! the other resource's data untouched; a thread is checked by the resource that owns it.

use crate::common;

use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use common::TestServer;
use sha2::{Digest, Sha256};
use tonic::{Code, Request};

fn config() -> String {
    let admin: String = Sha256::digest(b"admin-secret").iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        r#"
[[auth.keys]]
name = "alice-app"
key = "alice-secret"
resources = ["alice", "tenant-a/*"]
agents = ["echo"]

[[auth.keys]]
name = "admin"
key_sha256 = "{admin}"
resources = ["*"]
instructions = ["echo"]

[[agents]]
id = "echo"
model = "mock/echo"
instructions = "You repeat what the user says."
memory = {{ last_messages = 10 }}

[[agents]]
id = "other"
model = "mock/echo"
"#
    )
}

const ALICE: Option<&str> = Some("alice-secret");
const ADMIN: Option<&str> = Some("admin-secret");

fn keyed<T>(message: T, key: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(key) = key {
        request.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
    }
    request
}

fn run(agent: &str, thread: &str, resource: &str) -> pb::RunRequest {
    pb::RunRequest {
        agent_id: agent.into(),
        text: "hello".into(),
        thread_id: thread.into(),
        resource_id: resource.into(),
        ..Default::default()
    }
}

fn code<T>(outcome: Result<T, tonic::Status>) -> Code {
    outcome.err().map_or(Code::Ok, |status| status.code())
}

/// Calls every resource-scoped RPC on `resource` and its thread `thread` with `key`; the codes,
/// by RPC. The destructive ones come last.
async fn every_rpc(
    server: &TestServer,
    key: Option<&str>,
    resource: &str,
    thread: &str,
) -> Vec<(&'static str, Code)> {
    let mut agents = AgentServiceClient::new(server.channel().await);
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let by_resource = |id: &str| {
        Some(pb::WorkingMemoryScope { scope: Some(pb::working_memory_scope::Scope::ResourceId(id.into())) })
    };
    let by_thread = |id: &str| {
        Some(pb::WorkingMemoryScope { scope: Some(pb::working_memory_scope::Scope::ThreadId(id.into())) })
    };
    let search = |scope| pb::SearchMessagesRequest {
        query: "hello".into(),
        scope: Some(scope),
        top_k: 2,
        thread_resource_id: resource.into(),
        ..Default::default()
    };
    vec![
        ("Stream", code(agents.stream(keyed(run("echo", thread, resource), key)).await)),
        ("Generate", code(agents.generate(keyed(run("echo", thread, resource), key)).await)),
        ("Generate without resource", code(agents.generate(keyed(run("echo", thread, ""), key)).await)),
        (
            "CreateThread",
            code(
                memory
                    .create_thread(keyed(
                        pb::CreateThreadRequest {
                            thread_id: format!("{thread}-new"),
                            resource_id: resource.into(),
                            ..Default::default()
                        },
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "GetThread",
            code(
                memory
                    .get_thread(keyed(
                        pb::GetThreadRequest { thread_id: thread.into(), resource_id: resource.into() },
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "ListThreads",
            code(
                memory
                    .list_threads(keyed(
                        pb::ListThreadsRequest { resource_id: resource.into(), ..Default::default() },
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "UpdateThread",
            code(
                memory
                    .update_thread(keyed(
                        pb::UpdateThreadRequest {
                            thread_id: thread.into(),
                            resource_id: resource.into(),
                            title: Some("renamed".into()),
                            ..Default::default()
                        },
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "ListMessages",
            code(
                memory
                    .list_messages(keyed(
                        pb::ListMessagesRequest {
                            thread_id: thread.into(),
                            resource_id: resource.into(),
                            ..Default::default()
                        },
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "GetWorkingMemory (resource)",
            code(
                memory
                    .get_working_memory(keyed(
                        pb::GetWorkingMemoryRequest { scope: by_resource(resource), ..Default::default() },
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "GetWorkingMemory (thread)",
            code(
                memory
                    .get_working_memory(keyed(
                        pb::GetWorkingMemoryRequest {
                            scope: by_thread(thread),
                            resource_id: resource.into(),
                        },
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "UpdateWorkingMemory",
            code(
                memory
                    .update_working_memory(keyed(
                        pb::UpdateWorkingMemoryRequest {
                            scope: by_resource(resource),
                            content: "# Notes".into(),
                            expected_version: None,
                            ..Default::default()
                        },
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "SearchMessages (resource)",
            code(
                memory
                    .search_messages(keyed(
                        search(pb::search_messages_request::Scope::ResourceId(resource.into())),
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "SearchMessages (thread)",
            code(
                memory
                    .search_messages(keyed(
                        search(pb::search_messages_request::Scope::ThreadId(thread.into())),
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "DeleteThread",
            code(
                memory
                    .delete_thread(keyed(
                        pb::DeleteThreadRequest { thread_id: thread.into(), resource_id: resource.into() },
                        key,
                    ))
                    .await,
            ),
        ),
        (
            "DeleteResource",
            code(
                memory
                    .delete_resource(keyed(pb::DeleteResourceRequest { resource_id: resource.into() }, key))
                    .await,
            ),
        ),
    ]
}

/// Bob's conversation, written with the admin key.
async fn bobs_thread(server: &TestServer) {
    let mut agents = AgentServiceClient::new(server.channel().await);
    agents
        .generate(keyed(run("echo", "bob-thread", "bob"), ADMIN))
        .await
        .expect("the admin may write bob's thread");
}

async fn bobs_messages(server: &TestServer) -> usize {
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let request = pb::ListMessagesRequest {
        thread_id: "bob-thread".into(),
        resource_id: "bob".into(),
        ..Default::default()
    };
    memory.list_messages(keyed(request, ADMIN)).await.unwrap().into_inner().messages.len()
}

/// With keys configured, every RPC without a key or with an unknown one is UNAUTHENTICATED.
#[tokio::test]
async fn every_rpc_needs_a_known_key() {
    let server = TestServer::start(&config()).await;
    bobs_thread(&server).await;
    for key in [None, Some("not-a-key")] {
        for (rpc, code) in every_rpc(&server, key, "bob", "bob-thread").await {
            assert_eq!(code, Code::Unauthenticated, "{rpc} with {key:?}");
        }
        let mut agents = AgentServiceClient::new(server.channel().await);
        assert_eq!(
            code(agents.list_agents(keyed(pb::ListAgentsRequest {}, key)).await),
            Code::Unauthenticated
        );
        let get = pb::GetAgentRequest { agent_id: "echo".into() };
        assert_eq!(code(agents.get_agent(keyed(get, key)).await), Code::Unauthenticated);
    }
    assert_eq!(bobs_messages(&server).await, 2, "bob's thread is untouched");
}

/// A key never reads, lists, changes or runs in another resource's threads (PERMISSION_DENIED),
/// and a thread id in its own resource is its own thread, whatever another resource calls its.
#[tokio::test]
async fn a_key_never_reaches_another_resource() {
    let server = TestServer::start(&config()).await;
    bobs_thread(&server).await;
    for (rpc, code) in every_rpc(&server, ALICE, "bob", "bob-thread").await {
        assert_eq!(code, Code::PermissionDenied, "{rpc}: alice's key on bob's data");
    }
    assert_eq!(bobs_messages(&server).await, 2, "bob's thread is untouched");
    // In her own resource that thread id is hers: bob's thread is out of sight (NOT_FOUND, with
    // nothing of bob's named), and a run of hers in it makes her own thread, not a way into his.
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let claimed = pb::ListMessagesRequest {
        thread_id: "bob-thread".into(),
        resource_id: "alice".into(),
        ..Default::default()
    };
    let refused = memory.list_messages(keyed(claimed.clone(), ALICE)).await.unwrap_err();
    assert_eq!(refused.code(), Code::NotFound);
    assert!(!refused.message().contains("`bob`"), "{}", refused.message());
    let mut agents = AgentServiceClient::new(server.channel().await);
    agents.generate(keyed(run("echo", "bob-thread", "alice"), ALICE)).await.unwrap();
    assert_eq!(memory.list_messages(keyed(claimed, ALICE)).await.unwrap().into_inner().messages.len(), 2);
    assert_eq!(bobs_messages(&server).await, 2, "bob's thread is still only his");
    // Leaving the resource out names the thread's own id as the resource: not alice's either.
    let missing = pb::GetWorkingMemoryRequest {
        scope: Some(pb::WorkingMemoryScope {
            scope: Some(pb::working_memory_scope::Scope::ThreadId("later".into())),
        }),
        ..Default::default()
    };
    assert_eq!(code(memory.get_working_memory(keyed(missing, ALICE)).await), Code::PermissionDenied);
}

/// A key may use exactly the resources and agents it is granted.
#[tokio::test]
async fn a_key_uses_its_own_resources_and_agents() {
    let server = TestServer::start(&config()).await;
    AgentServiceClient::new(server.channel().await)
        .generate(keyed(run("echo", "alice-thread", "alice"), ALICE))
        .await
        .unwrap();
    for (rpc, code) in every_rpc(&server, ALICE, "alice", "alice-thread").await {
        if rpc == "Generate without resource" {
            // The resource defaults to the thread's id, `alice-thread`: not one of alice's.
            assert_eq!(code, Code::PermissionDenied);
        } else {
            assert!(matches!(code, Code::Ok | Code::NotFound), "{rpc}: {code:?}");
        }
    }
    let mut agents = AgentServiceClient::new(server.channel().await);
    assert_eq!(
        code(agents.generate(keyed(run("echo", "", "tenant-a/u1"), ALICE)).await),
        Code::Ok,
        "by prefix"
    );
    assert_eq!(
        code(agents.generate(keyed(run("echo", "", "tenant-b/u1"), ALICE)).await),
        Code::PermissionDenied
    );
    assert_eq!(
        code(agents.generate(keyed(run("other", "", ""), ALICE)).await),
        Code::PermissionDenied,
        "agents too"
    );
    let get = pb::GetAgentRequest { agent_id: "other".into() };
    assert_eq!(code(agents.get_agent(keyed(get, ALICE)).await), Code::PermissionDenied);
    let listed = |key| {
        let mut agents = agents.clone();
        async move {
            let listed =
                agents.list_agents(keyed(pb::ListAgentsRequest {}, key)).await.unwrap().into_inner().agents;
            listed.into_iter().map(|agent| agent.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(ALICE).await, ["echo"]);
    assert_eq!(listed(ADMIN).await, ["echo", "other"]);
    // `x-api-key` works as well as a bearer token.
    let mut request = Request::new(pb::ListAgentsRequest {});
    request.metadata_mut().insert("x-api-key", "alice-secret".parse().unwrap());
    assert_eq!(code(agents.list_agents(request).await), Code::Ok);
}

/// Keys come from the config or from a file beside it; a malformed entry stops start-up naming
/// `GetAgent` and `ListAgents` show an agent's instructions only to a key allowed to read them
/// (`instructions`), never to other keys nor on an open server.
#[tokio::test]
async fn instructions_reach_only_keys_allowed_to_read_them() {
    let server = TestServer::start(&config()).await;
    let mut agents = AgentServiceClient::new(server.channel().await);
    let get = || pb::GetAgentRequest { agent_id: "echo".into() };
    let shown = agents.get_agent(keyed(get(), ADMIN)).await.unwrap().into_inner();
    assert_eq!(shown.instructions, "You repeat what the user says.");
    let hidden = agents.get_agent(keyed(get(), ALICE)).await.unwrap().into_inner();
    assert_eq!(hidden.instructions, "", "alice's key may call echo, not read its prompt");
    let listed = agents.list_agents(keyed(pb::ListAgentsRequest {}, ALICE)).await.unwrap().into_inner();
    assert!(listed.agents.iter().all(|agent| agent.instructions.is_empty()));

    let open =
        TestServer::start("[[agents]]\nid = \"echo\"\nmodel = \"mock/echo\"\ninstructions = \"secret\"\n")
            .await;
    let mut anonymous = AgentServiceClient::new(open.channel().await);
    assert_eq!(anonymous.get_agent(get()).await.unwrap().into_inner().instructions, "");
}

/// it.
#[test]
fn keys_are_checked_at_start() {
    use agentwire::config::Config;
    use agentwire::server::ServeOptions;

    let both =
        Config::parse("[[auth.keys]]\nname = \"x\"\nkey = \"a\"\nkey_env = \"B\"\nresources = [\"*\"]\n")
            .unwrap();
    let error = ServeOptions::from_config(&both).unwrap_err().to_string();
    assert!(error.contains("auth.keys[0]") && error.contains("exactly one of"), "{error}");
    let no_resources = Config::parse("[[auth.keys]]\nname = \"x\"\nkey = \"a\"\nresources = []\n").unwrap();
    assert!(ServeOptions::from_config(&no_resources).unwrap_err().to_string().contains("`resources`"));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("keys.toml"),
        "[[keys]]\nname = \"ops\"\nkey = \"k\"\nresources = [\"*\"]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("agentwire.toml"), "[auth]\nkeys_file = \"keys.toml\"\n").unwrap();
    let config = Config::load(&dir.path().join("agentwire.toml")).unwrap();
    assert!(!ServeOptions::from_config(&config).unwrap().auth.is_open(), "the file's keys are loaded");
}
