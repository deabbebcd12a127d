//! The `agentwire` binary: see [`agentwire::cli`].

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    agentwire::cli::main().await
}
