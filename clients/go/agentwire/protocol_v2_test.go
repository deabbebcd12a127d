package agentwire_test

// Protocol version 2 from Go, against the real server: one test per capability a remote
// processor gained — tagged system messages, data parts, answering in the model's place, a step's
// settings seen and changed, a failed tool, repaired messages before an API-error retry, and the
// steps and message sources of a call.

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentwire/agentwire/clients/go/agentwire"
	"github.com/agentwire/agentwire/clients/go/agentwirev1"
)

// seen collects what handlers saw, safely across their goroutines.
type seen struct {
	sync.Mutex
	entries []string
}

func (s *seen) add(format string, args ...any) {
	s.Lock()
	defer s.Unlock()
	s.entries = append(s.entries, fmt.Sprintf(format, args...))
}

func (s *seen) all() []string {
	s.Lock()
	defer s.Unlock()
	return slices.Clone(s.entries)
}

// generateV2 serves processor as "v2" and runs agent with text; it returns the answer.
func generateV2(t *testing.T, processor *agentwire.Processor, agent, text string) *agentwirev1.GenerateResponse {
	t.Helper()
	address := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	connect(t, ctx, processor, address)
	client, err := agentwire.Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	result, err := client.Generate(ctx, &agentwirev1.RunRequest{AgentId: agent, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return result
}

// inspected parses what mock/inspect saw.
func inspected(t *testing.T, result *agentwirev1.GenerateResponse) map[string]any {
	t.Helper()
	var seen map[string]any
	if err := json.Unmarshal([]byte(result.GetText()), &seen); err != nil {
		t.Fatalf("not an inspect answer: %q (%v)", result.GetText(), err)
	}
	return seen
}

func userMessage(text string) *agentwirev1.Message {
	return &agentwirev1.Message{Role: "user", Parts: []*agentwirev1.Part{{Part: &agentwirev1.Part_Text{Text: &agentwirev1.TextPart{Text: text}}}}}
}

func TestTaggedSystemMessagesSurviveIntoTheNextStep(t *testing.T) {
	var log seen
	v2 := agentwire.NewProcessor("v2").On(agentwirev1.Hook_HOOK_PROCESS_INPUT_STEP, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
		if call.GetStep() == 0 {
			return agentwire.Replace(&agentwirev1.Replacement{AddTaggedSystemMessages: []*agentwirev1.TaggedSystemMessage{{Tag: "policy", Text: "Answer in French."}}})
		}
		for _, tagged := range call.GetTaggedSystemMessages() {
			log.add("%s=%s", tagged.GetTag(), tagged.GetText())
		}
		model := "mock/inspect"
		return agentwire.Replace(&agentwirev1.Replacement{Model: &model})
	})
	answer := inspected(t, generateV2(t, v2, "v2-tagged", "1 + 1?"))
	if got := log.all(); !reflect.DeepEqual(got, []string{"policy=Answer in French."}) {
		t.Fatalf("step 1 saw %v", got)
	}
	if fmt.Sprint(answer["system"]) != "[Answer in French.]" {
		t.Fatalf("the model saw system %v", answer["system"])
	}
}

func TestDataPartsReachAStreamProcessorThatAsks(t *testing.T) {
	var log seen
	v2 := agentwire.NewProcessor("v2").
		On(agentwirev1.Hook_HOOK_PROCESS_INPUT, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			result := agentwire.Continue()
			result.Emit = append(result.Emit, agentwire.DataChunk("data-audit", map[string]bool{"checked": true}, false))
			return result
		}).
		On(agentwirev1.Hook_HOOK_PROCESS_OUTPUT_STREAM, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			log.add("%s", call.GetPart().GetType())
			return nil
		}).
		ReceiveDataParts()
	generateV2(t, v2, "v2-data", "hi")
	if !slices.Contains(log.all(), "data-audit") {
		t.Fatalf("the stream processor saw %v", log.all())
	}
}

func TestProcessLLMRequestAnswersInTheModelsPlace(t *testing.T) {
	v2 := agentwire.NewProcessor("v2").On(agentwirev1.Hook_HOOK_PROCESS_LLM_REQUEST, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
		return agentwire.Respond(agentwire.TextDelta("from "), agentwire.TextDelta("the cache"))
	})
	result := generateV2(t, v2, "v2-cache", "hello")
	if result.GetFinishReason() != "stop" || result.GetText() != "from the cache" {
		t.Fatalf("expected the cached answer, got %v", result)
	}
}

