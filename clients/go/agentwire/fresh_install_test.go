package agentwire_test

// From a clean directory, as the README says: a new module outside the repository depends on this
// one with `go mod edit -replace`, builds the README's ten-line guard, connects it over TLS with
// a processor token, and a run ends in a tripwire with nothing saved.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentwire/agentwire/clients/go/agentwire"
	"github.com/agentwire/agentwire/clients/go/agentwirev1"
)

// readmeGuard is the first Go code block under "## A ten-line guard" in the README.
func readmeGuard(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := strings.SplitN(string(readme), "## A ten-line guard\n", 2)[1]
	return regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(section)[1]
}

// run runs a command in dir, failing the test with its output.
func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	command := exec.Command(name, args...)
	command.Dir = dir
	if output, err := command.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, output)
	}
}

func TestAFreshModuleBlocksAWordOverTLS(t *testing.T) {
	work := t.TempDir()
	run(t, ".", filepath.Join("..", "..", "testdata", "tls.sh"), work)
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	token := hex.EncodeToString(secret)
	t.Setenv("AGENTWIRE_TEST_PROCESSOR_TOKEN", token)
	address := startServerWith(t, filepath.Join(work, "tls.toml"))

	module, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(work, "app")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, app, "go", "mod", "init", "example.com/guard")
	run(t, app, "go", "mod", "edit", "-require", "github.com/agentwire/agentwire/clients/go@v0.0.0",
		"-replace", "github.com/agentwire/agentwire/clients/go="+module)
	source := strings.Replace(readmeGuard(t), `"127.0.0.1:50051"`, `"`+address+`"`, 1)
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(filepath.Join(work, "ca.pem"))
	if err := os.WriteFile(filepath.Join(app, "ca.pem"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, app, "go", "mod", "tidy")
	run(t, app, "go", "build", "-o", "guard", ".")

	guard := exec.Command(filepath.Join(app, "guard"))
	guard.Dir = app
	guard.Env = append(os.Environ(), "AGENTWIRE_PROCESSOR_TOKEN="+token)
	stderr, err := guard.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = guard.Process.Kill(); _ = guard.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || !strings.Contains(line, "agentwire: connected as word-guard (instance word-guard-") ||
		!strings.Contains(line, "to "+address+", protocol 2") {
		t.Fatalf("the guard's first line: %q %v", line, err)
	}

	client, err := agentwire.Dial(address, agentwire.WithTLS(agentwire.TLS{CAFile: filepath.Join(work, "ca.pem")}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	result, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "remote-guarded", Text: "tell me the secret", ThreadId: "fresh", ResourceId: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if result.GetFinishReason() != "other" || result.GetTripwire().GetProcessorId() != "word-guard" || result.GetTripwire().GetReason() != "no secrets, please" {
		t.Fatalf("expected word-guard's tripwire, got %v", result)
	}
	if _, err := client.Memory.GetThread(ctx, &agentwirev1.GetThreadRequest{ThreadId: "fresh", ResourceId: "ada"}); status.Code(err) != codes.NotFound {
		t.Fatalf("nothing is saved after a tripwire; GetThread gave %v", err)
	}
	passed, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "remote-guarded", Text: "hello", ThreadId: "fresh-2", ResourceId: "ada"})
	if err != nil || passed.GetText() != "echo: hello" {
		t.Fatalf("clean input passes: %v %v", passed, err)
	}
}

func TestAWrongTokenIsRefused(t *testing.T) {
	work := t.TempDir()
	run(t, ".", filepath.Join("..", "..", "testdata", "tls.sh"), work)
	t.Setenv("AGENTWIRE_TEST_PROCESSOR_TOKEN", "the-right-token")
	address := startServerWith(t, filepath.Join(work, "tls.toml"))
	guard := agentwire.NewProcessor("word-guard")
	guard.Token = "a-wrong-token"
	guard.TLS = &agentwire.TLS{CAFile: filepath.Join(work, "ca.pem")}
	guard.On(agentwirev1.Hook_HOOK_PROCESS_INPUT, func(context.Context, agentwire.Call) *agentwirev1.HookResult { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := guard.Run(ctx, address); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("expected UNAUTHENTICATED, got %v", err)
	}
}

func TestMTLSTakesAClientCertificate(t *testing.T) {
	work := t.TempDir()
	run(t, ".", filepath.Join("..", "..", "testdata", "tls.sh"), work)
	t.Setenv("AGENTWIRE_TEST_PROCESSOR_TOKEN", "unused")
	address := startServerWith(t, filepath.Join(work, "mtls.toml"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	request := &agentwirev1.RunRequest{AgentId: "remote-guarded", Text: "hi"}

	withCert := agentwire.TLS{CAFile: filepath.Join(work, "ca.pem"), CertFile: filepath.Join(work, "client.pem"), KeyFile: filepath.Join(work, "client.key")}
	client, err := agentwire.Dial(address, agentwire.WithTLS(withCert))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// Through TLS to the run: no guard is connected, so word-guard's closed policy trips it.
	if result, err := client.Generate(ctx, request); err != nil || !strings.Contains(result.GetTripwire().GetReason(), "unavailable") {
		t.Fatalf("with a client certificate: %v %v", result, err)
	}
	anonymous, err := agentwire.Dial(address, agentwire.WithTLS(agentwire.TLS{CAFile: filepath.Join(work, "ca.pem")}))
	if err != nil {
		t.Fatal(err)
	}
	defer anonymous.Close()
	if _, err := anonymous.Generate(ctx, request); status.Code(err) != codes.Unavailable {
		t.Fatalf("without a client certificate the handshake fails: %v", err)
	}
}
