//! agentwire: an agent runtime served over gRPC.
//!
//! A client asks an agent to answer; the answer streams back while every message passes through
//! a pipeline of processors (input filters, guardrails, output rewriters) at the nine hook points
//! of the processor contract.
//!
//! # Layout
//!
//! - [`server`]: the gRPC adapters — proto ⇄ domain conversion, `Status` mapping, health and
//!   reflection. The only module that knows tonic.
//! - [`runtime`]: the agent loop. One *run* takes a request through every hook, the model and
//!   the tools, and streams chunks to a sink.
//! - [`processor`]: the [`processor::Processor`] trait, the hook arguments and results, the
//!   registry of processor kinds, and the built-in processors.
//! - [`memory`]: the memory processors (message history) over the store.
//! - [`model`]: the [`model::LanguageModel`] trait and the mock provider.
//! - [`tool`]: the [`tool::Tool`] trait and the built-in tools.
//! - [`storage`]: the [`storage::Store`] trait and its sled implementation.
//! - [`config`]: the `agentwire.toml` file.
//! - [`cli`]: the command line (`serve`, `run`, `agents`, `bench`, `eval`).
//! - [`metrics`]: Prometheus counters and histograms the runtime records.
//! - [`telemetry`]: log lines, and the spans of runs exported to OpenTelemetry.
//! - [`bench`]: `agentwire bench`, the scenarios that measure a run, a hook and a recall.
//! - [`eval`]: `agentwire eval guardrails`, the built-in guardrails scored on labelled corpora.

pub mod bench;
pub mod cli;
pub mod config;
pub mod console;
pub mod domain;
pub mod eval;
pub mod memory;
pub mod model;
pub mod processor;
pub mod remote;
pub mod runtime;
pub mod server;
pub mod storage;
pub mod telemetry;
pub mod tool;

pub use self::server::{ServeOptions, serve};
