#!/usr/bin/env bash
# Regenerates the client stubs from proto/ — the only way stubs are produced. The results are
# checked in; each client's `test` runs `clients/generate.sh --check <language>`, which fails when
# they are stale. Usage: clients/generate.sh [--check] [python|go|typescript]... (no language:
# all). Tools are pinned and installed from the registries into target/codegen/.
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
protos=(proto/agentwire/v1/agent.proto proto/agentwire/v1/memory.proto proto/agentwire/v1/processor.proto proto/agentwire/v1/runs.proto)

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
  for proto in agent memory processor runs; do
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

generate_typescript() {
  # protoc-gen-es is a pinned dev dependency of the TypeScript package.
  local package=clients/typescript
  if [[ ! -x $package/node_modules/.bin/protoc-gen-es ]]; then
    (cd "$package" && npm ci --no-audit --no-fund --silent)
  fi
  rm -rf "$package/src/gen"
  mkdir -p "$package/src/gen"
  "${protoc[@]}" --plugin=protoc-gen-es="$package/node_modules/.bin/protoc-gen-es" \
    --es_out="$package/src/gen" --es_opt=target=ts,import_extension=js "${protos[@]}"
}

# Where each language's stubs live, for --check.
declare -A outputs=(
  [python]=clients/python/src/agentwire/v1
  [go]=clients/go/agentwirev1
  [typescript]=clients/typescript/src/gen
)

check=false
if [[ ${1:-} == --check ]]; then
  check=true
  shift
fi
languages=("$@")
[[ ${#languages[@]} -gt 0 ]] || languages=(python go typescript)
for language in "${languages[@]}"; do
  "generate_$language"
  # --check: the checked-in (or staged) stubs must be exactly what was just generated.
  if $check; then
    out=${outputs[$language]}
    if ! git diff --quiet -- "$out" || [[ -n $(git ls-files --others --exclude-standard -- "$out") ]]; then
      git status --short -- "$out"
      echo "the $language stubs are stale: run clients/generate.sh and commit" >&2
      exit 1
    fi
  fi
done
