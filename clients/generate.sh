#!/usr/bin/env bash
# Regenerates the client stubs from proto/ — the only way stubs are produced. The results are
# checked in; each client's `test` fails when they are stale. Usage: clients/generate.sh [python|go]...
# (no argument: all). Tools are pinned and installed from the registries into target/codegen/.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$PWD/target/codegen
mkdir -p "$tools"

# protoc (and the well-known types) come with grpcio-tools, in a venv of their own.
if [[ ! -x $tools/venv/bin/python ]]; then
  python3 -m venv "$tools/venv"
fi
if ! "$tools/venv/bin/python" -c "import grpc_tools" 2>/dev/null; then
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check "grpcio-tools==1.85.1"
fi
protoc=("$tools/venv/bin/python" -m grpc_tools.protoc -I proto)
protos=(proto/agentwire/v1/agent.proto proto/agentwire/v1/memory.proto proto/agentwire/v1/processor.proto)

generate_python() {
  local out=clients/python/src
  rm -rf "$out/agentwire/v1"
  "${protoc[@]}" --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" "${protos[@]}"
  touch "$out/agentwire/v1/__init__.py"
}

generate_go() {
  local module=github.com/agentwire/agentwire/clients/go
  GOBIN=$tools/bin go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
  GOBIN=$tools/bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
  local mappings=()
  for proto in agent memory processor; do
    mappings+=("M agentwire/v1/$proto.proto=$module/agentwirev1")
  done
  local go_opts grpc_opts
  go_opts=$(IFS=,; echo "module=$module,${mappings[*]// /}")
  grpc_opts=$go_opts
  rm -rf clients/go/agentwirev1
  "${protoc[@]}" \
    --plugin=protoc-gen-go="$tools/bin/protoc-gen-go" --plugin=protoc-gen-go-grpc="$tools/bin/protoc-gen-go-grpc" \
    --go_out=clients/go --go_opt="$go_opts" --go-grpc_out=clients/go --go-grpc_opt="$grpc_opts" "${protos[@]}"
}

languages=("$@")
[[ ${#languages[@]} -gt 0 ]] || languages=(python go)
for language in "${languages[@]}"; do
  "generate_$language"
done
