// Command stream-redactor masks digits in answers, taking the stream in windows of up to 32
// chunks (held at most 50 ms): one round trip per window, not per token. Declare
// `[processors.digit-redactor] kind = "remote"` in an agent's output_processors, then:
// go run ./examples/stream-redactor
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/agentwire/agentwire/clients/go/agentwire"
	"github.com/agentwire/agentwire/clients/go/agentwirev1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	mask := func(r rune) rune {
		if r >= '0' && r <= '9' {
			return '#'
		}
		return r
	}
	redactor := agentwire.NewProcessor("digit-redactor").OnWindow(32, 50*time.Millisecond,
		func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			for _, chunk := range call.GetChunks() {
				if delta := chunk.GetTextDelta(); delta != nil {
					delta.Text = strings.Map(mask, delta.GetText())
				}
			}
			return agentwire.ReplaceParts(call.GetChunks()...)
		})
	if err := redactor.Run(ctx, agentwire.Address()); err != nil {
		log.Fatal(err)
	}
}
