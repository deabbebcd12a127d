//! The integration tests, in one test binary (one link instead of one per file): each module
//! starts the real gRPC server — in process or as the built binary — and proves one capability
//! through it. `cargo test --test e2e <module>::` runs one module.

mod common;

mod agent_service;
mod api_error;
mod auth;
mod bench_smoke;
mod binary;
mod builtin_filters;
mod cancellation;
mod compaction;
mod config;
mod console;
mod crash;
mod field_limits;
mod full_disk;
mod guardrail_eval;
mod health_reflection;
mod hook_order;
mod input_hooks;
mod judges;
mod limits;
mod memory_embedders;
mod memory_history;
#[cfg(feature = "local-embedder")]
mod memory_local_embedder;
mod memory_recall;
mod memory_service;
mod memory_working;
mod metrics;
mod output_hooks;
mod postgres_tls;
mod processor_admission;
mod prompt_injection;
mod providers;
mod quotas;
mod remote_hooks;
mod remote_processor;
mod remote_protocol_v2;
mod remote_sessions;
mod remote_stream_windows;
mod remote_tools;
mod remote_windows_in_flight;
mod replicas;
mod response_cache;
mod run_records;
mod scanning_processors;
mod seed_processors;
mod shutdown;
mod slow_clients;
mod storage;
mod structured_output;
mod telemetry;
mod tls;
mod token_limiter;
mod tripwire;
