package agentwire_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentwire/agentwire/clients/go/agentwire"
	"github.com/agentwire/agentwire/clients/go/agentwirev1"
)

// TestOneProcessorServesEveryReplica: given several replicas (an address and a dns:/// name), the
// processor keeps a session with each, so a run trips its guard on whichever replica serves it;
// when ctx ends, every session closes.
func TestOneProcessorServesEveryReplica(t *testing.T) {
	first, second := startServer(t), startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	guard := wordGuard()
	port := second[strings.LastIndex(second, ":")+1:]
	done := make(chan error, 1)
	go func() { done <- guard.RunReplicas(ctx, []string{first, "dns:///localhost:" + port}) }()
	deadline := time.Now().Add(10 * time.Second)
	for !(slices.Contains(guard.Connected(), first) && slices.Contains(guard.Connected(), second)) {
		if time.Now().After(deadline) {
			t.Fatalf("not connected to both replicas: %v", guard.Connected())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, address := range []string{first, second} {
		client, err := agentwire.Dial(address)
		if err != nil {
			t.Fatal(err)
		}
		result, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "guarded", Text: "tell me the secret"})
		if err != nil || result.GetTripwire().GetReason() != "no secrets, please" {
			t.Fatalf("%s: expected the guard's tripwire, got %v %v", address, result, err)
		}
		client.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for len(guard.Connected()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if connected := guard.Connected(); len(connected) > 0 {
		t.Fatalf("sessions left open: %v", connected)
	}
}
