# agentwire in a container: built in a Rust image, run as a non-root user in a slim Debian.
#
#   docker build -t agentwire .
#   docker run -p 50051:50051 -v $PWD/agentwire.toml:/etc/agentwire/agentwire.toml:ro \
#       -v agentwire-data:/var/lib/agentwire -e SUPPORT_FRONTEND_KEY agentwire
#
# The config must declare [[auth.keys]] (or `[auth] allow_unauthenticated = true`): the server
# listens on 0.0.0.0 here, and refuses to do that without keys.

FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin agentwire

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/agentwire --create-home --shell /usr/sbin/nologin agentwire
COPY --from=build /src/target/release/agentwire /usr/local/bin/agentwire
USER agentwire
WORKDIR /var/lib/agentwire
VOLUME ["/var/lib/agentwire"]
EXPOSE 50051
# SIGTERM stops the server gracefully (remote processors drained, the store flushed).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/agentwire"]
CMD ["serve", "--listen", "0.0.0.0:50051", "--config", "/etc/agentwire/agentwire.toml", "--data-dir", "/var/lib/agentwire/data"]
