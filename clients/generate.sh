#!/usr/bin/env bash
# Regenerates the client stubs from proto/ — the only way stubs are produced. The result is
# checked in; `scripts/test` fails when it is stale.
set -euo pipefail
cd "$(dirname "$0")/.."

# Python: grpcio-tools (bundles protoc and the well-known types).
python_out=clients/python/src
rm -rf "$python_out/agentwire/v1"
"${PYTHON:-python3}" -m grpc_tools.protoc -I proto \
  --python_out="$python_out" --pyi_out="$python_out" --grpc_python_out="$python_out" \
  proto/agentwire/v1/*.proto
touch "$python_out/agentwire/v1/__init__.py"
