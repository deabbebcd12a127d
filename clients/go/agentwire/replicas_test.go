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
		expectGuarded(t, ctx, address)
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

// TestAReplicaThatGoesAwayAndComesBackIsServedAgain: a replica killed under the processor leaves
// Connected while the other keeps its session; started again at its address, it is reconnected
// and its runs are guarded again.
func TestAReplicaThatGoesAwayAndComesBackIsServedAgain(t *testing.T) {
	steady := startServer(t)
	dir := t.TempDir()
	replica, address := spawnServer(t, config, "127.0.0.1:0", dir)
	defer func() { _ = replica.Process.Kill(); _ = replica.Wait() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	guard := wordGuard()
	go func() { _ = guard.RunReplicas(ctx, []string{steady, address}) }()
	waitFor(t, guard, "both replicas connected", func(connected []string) bool {
		return slices.Contains(connected, steady) && slices.Contains(connected, address)
	})

	_ = replica.Process.Kill()
	_ = replica.Wait()
	waitFor(t, guard, "the killed replica leaves", func(connected []string) bool {
		return slices.Equal(connected, []string{steady})
	})
	expectGuarded(t, ctx, steady)

	replica, _ = spawnServer(t, config, address, dir)
	waitFor(t, guard, "the replica, back, is reconnected", func(connected []string) bool {
		return slices.Contains(connected, address)
	})
	expectGuarded(t, ctx, address)
}

// waitFor polls the guard's Connected until ready holds, failing after 20 s.
func waitFor(t *testing.T, guard *agentwire.Processor, what string, ready func([]string) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ready(guard.Connected()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: connected %v", what, guard.Connected())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expectGuarded runs a secret past the replica at address and expects the guard's tripwire.
func expectGuarded(t *testing.T, ctx context.Context, address string) {
	t.Helper()
	client, err := agentwire.Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	result, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: "guarded", Text: "tell me the secret"})
	if err != nil || result.GetTripwire().GetReason() != "no secrets, please" {
		t.Fatalf("%s: expected the guard's tripwire, got %v %v", address, result, err)
	}
}
