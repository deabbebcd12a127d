//! The config: unknown keys and bad values stop start-up with a message naming the key and its
//! line; the shipped example config is valid.

use std::sync::{Arc, LazyLock};

use agentwire::config::{Config, ConfigError};
use agentwire::runtime::{Components, Runtime};
use agentwire::storage::SledStore;

static STORE: LazyLock<(tempfile::TempDir, SledStore)> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    (dir, store)
});

fn build(source: &str) -> Result<Runtime, ConfigError> {
    let config = Config::parse(source)?;
    Runtime::new(&config, Components::builtin().with_store(Arc::new(STORE.1.clone())))
}

fn error_of(source: &str) -> String {
    build(source).expect_err("the config is refused").to_string()
}

/// The example config and the built-in default both load.
#[test]
fn shipped_configs_are_valid() {
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/agentwire.toml")).unwrap();
    let runtime = build(&example).expect("examples/agentwire.toml is valid");
    let ids: Vec<&str> = runtime.agents().map(|agent| agent.id.as_str()).collect();
    assert_eq!(ids, ["assistant", "calculator", "echo", "guarded", "inspect", "picky", "remote-guarded"]);
    build(agentwire::config::DEFAULT_CONFIG).expect("the default config is valid");
}

/// Each kind of mistake is named with its key and line.
#[test]
fn mistakes_name_the_key_and_the_line() {
    let cases = [
        ("[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\ncolour = \"red\"\n", ["colour", "line 4"]),
        ("[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\nmax_steps = \"many\"\n", ["max_steps", "line 4"]),
        ("\n\n[[agents]]\nid = \"a\"\nmodel = \"gpt/none\"\n", ["agents[0].model", "line 5"]),
        ("[[agents]]\nid = \"a\"\nmodel = \"mock/script\"\n", ["agents[0].model", "script"]),
        (
            "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\ntools = [\"hammer\"]\n",
            ["agents[0].tools[0]", "hammer"],
        ),
        (
            "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\ninput_processors = [\"ghost\"]\n",
            ["agents[0].input_processors[0]", "ghost"],
        ),
        ("[processors.p]\nblocked_words = [\"x\"]\n", ["processors.p.kind", "line 1"]),
        ("[processors.p]\nkind = \"teleporter\"\n", ["processors.p", "teleporter"]),
        ("[processors.p]\nkind = \"content-filter\"\nblocked = [\"x\"]\n", ["processors.p", "blocked"]),
        (
            "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\n[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\n",
            ["duplicate agent id `a`", "line 4"],
        ),
        ("[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\nmax_steps = 0\n", ["max_steps", "between 1"]),
        (
            "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\nmemory = { working_memory = { template = \"x\", schema = {} } }\n",
            ["agents[0].memory.working_memory: give", "line 4"],
        ),
        (
            "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\nmemory = { working_memory = { schema = { type = 5 } } }\n",
            ["memory.working_memory.schema", "not a valid JSON schema"],
        ),
        (
            "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\nmemory = { last_message = 3 }\n",
            ["last_message", "line 4"],
        ),
        ("[processors.h]\nkind = \"message-history\"\n", ["processors.h", "`memory` table"]),
        (
            "[processors.l]\nkind = \"language-detector\"\nallowed = [\"english\"]\n",
            ["allowed[0]", "english"],
        ),
        ("[processors.p]\nkind = \"pii-detector\"\ndetectors = [\"dna\"]\n", ["detectors[0]", "dna"]),
        (
            "[processors.m]\nkind = \"dynamic-model\"\nfirst_step = \"nowhere/fast\"\n",
            ["processors.m", "`first_step`: unknown model `nowhere/fast`"],
        ),
        ("[processors.m]\nkind = \"dynamic-model\"\n", ["processors.m", "at least one of"]),
        ("[processors.t]\nkind = \"tool-result-redactor\"\nfields = []\n", ["processors.t", "fields"]),
        ("[processors.t]\nkind = \"reasoning-transformer\"\ntag = \"a b\"\n", ["processors.t", "tag"]),
        (
            "[processors.r]\nkind = \"regex-filter\"\npatterns = [{ name = \"x\", pattern = \"(\" }]\n",
            ["patterns[0].pattern", "processors.r"],
        ),
        ("[providers.groq]\napi_key_env = \"GROQ_API_KEY\"\n", ["providers.groq", "base_url"]),
        ("[providers.x]\nbase_url = \"ftp://x\"\n", ["providers.x", "http(s)"]),
        ("[providers.x]\nbase_url = \"http://x\"\napi = \"gemini\"\n", ["api", "line 3"]),
        ("[providers.mock]\nbase_url = \"http://x\"\n", ["providers.mock", "built in"]),
        ("[providers.x]\nbase_url = \"http://a b\"\n", ["providers.x", "got `http://a b`"]),
        (
            "[providers.x]\nbase_url = \"http://x\"\nheaders = { \"x team\" = \"platform\" }\n",
            ["providers.x", "`headers.x team` is not a valid HTTP header"],
        ),
        ("[[agents]]\nid = \"a\"\nmodel = \"nowhere/model\"\n", ["agents[0].model", "[providers.*]"]),
        (
            "[processors.x]\nkind = \"remote\"\nhooks.processInptu = { timeout_ms = 5 }\n",
            ["hooks.processInptu", "processInput"],
        ),
        (
            "[processors.x]\nkind = \"remote\"\nhooks.processInput = { timeout_ms = 0 }\n",
            ["hooks.processInput.timeout_ms", "positive"],
        ),
        (
            "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\ninput_processors = [{ timeout_ms = 5 }]\n",
            ["agents[0].input_processors[0]", "remote ="],
        ),
        (
            "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\noutput_processors = [{ remote = \"g\", mood = \"x\" }]\n",
            ["agents[0].output_processors[0]", "mood"],
        ),
        ("[[processor_tokens]]\nprocessors = [\"p\"]\n", ["processor_tokens[0]", "exactly one"]),
        (
            "[[processor_tokens]]\ntoken_env = \"AGENTWIRE_SURELY_UNSET_TOKEN\"\nprocessors = [\"p\"]\n",
            ["processor_tokens[0].token_env", "AGENTWIRE_SURELY_UNSET_TOKEN"],
        ),
        ("[processors.r]\nkind = \"remote\"\ntimeout_ms = 0\n", ["processors.r", "timeout_ms"]),
        ("[processors.r]\nkind = \"remote\"\non_failure = \"maybe\"\n", ["processors.r", "maybe"]),
        (
            "[embedders.e]\nkind = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\napi_key_env = \"AGENTWIRE_SURELY_UNSET_KEY\"\n",
            ["embedders.e.api_key_env", "AGENTWIRE_SURELY_UNSET_KEY"],
        ),
        ("[embedders.e]\nkind = \"openai\"\nmodel = \"m\"\n", ["missing field `base_url`", "line 1"]),
        (
            "[embedders.lexical]\nkind = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\n",
            ["embedders.lexical", "built in"],
        ),
        (
            "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\nmemory = { semantic_recall = { embedder = \"nope\" } }\n",
            ["memory.semantic_recall.embedder: unknown embedder `nope`", "line 4"],
        ),
    ];
    for (source, needles) in cases {
        let message = error_of(source);
        for needle in needles {
            assert!(message.contains(needle), "`{message}` should mention `{needle}`");
        }
    }
}
