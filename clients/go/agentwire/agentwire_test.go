package agentwire_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentwire/agentwire/clients/go/agentwire"
	"github.com/agentwire/agentwire/clients/go/agentwirev1"
)

// config is the server config all client suites share.
var config = filepath.Join("..", "..", "testdata", "agentwire.toml")

// startServer runs the real agentwire binary on a free port and returns its address.
func startServer(t *testing.T) string {
	t.Helper()
	return startServerWith(t, config)
}

// startServerWith runs the binary with another config.
func startServerWith(t *testing.T, config string) string {
	t.Helper()
	server, address := spawnServer(t, config, "127.0.0.1:0", t.TempDir())
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	return address
}

// spawnServer starts the binary listening on listen with its data in dir; it returns the
// process and its address once it listens. The caller ends the process.
func spawnServer(t *testing.T, config, listen, dir string) (*exec.Cmd, string) {
	t.Helper()
	binary := os.Getenv("AGENTWIRE_BIN")
	if binary == "" {
		binary = filepath.Join("..", "..", "..", "target", "debug", "agentwire")
	}
	server := exec.Command(binary, "serve", "--listen", listen, "--config", config, "--data-dir", dir)
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "agentwire listening on ") {
		_ = server.Process.Kill()
		t.Fatalf("ready line: %q %v", line, err)
	}
	return server, strings.TrimSpace(strings.TrimPrefix(line, "agentwire listening on "))
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
	guard := wordGuard()
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
	_, err = client.Memory.GetThread(ctx, &agentwirev1.GetThreadRequest{ThreadId: "go-thread", ResourceId: "ada"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("nothing should be saved, GetThread gave %v", err)
	}
	passed, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "guarded", Text: "hello", ThreadId: "go-thread-2", ResourceId: "ada"})
	if err != nil || passed.GetText() != "echo: hello" {
		t.Fatalf("clean input should pass: %v %v", passed, err)
	}
}

// TestRunRecordsNameTheProcessorThatBlockedARun: a run the Go guard stops leaves a record naming
// it, its hook and reason; AllRuns finds it by outcome across pages.
func TestRunRecordsNameTheProcessorThatBlockedARun(t *testing.T) {
	address := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connect(t, ctx, wordGuard(), address)
	client, err := agentwire.Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, text := range []string{"hello", "the secret", "hello again"} {
		if _, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "guarded", Text: text, ResourceId: "go-records"}); err != nil {
			t.Fatal(err)
		}
	}
	// Records are written in batches: wait until all three are listed (one per page).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		listed := 0
		for _, err := range client.AllRuns(ctx, &agentwirev1.ListRunsRequest{ResourceId: "go-records", PageSize: 1}) {
			if err != nil {
				t.Fatal(err)
			}
			listed++
		}
		if listed == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 runs recorded", listed)
		}
	}
	var blocked []*agentwirev1.RunRecord
	for run, err := range client.AllRuns(ctx, &agentwirev1.ListRunsRequest{ResourceId: "go-records", Outcome: "tripwire", PageSize: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		blocked = append(blocked, run)
	}
	if len(blocked) != 1 || blocked[0].GetTripwire().GetProcessorId() != "word-guard" {
		t.Fatalf("one blocked run by word-guard, got %v", blocked)
	}
	record, err := client.GetRun(ctx, blocked[0].GetRunId())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, entry := range record.GetTimeline() {
		if hook := entry.GetHook(); hook.GetProcessorId() == "word-guard" && hook.GetDecision() == "abort" {
			found = hook.GetHook() == "processInput" && hook.GetReason() == "no secrets, please" && strings.HasPrefix(hook.GetInstanceId(), "word-guard-")
		}
	}
	if !found {
		t.Fatalf("the timeline names word-guard's abort in processInput: %v", record.GetTimeline())
	}
}

