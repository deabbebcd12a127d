//! Embeds agentwire with a processor written in Rust: `no-shouting` aborts any run whose input
//! has more than 20 capital letters.
//!
//! ```sh
//! cargo run --example custom_processor
//! cargo run -- run --agent polite "HELLO THERE, ARE YOU LISTENING TO ME"   # tripwire
//! ```

use std::sync::Arc;

use agentwire::config::Config;
use agentwire::domain::{Hook, HookSet};
use agentwire::processor::{Abort, HookError, InputArgs, InputOutcome, Processor};
use agentwire::runtime::{Components, Runtime};
use agentwire::{ServeOptions, serve};

const CONFIG: &str = r#"
[[agents]]
id = "polite"
model = "mock/echo"
input_processors = ["no-shouting"]
"#;

/// Aborts runs whose input shouts.
struct NoShouting {
    id: String,
}

#[async_trait::async_trait]
impl Processor for NoShouting {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInput])
    }

    async fn process_input(&self, args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        for message in &args.messages {
            let capitals = message.text().chars().filter(|c| c.is_uppercase()).count();
            if capitals > 20 {
                let metadata = serde_json::json!({ "capitals": capitals });
                return Err(Abort::new("please do not shout").metadata(metadata).into());
            }
        }
        Ok(InputOutcome::Unchanged)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut components = Components::builtin();
    components.processor_kinds.register_fn("no-shouting", |id, _options| {
        let processor: Arc<dyn Processor> = Arc::new(NoShouting { id: id.to_owned() });
        Ok(processor)
    });
    let config = Config::parse(CONFIG)?;
    let runtime = Runtime::new(&config, components)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
    println!("agentwire listening on {}", listener.local_addr()?);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    serve(listener, Arc::new(runtime), ServeOptions::default(), shutdown).await?;
    Ok(())
}
