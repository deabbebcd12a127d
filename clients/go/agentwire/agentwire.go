// Package agentwire calls agentwire agents and serves remote processors (guardrails) from Go.
//
//	guard := agentwire.NewProcessor("word-guard")
//	guard.On(agentwirev1.Hook_HOOK_PROCESS_INPUT, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
//		if strings.Contains(call.Text(), "secret") {
//			return agentwire.Abort("no secrets, please")
//		}
//		return agentwire.Continue()
//	})
//	err := guard.Run(ctx, "127.0.0.1:50051")
//
// A stream guard takes the answer's chunks in windows rather than one call per token:
//
//	guard.OnWindow(32, 50*time.Millisecond, func(ctx context.Context, call agentwire.Call) *agentwirev1.HookResult {
//		return agentwire.ReplaceParts(redact(call.GetChunks())...)
//	})
//
// Each call's ctx is cancelled when the server cancels the call (its run went away).
//
// Handlers can do what an in-process processor can (protocol version 2): the call carries the
// steps so far (GetSteps), the step's model call (GetStepInput: tools, tool choice, settings,
// provider options, output schema), where each message came from (Sources, InputMessages) and
// the tagged system messages; Replace takes any Replacement (tagged system messages, a step's
// tools and settings, ...), Respond answers in the model's place from processLLMRequest, and
// RetryAPICall may carry repaired messages. ReceiveDataParts lets processOutputStream see custom
// `data-*` chunks.
//
// The same connection executes tools agents call (declared as `[tools.<name>] kind = "remote"`,
// `server` = this processor id):
//
//	p.Tool("weather", "Weather by city", schema, func(ctx context.Context, args map[string]any) (any, error) {
//		return map[string]any{"city": args["city"], "temp": 21}, nil
//	})
package agentwire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/agentwire/agentwire/clients/go/agentwirev1"
)

// The remote-processor protocol versions this package speaks, inclusive.
const (
	MinProtocolVersion = 1
	ProtocolVersion    = 2
)

// Address is the server to use: AGENTWIRE_ADDRESS, or 127.0.0.1:50051.
func Address() string {
	if address := os.Getenv("AGENTWIRE_ADDRESS"); address != "" {
		return address
	}
	return "127.0.0.1:50051"
}

// Client is a connection to an agentwire server.
type Client struct {
	conn   *grpc.ClientConn
	Agents agentwirev1.AgentServiceClient
	Memory agentwirev1.MemoryServiceClient
	// Runs reads run records: how each run ended and its timeline (see Client.AllRuns).
	Runs agentwirev1.RunServiceClient
}

// TLS connects over TLS: CAFile is the PEM of the CA that signed the server's certificate (empty:
// the system roots); CertFile and KeyFile, the client certificate for servers that require mTLS.
type TLS struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// credentials reads the files.
func (t TLS) credentials() (credentials.TransportCredentials, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("agentwire: TLS CA: %w", err)
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("agentwire: TLS CA: no certificate in %s", t.CAFile)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("agentwire: TLS: give both CertFile and KeyFile for a client certificate, or neither")
	}
	if t.CertFile != "" {
		certificate, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("agentwire: TLS client certificate: %w", err)
		}
		config.Certificates = []tls.Certificate{certificate}
	}
	return credentials.NewTLS(config), nil
}

// transport is plaintext without TLS, else TLS as it says.
func transport(t *TLS) (grpc.DialOption, error) {
	return transportFor(t, "")
}

// transportFor is transport, checking the server's certificate against serverName when it is not
// empty.
func transportFor(t *TLS, serverName string) (grpc.DialOption, error) {
	if t == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	creds, err := t.credentials()
	if err != nil {
		return nil, err
	}
	if serverName != "" {
		if err := creds.OverrideServerName(serverName); err != nil { //nolint:staticcheck // the one way to name the server per connection
			return nil, err
		}
	}
	return grpc.WithTransportCredentials(creds), nil
}

// Option configures Dial.
type Option func(*dialConfig)

type dialConfig struct {
	key string
	tls *TLS
}

// WithAPIKey sends key with every call as `authorization: Bearer <key>`, for servers with
// `[[auth.keys]]` (default: AGENTWIRE_API_KEY; none when empty).
func WithAPIKey(key string) Option { return func(c *dialConfig) { c.key = key } }

// WithTLS connects over TLS (default: plaintext).
func WithTLS(t TLS) Option { return func(c *dialConfig) { c.tls = &t } }

