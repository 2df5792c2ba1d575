package pgtest

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Proxy stands between a test's clients and the database server and can
// cut them off, as a network partition would: a client's writes succeed
// (they sit in buffers along the way), nothing reaches the other side, and
// when the partition heals, what was in flight is delivered in order. So a
// statement a client gave up on during a partition may still run on the
// server afterwards, and a reply may never arrive although the statement
// ran: the two things a partition does that a terminated backend does not.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	moved *sync.Cond // on mu: a block was lifted, or the proxy closed
	up    bool       // client to server blocked
	down  bool       // server to client blocked
	delay time.Duration
	conns map[net.Conn]struct{}
	done  bool
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to the server of db's DSN. It is closed when the
// test ends.
func NewProxy(t testing.TB, db *DB) *Proxy {
	t.Helper()
	u, err := url.Parse(db.DSN)
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	p.moved = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// DSN returns dsn with its host and port replaced by the proxy's.
func (p *Proxy) DSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic("pgtest: proxy: " + err.Error())
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// Delay makes the connections the proxy accepts from now on slower by rtt
// a round trip, as a network between distant machines would: each
// direction holds what it reads for rtt/2 before it writes it, while it
// goes on reading, so data flows at full rate but arrives late.
func (p *Proxy) Delay(rtt time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = rtt
}

// Partition stops delivery both ways.
func (p *Proxy) Partition() { p.set(true, true) }

// DropReplies stops delivery from the server to clients only: statements
// arrive and run, their answers do not.
func (p *Proxy) DropReplies() { p.set(false, true) }

// Heal delivers what was held and forwards again.
func (p *Proxy) Heal() { p.set(false, false) }

func (p *Proxy) set(up, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up, p.down = up, down
	p.moved.Broadcast()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.wg.Add(2)
		delay := p.delay / 2
		p.mu.Unlock()
		pump := p.pump
		if delay > 0 {
			pump = func(src, dst net.Conn, blocked func() bool) { p.pumpLate(src, dst, blocked, delay) }
		}
		go pump(client, server, func() bool { return p.up })
		go pump(server, client, func() bool { return p.down })
	}
}

// pumpLate is pump with a delay: a goroutine of its own reads src and
// stamps each chunk with the time it is due, and pumpLate writes it to dst
// then, holding it while its direction is blocked.
func (p *Proxy) pumpLate(src, dst net.Conn, blocked func() bool, delay time.Duration) {
	defer p.wg.Done()
	type chunk struct {
		data []byte
		due  time.Time
		err  error
	}
	chunks := make(chan chunk, 1024)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(chunks)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			chunks <- chunk{append([]byte(nil), buf[:n]...), time.Now().Add(delay), err}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		for range chunks { // until the reader sees src closed
		}
	}()
	for c := range chunks {
		// The sleep is the simulated wire's latency, not a wait for
		// something to happen.
		time.Sleep(time.Until(c.due))
		if !p.wait(blocked) {
			return
		}
		if !p.forward(src, dst, c.data, c.err) {
			return
		}
	}
}

// pump copies from src to dst, holding each chunk while its direction is
// blocked. The chunks behind it wait in the kernel's buffers, as they would
// in a network's.
func (p *Proxy) pump(src, dst net.Conn, blocked func() bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !p.wait(blocked) {
			return
		}
		if !p.forward(src, dst, buf[:n], err) {
			return
		}
	}
}

// forward writes data, read from src with error err, to dst, and reports
// whether to go on: src has more, and dst takes it.
func (p *Proxy) forward(src, dst net.Conn, data []byte, err error) bool {
	if len(data) > 0 {
		if _, werr := dst.Write(data); werr != nil {
			_ = src.Close()
			return false
		}
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite() // pass the end on; the other way may still be talking
				return false
			}
		}
		_ = dst.Close()
		return false
	}
	return true
}

// wait blocks while blocked() holds, and reports false if the proxy closed.
func (p *Proxy) wait(blocked func() bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for blocked() && !p.done {
		p.moved.Wait()
	}
	return !p.done
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.done = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.moved.Broadcast()
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}