func TestEverySettingOfAStepIsSeenAndChanged(t *testing.T) {
	var log seen
	names := func(tools []*agentwirev1.ToolSpec) []string {
		var names []string
		for _, tool := range tools {
			names = append(names, tool.GetName())
		}
		return names
	}
	v2 := agentwire.NewProcessor("v2").
		On(agentwirev1.Hook_HOOK_PROCESS_INPUT_STEP, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			step := call.GetStepInput()
			log.add("input step %v %v", names(step.GetTools()), step.GetSettings().GetTemperature())
			temperature, choice := 0.9, "required"
			options, _ := structpb.NewStruct(map[string]any{"reasoning_effort": "low"})
			schema, _ := structpb.NewStruct(map[string]any{"type": "object"})
			return agentwire.Replace(&agentwirev1.Replacement{
				Tools:            &agentwirev1.ToolSpecList{Tools: []*agentwirev1.ToolSpec{{Name: "lookup", Description: "Looks things up"}}},
				ModelSettings:    &agentwirev1.ModelSettings{Temperature: &temperature},
				ProviderOptions:  options,
				StructuredOutput: schema,
				ToolChoice:       &choice,
			})
		}).
		On(agentwirev1.Hook_HOOK_PROCESS_LLM_REQUEST, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			log.add("request %v %s", names(call.GetStepInput().GetTools()), call.GetStepInput().GetToolChoice())
			return nil
		})
	answer := inspected(t, generateV2(t, v2, "v2-settings", "look it up"))
	if got := log.all(); !reflect.DeepEqual(got, []string{"input step [calculator] 0.3", "request [lookup] required"}) {
		t.Fatalf("the processor saw %v", got)
	}
	settings, _ := answer["settings"].(map[string]any)
	if fmt.Sprint(answer["tools"]) != "[lookup]" || answer["tool_choice"] != "required" || settings["temperature"] != 0.9 ||
		fmt.Sprint(answer["provider_options"]) != "map[reasoning_effort:low]" || fmt.Sprint(answer["structured_output"]) != "map[type:object]" {
		t.Fatalf("the model saw %v", answer)
	}
}

func TestToolFailuresStepsAndSourcesAreShown(t *testing.T) {
	var log seen
	v2 := agentwire.NewProcessor("v2").
		On(agentwirev1.Hook_HOOK_PROCESS_TOOL_RESULT, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			log.add("tool is_error %v", call.GetToolResult().GetIsError())
			return nil
		}).
		On(agentwirev1.Hook_HOOK_PROCESS_OUTPUT_STEP, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			var calls []int
			for _, step := range call.GetSteps() {
				calls = append(calls, len(step.GetToolCalls()))
			}
			sources := call.Sources()
			slices.Sort(sources)
			log.add("step %d steps %v sources %v", call.GetStep(), calls, slices.Compact(sources))
			return nil
		})
	if result := generateV2(t, v2, "v2-tool-error", "1 +"); result.GetText() != "sorry" {
		t.Fatalf("unexpected answer %v", result)
	}
	want := []string{"step 0 steps [1] sources [input response]", "tool is_error true", "step 1 steps [1 0] sources [input response]"}
	if got := log.all(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the processor saw %v", got)
	}
}

func TestProcessAPIErrorRepairsTheMessagesBeforeTheRetry(t *testing.T) {
	v2 := agentwire.NewProcessor("v2").
		On(agentwirev1.Hook_HOOK_PROCESS_API_ERROR, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			return agentwire.RetryAPICall(userMessage("a shorter question"))
		}).
		On(agentwirev1.Hook_HOOK_PROCESS_INPUT_STEP, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
			if call.GetRetryCount() == 0 {
				return nil
			}
			model := "mock/inspect"
			return agentwire.Replace(&agentwirev1.Replacement{Model: &model})
		})
	answer := inspected(t, generateV2(t, v2, "v2-repair", "a very long question"))
	messages, _ := answer["messages"].([]any)
	if len(messages) != 1 || messages[0].(map[string]any)["text"] != "a shorter question" {
		t.Fatalf("the retry sent %v", answer["messages"])
	}
}