// Dial connects to a server: plaintext unless WithTLS, with the API key of WithAPIKey or
// AGENTWIRE_API_KEY.
func Dial(address string, options ...Option) (*Client, error) {
	config := dialConfig{key: os.Getenv("AGENTWIRE_API_KEY")}
	for _, option := range options {
		option(&config)
	}
	secure, err := transport(config.tls)
	if err != nil {
		return nil, err
	}
	dialOptions := []grpc.DialOption{secure}
	if config.key != "" {
		dialOptions = append(dialOptions, grpc.WithPerRPCCredentials(apiKey(config.key)))
	}
	conn, err := grpc.NewClient(address, dialOptions...)
	if err != nil {
		return nil, err
	}
	return &Client{
		conn:   conn,
		Agents: agentwirev1.NewAgentServiceClient(conn),
		Memory: agentwirev1.NewMemoryServiceClient(conn),
		Runs:   agentwirev1.NewRunServiceClient(conn),
	}, nil
}

// DialWithKey is Dial(address, WithAPIKey(key)).
func DialWithKey(address, key string) (*Client, error) {
	return Dial(address, WithAPIKey(key))
}

// apiKey sends an API key with every call.
type apiKey string

func (key apiKey) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(key)}, nil
}

// RequireTransportSecurity is false: agentwire on loopback or behind a TLS proxy speaks plaintext.
func (apiKey) RequireTransportSecurity() bool { return false }

// Generate runs an agent to the end; the result's Tripwire is set when a processor aborted.
func (c *Client) Generate(ctx context.Context, request *agentwirev1.RunRequest) (*agentwirev1.GenerateResponse, error) {
	return c.Agents.Generate(ctx, request)
}

// AllRuns yields the run records that filter selects (its PageToken ignored), newest first and
// without their timelines, page after page until the last; it stops at the first error, yielded
// with a nil record. A key that is not an admin key names a resource.
func (c *Client) AllRuns(ctx context.Context, filter *agentwirev1.ListRunsRequest) iter.Seq2[*agentwirev1.RunRecord, error] {
	return func(yield func(*agentwirev1.RunRecord, error) bool) {
		request := proto.Clone(filter).(*agentwirev1.ListRunsRequest)
		request.PageToken = ""
		for {
			page, err := c.Runs.ListRuns(ctx, request)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, run := range page.GetRuns() {
				if !yield(run, nil) {
					return
				}
			}
			if page.GetNextPageToken() == "" {
				return
			}
			request.PageToken = page.GetNextPageToken()
		}
	}
}

