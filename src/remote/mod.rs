//! The remote transport: processes in any language that dial in over `ProcessorService.Connect`
//! and serve hooks, tools, or both.
//!
//! - [`session`]: one connected instance — its calls in flight and the channel they go out on.
//! - [`pool`]: every session by processor id, the tokens that may register them, and the choice
//!   of instance for each call (least outstanding calls, sticky per run).
//! - [`processor`]: [`RemoteProcessor`], a [`Processor`](crate::processor::Processor) that
//!   dispatches a hook call to an instance and applies its answer.
//! - [`tool`]: [`RemoteTool`], a [`Tool`](crate::tool::Tool) executed by an instance.
//! - [`hook_call`], [`tool_call`]: the frames, in domain types, named as the proto names them;
//!   the gRPC adapter (`server/remote_convert.rs`) maps them to and from protobuf.

pub mod hook_call;
pub mod pool;
pub mod processor;
pub mod session;
pub mod tool;
pub mod tool_call;

pub use self::hook_call::{HookArgs, HookCall, HookResult, Outcome, Replacement};
pub use self::pool::{PoolTiming, RemotePool, TokenError};
pub use self::processor::{FailurePolicy, Mode, RemoteProcessor};
pub use self::session::{Answer, CallFailure, Session, SessionEvent, SessionSpec, SessionStats};
pub use self::tool::{RemoteTool, ToolConfigError};
pub use self::tool_call::{ToolInvocation, ToolOutput, ToolSpec};

/// The protocol versions this server speaks, inclusive.
pub const PROTOCOL_VERSIONS: (u32, u32) = (1, 2);
/// The processor kind of remote processors in the config.
pub const KIND: &str = "remote";
