package agentwire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

// dnsPrefix marks an address to resolve to every replica it names.
const dnsPrefix = "dns:///"

// sessions tracks which addresses have a session now, and which had one before.
type sessions struct {
	mu        sync.Mutex
	connected map[string]bool
	seen      map[string]bool
}

// welcomed records a session's welcome; true when address had one before (a reconnection).
func (s *sessions) welcomed(address string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connected == nil {
		s.connected, s.seen = map[string]bool{}, map[string]bool{}
	}
	again := s.seen[address]
	s.connected[address], s.seen[address] = true, true
	return again
}

// ended records that address's session is over.
func (s *sessions) ended(address string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.connected, address)
}

// Connected lists the replicas (host:port) the processor has a session with now.
func (p *Processor) Connected() []string {
	p.sessions.mu.Lock()
	defer p.sessions.mu.Unlock()
	out := make([]string, 0, len(p.sessions.connected))
	for address := range p.sessions.connected {
		out = append(out, address)
	}
	sort.Strings(out)
	return out
}

// RunReplicas serves every replica of a deployment until ctx is done, one session with each,
// each reconnected with backoff: an address is host:port, or dns:///name:port for every address
// the name resolves to, resolved again every ResolveEvery so that sessions open and close as
// replicas come and go. Runs execute on whichever replica a client reaches, so a guardrail must
// be connected to every one. A refusal from any replica (unknown id, bad token, unsupported
// version) ends every session and is returned.
func (p *Processor) RunReplicas(ctx context.Context, addresses []string) error {
	if len(addresses) == 0 {
		return errors.New("agentwire: give at least one address")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	every := p.ResolveEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	running := map[string]context.CancelFunc{}
	refused := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		targets, err := p.resolve(ctx, addresses)
		if err != nil {
			return err
		}
		for target, stop := range running {
			if _, kept := targets[target]; !kept {
				p.logger().Info(fmt.Sprintf("agentwire: %s left the resolution; closing its session", target))
				stop()
				delete(running, target)
			}
		}
		for target, serverName := range targets {
			if _, on := running[target]; on {
				continue
			}
			sessionCtx, stop := context.WithCancel(ctx)
			running[target] = stop
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.runTo(sessionCtx, target, serverName); err != nil {
					select {
					case refused <- fmt.Errorf("agentwire: %s: %w", target, err):
					default:
					}
				}
			}()
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-refused:
			return err
		case <-ticker.C:
		}
	}
}

// resolve maps each address to connect to onto the name its certificate must carry ("" for an
// address given as is). A dns:/// name that does not resolve now adds nothing until it does.
func (p *Processor) resolve(ctx context.Context, addresses []string) (map[string]string, error) {
	targets := map[string]string{}
	for _, address := range addresses {
		name, found := strings.CutPrefix(address, dnsPrefix)
		if !found {
			targets[address] = ""
			continue
		}
		host, port, err := net.SplitHostPort(name)
		if err != nil {
			return nil, fmt.Errorf("agentwire: %q: expected dns:///name:port: %w", address, err)
		}
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			p.logger().Warn(fmt.Sprintf("agentwire: %s does not resolve (%v); trying again later", host, err))
			continue
		}
		for _, ip := range ips {
			targets[net.JoinHostPort(ip, port)] = host
		}
	}
	return targets, nil
}

func (p *Processor) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}
