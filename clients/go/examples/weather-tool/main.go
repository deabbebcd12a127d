// Command weather-tool executes the `weather` tool for agents that list it. Declare
// `[tools.weather] kind = "remote"` with `server = "tool-server"`, then:
// go run ./examples/weather-tool
package main

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/agentwire/agentwire/clients/go/agentwire"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	schema := map[string]any{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required":   []any{"city"},
	}
	tools := agentwire.NewProcessor("tool-server").Tool("weather", "The weather in a city", schema,
		func(ctx context.Context, args map[string]any) (any, error) {
			return map[string]any{"city": args["city"], "temp": 21, "sky": "clear"}, nil
		})
	if err := tools.Run(ctx, agentwire.Address()); err != nil {
		log.Fatal(err)
	}
}