// GetRun is one run's record with its whole timeline (NotFound until the server has written it).
func (c *Client) GetRun(ctx context.Context, runID string) (*agentwirev1.RunRecord, error) {
	return c.Runs.GetRun(ctx, &agentwirev1.GetRunRequest{RunId: runID})
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Call is one hook call.
type Call struct{ *agentwirev1.HookCall }

// Text is the text of the call's messages, joined with spaces.
func (c Call) Text() string {
	return joinedText(c.GetMessages())
}

// InputText is the text of the messages the client sent in this run, joined with spaces (not
// the remembered history: what a guard of the user's input checks).
func (c Call) InputText() string {
	return joinedText(c.InputMessages())
}

// joinedText is the text parts of messages, joined with spaces.
func joinedText(messages []*agentwirev1.Message) string {
	var texts []string
	for _, message := range messages {
		for _, part := range message.GetParts() {
			if text := part.GetText(); text != nil {
				texts = append(texts, text.GetText())
			}
		}
	}
	return strings.Join(texts, " ")
}

// Sources says where each of the call's messages came from, in order: "memory", "input",
// "response" or "signal".
func (c Call) Sources() []string {
	names := map[agentwirev1.MessageSource]string{
		agentwirev1.MessageSource_MESSAGE_SOURCE_MEMORY:   "memory",
		agentwirev1.MessageSource_MESSAGE_SOURCE_INPUT:    "input",
		agentwirev1.MessageSource_MESSAGE_SOURCE_RESPONSE: "response",
		agentwirev1.MessageSource_MESSAGE_SOURCE_SIGNAL:   "signal",
	}
	sources := make([]string, 0, len(c.GetMessageSources()))
	for _, source := range c.GetMessageSources() {
		name, ok := names[source]
		if !ok {
			name = "unknown"
		}
		sources = append(sources, name)
	}
	return sources
}

// InputMessages are the messages the client sent in this run (not the remembered ones).
func (c Call) InputMessages() []*agentwirev1.Message {
	var input []*agentwirev1.Message
	sources := c.Sources()
	for index, message := range c.GetMessages() {
		if index < len(sources) && sources[index] == "input" {
			input = append(input, message)
		}
	}
	return input
}

// Continue lets the call pass unchanged.
func Continue() *agentwirev1.HookResult {
	return &agentwirev1.HookResult{Outcome: &agentwirev1.HookResult_Continue{Continue: &agentwirev1.Continue{}}}
}

// Warn lets the call pass with a warning of what it found: the client gets a transient
// "data-<kind>" chunk with details (anything that marshals to JSON; nil for none), and the run's
// record keeps the warning. kind is 1 to 64 lowercase letters, digits or dashes, e.g. "pii".
func Warn(kind, message string, details any) *agentwirev1.HookResult {
	return WithWarning(Continue(), kind, message, details)
}

// WithWarning adds a warning (see Warn) to any result, e.g. a Replace, and returns it.
func WithWarning(result *agentwirev1.HookResult, kind, message string, details any) *agentwirev1.HookResult {
	value, err := jsonValue(details)
	if err != nil {
		panic(fmt.Sprintf("agentwire: %s warning details are not JSON: %v", kind, err))
	}
	result.Warnings = append(result.Warnings, &agentwirev1.Warning{Kind: kind, Message: message, Details: value})
	return result
}

// Abort stops the run with a tripwire.
func Abort(reason string) *agentwirev1.HookResult {
	return &agentwirev1.HookResult{Outcome: &agentwirev1.HookResult_Abort{Abort: &agentwirev1.Abort{Reason: reason}}}
}

// AbortWith stops the run with a tripwire carrying metadata (anything that marshals to JSON; nil
// for none); retry asks processOutputStep for another attempt.
func AbortWith(reason string, retry bool, metadata any) *agentwirev1.HookResult {
	abort := &agentwirev1.Abort{Reason: reason, Retry: retry}
	if metadata != nil {
		value, err := jsonValue(metadata)
		if err != nil {
			panic(fmt.Sprintf("agentwire: abort metadata is not JSON: %v", err))
		}
		abort.Metadata = value
	}
	return &agentwirev1.HookResult{Outcome: &agentwirev1.HookResult_Abort{Abort: abort}}
}

// Replace replaces what the hook allows, as the Replacement says.
func Replace(replacement *agentwirev1.Replacement) *agentwirev1.HookResult {
	return &agentwirev1.HookResult{Outcome: &agentwirev1.HookResult_Replace{Replace: replacement}}
}

// Respond answers processLLMRequest in the model's place (a cache hit): the chunks are replayed
// as the model's stream, and the model is not called.
func Respond(chunks ...*agentwirev1.Chunk) *agentwirev1.HookResult {
	return Replace(&agentwirev1.Replacement{Response: &agentwirev1.ChunkList{Chunks: chunks}})
}

// RetryAPICall asks processAPIError's model call again, with these (repaired) messages when any.
func RetryAPICall(messages ...*agentwirev1.Message) *agentwirev1.HookResult {
	retry := &agentwirev1.RetryApiCall{}
	if len(messages) > 0 {
		retry.Messages = &agentwirev1.MessageList{Messages: messages}
	}
	return &agentwirev1.HookResult{Outcome: &agentwirev1.HookResult_RetryApiCall{RetryApiCall: retry}}
}

// TextDelta is a text chunk, for Respond or ReplaceParts.
func TextDelta(text string) *agentwirev1.Chunk {
	return &agentwirev1.Chunk{Type: "text-delta", Payload: &agentwirev1.Chunk_TextDelta{TextDelta: &agentwirev1.DeltaPayload{Text: text}}}
}

// DataChunk is a custom chunk to emit with an answer (append it to the result's Emit); kind
// starts with "data-", data marshals to JSON, and a transient one is never stored.
func DataChunk(kind string, data any, transient bool) *agentwirev1.Chunk {
	value, err := jsonValue(data)
	if err != nil {
		panic(fmt.Sprintf("agentwire: %s data is not JSON: %v", kind, err))
	}
	return &agentwirev1.Chunk{Type: kind, Payload: &agentwirev1.Chunk_Data{Data: &agentwirev1.DataPayload{Data: value, Transient: transient}}}
}

// jsonValue turns anything that marshals to JSON into a protobuf Value.
func jsonValue(value any) (*structpb.Value, error) {
	encoded, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	var decoded any
	if err := json.Unmarshal(encoded, &decoded); err != nil {
		return nil, err
	}
	return structpb.NewValue(decoded)
}

// Drop drops the chunk (processOutputStream) or the whole window.
func Drop() *agentwirev1.HookResult {
	return &agentwirev1.HookResult{Outcome: &agentwirev1.HookResult_Drop{Drop: &agentwirev1.Drop{}}}
}

// ReplaceParts replaces a window's chunks with these, in order.
func ReplaceParts(chunks ...*agentwirev1.Chunk) *agentwirev1.HookResult {
	replacement := &agentwirev1.Replacement{Parts: &agentwirev1.ChunkList{Chunks: chunks}}
	return &agentwirev1.HookResult{Outcome: &agentwirev1.HookResult_Replace{Replace: replacement}}
}

// Handler answers one hook call; returning nil lets it pass.
type Handler func(ctx context.Context, call Call) *agentwirev1.HookResult

// Processor is a remote processor: register handlers with On, then Run.
type Processor struct {
	ID         string
	InstanceID string
	// Token is sent as `authorization: Bearer <token>` when the server requires one
	// (`[[processor_tokens]]`; NewProcessor takes AGENTWIRE_PROCESSOR_TOKEN).
	Token string
	// TLS connects over TLS when set (default: plaintext).
	TLS *TLS
	// Logger gets the connect and reconnect lines (default: slog.Default()).
	Logger *slog.Logger
	// MaxConcurrency is how many calls it takes at once (0: no limit); more wait on the server.
	MaxConcurrency uint32
	handlers       map[agentwirev1.Hook]Handler
	options        map[agentwirev1.Hook]*agentwirev1.HookOptions
	tools          map[string]ToolFunc
	toolSpecs      []*agentwirev1.ToolSpec
	dataParts      bool
	// ResolveEvery is how often RunReplicas resolves a dns:/// address again (0: 30 seconds).
	ResolveEvery time.Duration
	sessions     sessions
}

// ToolFunc executes a tool: args are the (schema-checked) arguments; the result must marshal to
// JSON. An error is shown to the model as the tool's result.
type ToolFunc func(ctx context.Context, args map[string]any) (any, error)

// Tool executes tool name; parameters is its JSON schema (nil: any object).
func (p *Processor) Tool(name, description string, parameters map[string]any, fn ToolFunc) *Processor {
	if parameters == nil {
		parameters = map[string]any{"type": "object"}
	}
	schema, err := structpb.NewStruct(parameters)
	if err != nil {
		panic(fmt.Sprintf("agentwire: tool %s: the schema is not JSON: %v", name, err))
	}
	p.tools[name] = fn
	p.toolSpecs = append(p.toolSpecs, &agentwirev1.ToolSpec{Name: name, Description: description, Parameters: schema})
	return p
}

func (p *Processor) runTool(ctx context.Context, call *agentwirev1.ToolInvocation) *agentwirev1.ToolOutput {
	output := &agentwirev1.ToolOutput{CallId: call.GetCallId()}
	fn, ok := p.tools[call.GetToolName()]
	if !ok {
		output.Error = "unknown tool " + call.GetToolName()
		return output
	}
	args, _ := call.GetArgs().AsInterface().(map[string]any)
	result, err := fn(ctx, args)
	if err != nil {
		output.Error = err.Error()
		return output
	}
	// Through JSON, so structs and typed maps work too.
	output.Result, err = jsonValue(result)
	if err != nil {
		output.Error = "the tool's result is not JSON: " + err.Error()
	}
	return output
}

// NewProcessor makes a processor that connects as id.
func NewProcessor(id string) *Processor {
	return &Processor{
		ID:         id,
		InstanceID: fmt.Sprintf("%s-%d", id, time.Now().UnixNano()),
		Token:      os.Getenv("AGENTWIRE_PROCESSOR_TOKEN"),
		handlers:   map[agentwirev1.Hook]Handler{},
		options:    map[agentwirev1.Hook]*agentwirev1.HookOptions{},
		tools:      map[string]ToolFunc{},
	}
}

// On serves hook with handler.
func (p *Processor) On(hook agentwirev1.Hook, handler Handler) *Processor {
	p.handlers[hook] = handler
	return p
}

// Observe serves hook fire-and-forget: runs never wait for the handler, and its answer is ignored.
func (p *Processor) Observe(hook agentwirev1.Hook, handler Handler) *Processor {
	p.handlers[hook] = handler
	p.options[hook] = &agentwirev1.HookOptions{Hook: hook, Mode: agentwirev1.HookMode_HOOK_MODE_OBSERVE}
	return p
}

// OnWindow serves processOutputStream in windows of up to maxChunks content chunks
// (call.GetChunks()), each sent when full, maxDelay after its first chunk (0: no time bound), or
// when the step's stream ends. The answer replaces the window: ReplaceParts, Drop, Abort, or nil to
// keep it.
func (p *Processor) OnWindow(maxChunks int, maxDelay time.Duration, handler Handler) *Processor {
	hook := agentwirev1.Hook_HOOK_PROCESS_OUTPUT_STREAM
	p.handlers[hook] = handler
	window := &agentwirev1.StreamWindow{MaxChunks: uint32(maxChunks), MaxDelayMs: uint32(maxDelay.Milliseconds())}
	p.options[hook] = &agentwirev1.HookOptions{Hook: hook, Mode: agentwirev1.HookMode_HOOK_MODE_BLOCKING, Window: window}
	return p
}

// ReceiveDataParts lets processOutputStream (On or OnWindow) see custom `data-*` chunks too,
// which otherwise pass this processor unseen.
func (p *Processor) ReceiveDataParts() *Processor {
	p.dataParts = true
	return p
}

// Serve runs one session: it returns when ctx is done or the stream ends. ready (if not nil) is
// closed once the server welcomed the processor.
func (p *Processor) Serve(ctx context.Context, address string, ready chan<- struct{}) error {
	return p.serve(ctx, address, "", ready)
}

// serve is Serve to address, whose TLS certificate must name serverName when it is not empty (an
// address a dns:/// name resolved to).
func (p *Processor) serve(ctx context.Context, address, serverName string, ready chan<- struct{}) error {
	if len(p.handlers) == 0 && len(p.tools) == 0 {
		return errors.New("register at least one hook with On, or a tool with Tool")
	}
	secure, err := transportFor(p.TLS, serverName)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(address, secure)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer p.sessions.ended(address)
	if p.Token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.Token)
	}
	stream, err := agentwirev1.NewProcessorServiceClient(conn).Connect(ctx)
	if err != nil {
		return err
	}
	hooks := make([]agentwirev1.Hook, 0, len(p.handlers))
	for hook := range p.handlers {
		hooks = append(hooks, hook)
	}
	options := make([]*agentwirev1.HookOptions, 0, len(p.options)+1)
	streamHook := agentwirev1.Hook_HOOK_PROCESS_OUTPUT_STREAM
	for hook, option := range p.options {
		if hook == streamHook && p.dataParts {
			option = &agentwirev1.HookOptions{Hook: hook, Mode: option.GetMode(), Window: option.GetWindow(), DataParts: true}
		}
		options = append(options, option)
	}
	if _, listed := p.options[streamHook]; p.dataParts && !listed {
		options = append(options, &agentwirev1.HookOptions{Hook: streamHook, DataParts: true})
	}
	hello := &agentwirev1.Hello{
		ProcessorId: p.ID, InstanceId: p.InstanceID,
		MinProtocolVersion: MinProtocolVersion, MaxProtocolVersion: ProtocolVersion,
		Hooks: hooks, HookOptions: options, MaxConcurrency: p.MaxConcurrency, Tools: p.toolSpecs,
	}
	if err := stream.Send(&agentwirev1.ProcessorMessage{Message: &agentwirev1.ProcessorMessage_Hello{Hello: hello}}); err != nil {
		return err
	}
	var sending sync.Mutex // a gRPC stream takes one sender at a time
	send := func(message *agentwirev1.ProcessorMessage) {
		sending.Lock()
		defer sending.Unlock()
		_ = stream.Send(message)
	}
	var calls sync.Map // call id → its context's cancel func
	defer calls.Range(func(_, cancel any) bool { cancel.(context.CancelFunc)(); return true })
	for {
		message, err := stream.Recv()
		if err != nil {
			return err
		}
		switch kind := message.GetMessage().(type) {
		case *agentwirev1.ServerMessage_Welcome:
			verb := "connected"
			if p.sessions.welcomed(address) {
				verb = "reconnected"
			}
			p.logger().Info(fmt.Sprintf("agentwire: %s as %s (instance %s) to %s, protocol %d", verb, p.ID, p.InstanceID, address, kind.Welcome.GetProtocolVersion()))
			if ready != nil {
				close(ready)
				ready = nil
			}
		case *agentwirev1.ServerMessage_Ping:
			send(&agentwirev1.ProcessorMessage{Message: &agentwirev1.ProcessorMessage_Pong{Pong: &agentwirev1.Pong{Nonce: kind.Ping.GetNonce()}}})
		case *agentwirev1.ServerMessage_Call:
			// The handler's ctx ends at the call's deadline, or when the server cancels it.
			callCtx, cancel := callContext(ctx, kind.Call.GetDeadlineUnixMs())
			calls.Store(kind.Call.GetCallId(), cancel)
			go func(call *agentwirev1.HookCall) {
				defer func() {
					if cancel, ok := calls.LoadAndDelete(call.GetCallId()); ok {
						cancel.(context.CancelFunc)()
					}
				}()
				result := p.answer(callCtx, call)
				// A call cancelled by the server or by shutdown is never answered: a guardrail
				// interrupted mid-check must not be taken for a pass.
				if callCtx.Err() == nil {
					send(&agentwirev1.ProcessorMessage{Message: &agentwirev1.ProcessorMessage_Result{Result: result}})
				}
			}(kind.Call)
		case *agentwirev1.ServerMessage_ToolCall:
			callCtx, cancel := context.WithCancel(ctx)
			calls.Store(kind.ToolCall.GetCallId(), cancel)
			go func(call *agentwirev1.ToolInvocation) {
				defer func() {
					if cancel, ok := calls.LoadAndDelete(call.GetCallId()); ok {
						cancel.(context.CancelFunc)()
					}
				}()
				output := p.runTool(callCtx, call)
				if callCtx.Err() == nil {
					send(&agentwirev1.ProcessorMessage{Message: &agentwirev1.ProcessorMessage_ToolResult{ToolResult: output}})
				}
			}(kind.ToolCall)
		case *agentwirev1.ServerMessage_Cancel:
			if cancel, ok := calls.LoadAndDelete(kind.Cancel.GetCallId()); ok {
				cancel.(context.CancelFunc)()
			}
		case *agentwirev1.ServerMessage_Drain:
			// The server is shutting down: it sends no new calls and closes the stream once the
			// calls in flight are answered; Run then reconnects with backoff.
		}
	}
}

