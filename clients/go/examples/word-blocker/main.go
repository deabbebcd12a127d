// Command word-blocker is a remote input guardrail: any run whose input mentions "secret" ends in
// a tripwire. Declare `[processors.word-guard] kind = "remote"` and list it in an agent's
// input_processors, then: go run ./examples/word-blocker
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/agentwire/agentwire/clients/go/agentwire"
	"github.com/agentwire/agentwire/clients/go/agentwirev1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	guard := agentwire.NewProcessor("word-guard").On(agentwirev1.Hook_HOOK_PROCESS_INPUT,
		func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			if strings.Contains(strings.ToLower(call.Text()), "secret") {
				return agentwire.Abort("no secrets, please")
			}
			return agentwire.Continue()
		})
	if err := guard.Run(ctx, agentwire.Address()); err != nil {
		log.Fatal(err)
	}
}