// TestAWarningStaysInTheRunRecord: a Go guard's Warn lets the run pass, streams a transient data
// chunk, and leaves the warning in the run's record with its processor, hook and details.
func TestAWarningStaysInTheRunRecord(t *testing.T) {
	address := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	guard := agentwire.NewProcessor("word-guard").On(agentwirev1.Hook_HOOK_PROCESS_INPUT,
		func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			return agentwire.Warn("tone", "the user is in a hurry", map[string]string{"word": "now"})
		})
	connect(t, ctx, guard, address)
	client, err := agentwire.Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	result, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "guarded", Text: "answer now", ResourceId: "go-warned"})
	if err != nil || result.GetTripwire() != nil || result.GetText() != "echo: answer now" {
		t.Fatalf("a warning lets the run pass: %v %v", result, err)
	}
	streamed := false
	for _, chunk := range result.GetData() {
		streamed = streamed || chunk.GetType() == "data-tone"
	}
	if !streamed {
		t.Fatalf("the warning streams as data-tone: %v", result.GetData())
	}
	var record *agentwirev1.RunRecord
	for deadline := time.Now().Add(10 * time.Second); record == nil; time.Sleep(20 * time.Millisecond) {
		record, err = client.GetRun(ctx, result.GetRunId())
		if status.Code(err) == codes.NotFound && time.Now().Before(deadline) {
			record = nil
		} else if err != nil {
			t.Fatal(err)
		}
	}
	var warnings []*agentwirev1.WarningEntry
	for _, entry := range record.GetTimeline() {
		if warning := entry.GetWarning(); warning != nil {
			warnings = append(warnings, warning)
		}
	}
	if len(warnings) != 1 || warnings[0].GetProcessorId() != "word-guard" || warnings[0].GetHook() != "processInput" ||
		warnings[0].GetKind() != "tone" || warnings[0].GetDetails().GetStructValue().GetFields()["word"].GetStringValue() != "now" {
		t.Fatalf("one warning of word-guard in processInput: %v", warnings)
	}
}

// wordGuard is the shared config's word-guard: it trips runs whose input says "secret".
func wordGuard() *agentwire.Processor {
	return agentwire.NewProcessor("word-guard").On(agentwirev1.Hook_HOOK_PROCESS_INPUT,
		func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			if strings.Contains(call.Text(), "secret") {
				return agentwire.Abort("no secrets, please")
			}
			return agentwire.Continue()
		})
}

// connect serves processor until the test ends and returns once it is connected.
func connect(t *testing.T, ctx context.Context, processor *agentwire.Processor, address string) {
	t.Helper()
	ready := make(chan struct{})
	go func() { _ = processor.Serve(ctx, address, ready) }()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the processor did not connect")
	}
}

func TestRemoteStreamRewriterChangesTheAnswer(t *testing.T) {
	address := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	redactor := agentwire.NewProcessor("digit-redactor").On(agentwirev1.Hook_HOOK_PROCESS_OUTPUT_STREAM,
		func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			delta := call.GetPart().GetTextDelta()
			if delta == nil {
				return agentwire.Continue()
			}
			masked := strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return '#'
				}
				return r
			}, delta.GetText())
			part := &agentwirev1.Chunk{RunId: call.GetPart().GetRunId(), Type: "text-delta",
				Payload: &agentwirev1.Chunk_TextDelta{TextDelta: &agentwirev1.DeltaPayload{Id: delta.GetId(), Text: masked}}}
			return &agentwirev1.HookResult{Outcome: &agentwirev1.HookResult_Replace{Replace: &agentwirev1.Replacement{Part: part}}}
		})
	connect(t, ctx, redactor, address)
	client, err := agentwire.Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	result, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "redacted", Text: "call 555 1234"})
	if err != nil {
		t.Fatal(err)
	}
	if result.GetText() != "echo: call ### ####" {
		t.Fatalf("the answer was not rewritten: %q", result.GetText())
	}
}

