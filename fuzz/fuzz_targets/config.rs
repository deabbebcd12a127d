//! Config parsing and checking: any text is either a running configuration or a clear error —
//! never a panic. Parses with `Config::parse`, then builds the runtime (which checks agents,
//! processors, models, memory and tools) and the server options (keys, limits, TLS).
#![no_main]

use std::sync::{Arc, OnceLock};

use agentwire::config::Config;
use agentwire::runtime::{Components, Runtime};
use agentwire::server::ServeOptions;
use agentwire::storage::{SledStore, Store};
use libfuzzer_sys::fuzz_target;

fn store() -> Arc<dyn Store> {
    static STORE: OnceLock<(tempfile::TempDir, Arc<dyn Store>)> = OnceLock::new();
    let (_, store) = STORE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store: Arc<dyn Store> = Arc::new(SledStore::open(dir.path()).expect("the store opens"));
        (dir, store)
    });
    Arc::clone(store)
}

fuzz_target!(|source: &str| {
    let Ok(config) = Config::parse(source) else { return };
    let _ = Runtime::new(&config, Components::builtin().with_store(store()));
    let _ = ServeOptions::from_config(&config);
});
