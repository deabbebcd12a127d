//! Compiles `proto/agentwire/v1/*.proto` with protox (no system protoc) and writes the
//! descriptor set that server reflection serves.

use std::path::PathBuf;
use std::{env, fs};

use prost::Message;

const PROTOS: &[&str] = &[
    "agentwire/v1/agent.proto",
    "agentwire/v1/memory.proto",
    "agentwire/v1/processor.proto",
    "agentwire/v1/runs.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let descriptors = protox::compile(PROTOS, ["proto"])?;
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out_dir.join("agentwire_descriptor.bin"), descriptors.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // No `connect` constructors on clients: `ProcessorService.Connect` would collide with
        // them. Clients are built from a `Channel` instead.
        .build_transport(false)
        .compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
