package agentwire

import (
	"context"
	"testing"
	"time"
)

// TestBackoffStartsAgainAfterAWelcomedSession proves the reconnect wait doubles only while
// sessions fail before their welcome, and is back to 100 ms after one the server welcomed (a
// restarted server gets its processors back at once, not after the waits of earlier failures).
func TestBackoffStartsAgainAfterAWelcomedSession(t *testing.T) {
	var waits backoff
	var got []time.Duration
	for _, welcomed := range []bool{false, false, false, true, false} {
		got = append(got, waits.after(welcomed))
	}
	want := []time.Duration{100, 200, 400, 100, 200}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
	for range 20 {
		waits.after(false)
	}
	if wait := waits.after(false); wait != 5*time.Second {
		t.Fatalf("the wait is capped at 5 s, got %v", wait)
	}
}

// TestACallContextHasOneCancel proves a hook call's context, with or without a deadline, is
// ended by the one cancel func the session keeps (none is dropped and leaked).
func TestACallContextHasOneCancel(t *testing.T) {
	for _, deadline := range []int64{0, time.Now().Add(time.Hour).UnixMilli()} {
		ctx, cancel := callContext(context.Background(), deadline)
		if _, has := ctx.Deadline(); has != (deadline > 0) {
			t.Fatalf("deadline %d: has deadline %v", deadline, has)
		}
		cancel()
		if ctx.Err() == nil {
			t.Fatalf("deadline %d: cancel did not end the call's context", deadline)
		}
	}
}
