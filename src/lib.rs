//! agentwire: an agent runtime served over gRPC.
//!
//! A client asks an agent to answer; the answer streams back while every message passes through
//! a pipeline of processors (input filters, guardrails, output rewriters) at the nine hook points
//! of the processor contract.
//!
//! # Layout
//!
//! Modules are floors: each imports only from the floors below it (`ARCHITECTURE.md` draws
//! them; `scripts/check-floors` holds them).
//!
//! | floor | modules | what they are |
//! |---|---|---|
//! | 9 | [`cli`] | the command line: `serve`, `run`, `agents`, `runs`, `bench`, `eval`, `compact` |
//! | 8 | [`bench`](mod@bench), [`console`], [`eval`] | `agentwire bench`, the operator console, `agentwire eval` |
//! | 7 | [`server`] | the gRPC services and their protobuf types (the floors above use them, none below) |
//! | 6 | [`runtime`] | the agent loop: build the runtime from the config, run a request through every hook |
//! | 5 | [`memory`], [`remote`] | the memory processors; processors and tools in other processes |
//! | 4 | [`processor`] | the [`processor::Processor`] trait, hook arguments, the kinds and built-ins |
//! | 3 | [`model`], [`telemetry`] | language models and providers; logs, spans and metrics |
//! | 2 | [`config`], [`storage`], [`tool`] | `agentwire.toml`; the [`storage::Store`] and its engines; tools |
//! | 1 | [`domain`] | plain data: messages, chunks, prompts, steps, hooks, run records |

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
