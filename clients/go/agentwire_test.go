package agentwire_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentwire "github.com/agentwire/agentwire/clients/go"
	"github.com/agentwire/agentwire/clients/go/agentwirev1"
)

const config = `
[processors.word-guard]
kind = "remote"
timeout_ms = 3000

[[agents]]
id = "echo"
model = "mock/echo"

[[agents]]
id = "guarded"
model = "mock/echo"
input_processors = ["word-guard"]
memory = {}
`

// startServer runs the real agentwire binary on a free port and returns its address.
func startServer(t *testing.T) string {
	t.Helper()
	binary := os.Getenv("AGENTWIRE_BIN")
	if binary == "" {
		binary = filepath.Join("..", "..", "target", "debug", "agentwire")
	}
	dir := t.TempDir()
	configPath := filepath.Join(dir, "agentwire.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	server := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--config", configPath, "--data-dir", dir)
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "agentwire listening on ") {
		t.Fatalf("ready line: %q %v", line, err)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "agentwire listening on "))
}

func TestGenerate(t *testing.T) {
	address := startServer(t)
	client, err := agentwire.Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	result, err := client.Generate(context.Background(), &agentwirev1.RunRequest{AgentId: "echo", Text: "hello from go"})
	if err != nil {
		t.Fatal(err)
	}
	if result.GetText() != "echo: hello from go" || result.GetFinishReason() != "stop" {
		t.Fatalf("unexpected result: %v", result)
	}
}

func TestRemoteGuardrailTripsAndNothingIsSaved(t *testing.T) {
	address := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	guard := agentwire.NewProcessor("word-guard").On(agentwirev1.Hook_HOOK_PROCESS_INPUT,
		func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			if strings.Contains(call.Text(), "secret") {
				return agentwire.Abort("no secrets, please")
			}
			return agentwire.Continue()
		})
	ready := make(chan struct{})
	go func() { _ = guard.Serve(ctx, address, ready) }()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the processor did not connect")
	}

	client, err := agentwire.Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	result, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "guarded", Text: "tell me the secret", ThreadId: "go-thread", ResourceId: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if result.GetFinishReason() != "other" || result.GetTripwire().GetReason() != "no secrets, please" || result.GetTripwire().GetProcessorId() != "word-guard" {
		t.Fatalf("expected a tripwire from word-guard, got %v", result)
	}
	_, err = client.Memory.GetThread(ctx, &agentwirev1.GetThreadRequest{ThreadId: "go-thread"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("nothing should be saved, GetThread gave %v", err)
	}
	passed, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "guarded", Text: "hello", ThreadId: "go-thread-2", ResourceId: "ada"})
	if err != nil || passed.GetText() != "echo: hello" {
		t.Fatalf("clean input should pass: %v %v", passed, err)
	}
}
