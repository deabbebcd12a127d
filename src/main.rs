//! The `agentwire` binary: see [`agentwire::cli`].
//!
//! Its allocator is jemalloc (the default `jemalloc` feature), with the options of
//! `.cargo/config.toml`: memory a burst of requests freed goes back to the system within about a
//! second. It runs on the server's runtime ([`agentwire::server::serving_runtime`]), fair to the
//! tasks in its shared queue.

use std::process::ExitCode;

#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    match agentwire::server::serving_runtime().build() {
        Ok(runtime) => runtime.block_on(agentwire::cli::main()),
        Err(error) => {
            eprintln!("agentwire: cannot start the async runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(all(test, feature = "jemalloc", not(target_env = "msvc")))]
mod tests {
    use tikv_jemalloc_ctl::{config, opt};

    /// The binary runs on jemalloc built with the project's options: a background thread that
    /// purges, freed pages given back after a second, one arena per CPU (a build without
    /// `.cargo/config.toml`'s options would keep them ten seconds and use four arenas a CPU).
    #[test]
    fn the_allocator_is_jemalloc_with_the_projects_options() {
        let options = config::malloc_conf::read().expect("jemalloc answers its compiled options");
        for option in
            ["background_thread:true", "percpu_arena:percpu", "dirty_decay_ms:1000", "muzzy_decay_ms:0"]
        {
            assert!(options.contains(option), "`{option}` is not in jemalloc's options `{options}`");
        }
        assert!(opt::background_thread::read().expect("jemalloc answers opt.background_thread"));
        assert_eq!(opt::tcache_max::read().expect("jemalloc answers opt.tcache_max"), 4096);
    }
}