func TestWindowedStreamGuardRewritesWholeWindows(t *testing.T) {
	address := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var windows []int
	var mu sync.Mutex
	redactor := agentwire.NewProcessor("digit-redactor").OnWindow(8, 0,
		func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			mu.Lock()
			windows = append(windows, len(call.GetChunks()))
			mu.Unlock()
			for _, chunk := range call.GetChunks() {
				if delta := chunk.GetTextDelta(); delta != nil {
					delta.Text = strings.Map(func(r rune) rune {
						if r >= '0' && r <= '9' {
							return '#'
						}
						return r
					}, delta.GetText())
				}
			}
			return agentwire.ReplaceParts(call.GetChunks()...)
		})
	connect(t, ctx, redactor, address)
	client, err := agentwire.Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	result, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "redacted", Text: "1 2 3 4 5 6 7 8 9 10"})
	if err != nil {
		t.Fatal(err)
	}
	if result.GetText() != "echo: # # # # # # # # # ##" {
		t.Fatalf("the answer was not rewritten: %q", result.GetText())
	}
	mu.Lock()
	defer mu.Unlock()
	// 11 text deltas in windows of up to eight: two calls, not eleven. Both may be in flight at
	// once and are handled concurrently, so in either order; the server applies them in order.
	sort.Ints(windows)
	if len(windows) != 2 || windows[0] != 3 || windows[1] != 8 {
		t.Fatalf("windows: %v", windows)
	}
}

func TestProcessorDeathMidRunFollowsTheFailurePolicy(t *testing.T) {
	address := startServer(t)
	processorCtx, killProcessor := context.WithCancel(context.Background())
	called := make(chan struct{}, 1)
	flaky := agentwire.NewProcessor("flaky").On(agentwirev1.Hook_HOOK_PROCESS_INPUT,
		func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			called <- struct{}{}
			<-ctx.Done() // never answers: the process "dies" meanwhile
			return nil
		})
	connect(t, processorCtx, flaky, address)
	client, err := agentwire.Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	results := make(chan *agentwirev1.GenerateResponse, 1)
	go func() {
		result, err := client.Generate(context.Background(), &agentwirev1.RunRequest{AgentId: "fragile", Text: "hi"})
		if err != nil {
			t.Error(err)
		}
		results <- result
	}()
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("the processor was never called")
	}
	killProcessor()
	result := <-results
	reason := result.GetTripwire().GetReason()
	if result.GetFinishReason() != "other" || !strings.Contains(reason, "flaky") || !strings.Contains(reason, "disconnected") {
		t.Fatalf("expected a tripwire saying flaky disconnected, got %v", result)
	}
}

func TestRemoteToolServesAnAgent(t *testing.T) {
	address := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}}
	tools := agentwire.NewProcessor("tool-server").Tool("weather", "The weather in a city", schema,
		func(ctx context.Context, args map[string]any) (any, error) {
			return struct {
				City string `json:"city"`
				Temp int    `json:"temp"`
			}{City: args["city"].(string), Temp: 21}, nil
		})
	connect(t, ctx, tools, address)
	client, err := agentwire.Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	result, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "forecaster", Text: "weather in Paris?"})
	if err != nil {
		t.Fatal(err)
	}
	if result.GetText() != "done" {
		t.Fatalf("text: %q", result.GetText())
	}
	var toolResult *agentwirev1.ToolResultPart
	for _, message := range result.GetMessages() {
		for _, part := range message.GetParts() {
			if part.GetToolResult() != nil {
				toolResult = part.GetToolResult()
			}
		}
	}
	if toolResult == nil || toolResult.GetIsError() {
		t.Fatalf("tool result: %v", toolResult)
	}
	fields := toolResult.GetResult().GetStructValue().GetFields()
	if fields["city"].GetStringValue() != "Paris" || fields["temp"].GetNumberValue() != 21 {
		t.Fatalf("tool result: %v", fields)
	}
}

func TestAPIKeysGoWithEveryCall(t *testing.T) {
	address := startServerWith(t, filepath.Join("..", "..", "testdata", "keyed.toml"))
	ctx := context.Background()
	client, err := agentwire.DialWithKey(address, "client-suite-key")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	result, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "echo", Text: "hi", ThreadId: "t1", ResourceId: "suite-go"})
	if err != nil || result.GetText() != "echo: hi" {
		t.Fatalf("with the key: %v %v", result, err)
	}
	if _, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "echo", Text: "hi", ResourceId: "someone-else"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("another resource: %v", err)
	}
	anonymous, err := agentwire.DialWithKey(address, "")
	if err != nil {
		t.Fatal(err)
	}
	defer anonymous.Close()
	if _, err := anonymous.Generate(ctx, &agentwirev1.RunRequest{AgentId: "echo", Text: "hi"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a key: %v", err)
	}
}