// callContext is a hook call's context: ended at its deadline (milliseconds since the epoch; 0:
// none) or by its cancel func, which the caller must call once the call is done.
func callContext(ctx context.Context, deadlineUnixMs int64) (context.Context, context.CancelFunc) {
	if deadlineUnixMs > 0 {
		return context.WithDeadline(ctx, time.UnixMilli(deadlineUnixMs))
	}
	return context.WithCancel(ctx)
}

func (p *Processor) answer(ctx context.Context, call *agentwirev1.HookCall) (result *agentwirev1.HookResult) {
	defer func() {
		if recovered := recover(); recovered != nil {
			result = &agentwirev1.HookResult{Outcome: &agentwirev1.HookResult_Failure{Failure: &agentwirev1.Failure{Message: fmt.Sprint("handler panicked: ", recovered)}}}
		}
		result.CallId = call.GetCallId()
	}()
	if handler, ok := p.handlers[call.GetHook()]; ok {
		result = handler(ctx, Call{call})
	}
	if result == nil {
		result = Continue()
	}
	return result
}

// Run serves until ctx is done, reconnecting with backoff. A refusal (unknown id, bad token,
// unsupported version) is returned, not retried.
func (p *Processor) Run(ctx context.Context, address string) error {
	return p.runTo(ctx, address, "")
}

// runTo is Run to address, whose certificate must name serverName when it is not empty.
func (p *Processor) runTo(ctx context.Context, address, serverName string) error {
	var waits backoff
	for ctx.Err() == nil {
		welcomed := make(chan struct{})
		err := p.serve(ctx, address, serverName, welcomed)
		switch status.Code(err) {
		case codes.NotFound, codes.FailedPrecondition, codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied:
			return err
		}
		wait := waits.after(isClosed(welcomed))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// backoff is the wait before reconnecting: 100 ms after a session the server welcomed (a
// restarted server gets its processors back at once), doubling up to 5 s while sessions keep
// failing before their welcome.
type backoff struct{ last time.Duration }

// after returns the wait after a session that was welcomed or not.
func (b *backoff) after(welcomed bool) time.Duration {
	if welcomed || b.last == 0 {
		b.last = 100 * time.Millisecond
	} else {
		b.last = min(b.last*2, 5*time.Second)
	}
	return b.last
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
