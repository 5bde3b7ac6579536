//go:build linux

package runtime

import (
	"slices"
	"sync"
	"time"

	"github.com/hutchbox/hutch/nsinit"
	"github.com/hutchbox/hutch/spawn"
)

// pool keeps Policy.Prewarm inits of one Sandbox built and confined,
// waiting for their command. Each is handed out once; a used one is
// replaced in the background. An init whose fresh inputs (the entries
// matching deny names at the writable trees' top levels) no longer match
// the host is discarded, not used.
//
// The pool carries bursts. A command that finds no init ready (it came
// right after another, before the refill was done) raises the number of
// inits kept, one at a time, up to twice Policy.Prewarm, so that the next
// command of a burst finds one ready. After poolShrinkAfter in which no
// command found the pool empty or took one of its extra inits, the pool
// keeps Policy.Prewarm again, the extra inits ended. And a command's end
// refills the pool only after refillSettle, so that a command issued
// right after it, which takes a ready init, starts without a refill
// beside it: building an init costs milliseconds of CPU, which would
// double that command's start on a small machine.
type pool struct {
	sb   *Sandbox
	size int // Policy.Prewarm: the least kept
	mu   sync.Mutex
	// target is how many are kept now: size, or more after a burst.
	target  int
	ready   []*sandboxInit
	filling int
	closed  bool
	// shrink brings target back to size, poolShrinkAfter after the
	// last command that found the pool short (nil until one did).
	shrink *time.Timer
	// settle refills the pool, refillSettle after a command's end
	// (nil until one ended); settling says it has not yet.
	settle   *time.Timer
	settling bool
	// built is broadcast (with mu) whenever an add ends, made or not:
	// take waits on it for an init already being built.
	built *sync.Cond
	// adds are the add goroutines in flight, and shrunk's endings, which
	// close waits for.
	adds sync.WaitGroup
}

// poolShrinkAfter is how long a pool grown by a burst keeps its extra
// inits without another command finding it short (a variable for
// tests). An idle init costs about a megabyte and a cgroup; a burst is
// commands seconds apart at most.
var poolShrinkAfter = 10 * time.Second

// refillSettle is how long after a command's end the pool's refill
// starts: a caller issuing commands back to back issues the next well
// within it (a Go caller in microseconds, a client of hutch serve in a
// millisecond or two).
const refillSettle = 5 * time.Millisecond

func newPool(sb *Sandbox, size int) *pool {
	p := &pool{sb: sb, size: size, target: size}
	p.built = sync.NewCond(&p.mu)
	p.refill()
	return p
}

// refill starts inits until ready plus in-flight reaches the pool's
// target.
func (p *pool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fill()
}

// fill is refill with p.mu held.
func (p *pool) fill() {
	for !p.closed && len(p.ready)+p.filling < p.target {
		p.filling++
		p.adds.Add(1)
		go p.add()
	}
}

// refillSoon refills the pool after refillSettle, for a command that has
// ended: a later command's end (or a command finding the pool empty)
// moves the refill again (or makes it now).
func (p *pool) refillSoon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.settling = true
	if p.settle == nil {
		p.settle = time.AfterFunc(refillSettle, p.settled)
	} else {
		p.settle.Reset(refillSettle)
	}
}

func (p *pool) settled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settling = false
	p.fill()
}

// short records a command that found the pool short, with mu held: it
// found no init ready (grow is set: the pool keeps one more, up to
// twice its size) or took one of the extra ones. Either keeps the
// extra inits for poolShrinkAfter more.
func (p *pool) short(grow bool) {
	if grow && p.target < min(2*p.size, maxPrewarm) {
		p.target++
	}
	if p.target == p.size {
		return
	}
	if p.shrink == nil {
		p.shrink = time.AfterFunc(poolShrinkAfter, p.shrunk)
	} else {
		p.shrink.Reset(poolShrinkAfter)
	}
}

// shrunk brings the pool back to its size once a burst is over, ending
// the extra inits ready (the oldest: the newest were built from the
// freshest view of the host).
func (p *pool) shrunk() {
	p.mu.Lock()
	var extra []*sandboxInit
	if !p.closed {
		p.target = p.size
		if n := len(p.ready) - p.target; n > 0 {
			extra = slices.Clone(p.ready[:n])
			p.ready = slices.Delete(p.ready, 0, n)
			p.adds.Add(1)
		}
	}
	p.mu.Unlock()
	if extra != nil {
		defer p.adds.Done()
	}
	for _, in := range extra {
		in.release()
	}
}

func (p *pool) add() {
	defer p.adds.Done()
	// A refused view (too many matches of the deny names) builds no init;
	// the next command reports the refusal.
	f, err := p.sb.readFresh()
	var in *sandboxInit
	if err == nil {
		in, err = p.sb.startInit(f, spawn.Default().Spawn)
	}
	if err == nil {
		// Pooled means built: wait for the init to say it waits for its
		// command. A setup error (or death) instead: the init is useless,
		// and the next cold start will report the error to its caller.
		if ev, ok := <-in.events; !ok || ev.Kind != nsinit.EventReady {
			in.release()
			p.added(nil)
			return
		}
	}
	if err != nil {
		p.added(nil) // the next take falls back to a cold start
		return
	}
	if !p.added(in) {
		in.release()
		return
	}
	go p.watch(in)
}

// added ends an add: in joins the pool unless it is nil or the pool is
// closed, and whoever waits in take is woken. It reports whether in
// joined.
func (p *pool) added(in *sandboxInit) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.built.Broadcast()
	p.filling--
	if in == nil || p.closed || len(p.ready) >= p.target {
		return false // none, or the pool shrank while it was built
	}
	p.ready = append(p.ready, in)
	return true
}

// watch drops in from the pool if it dies while it waits for a command
// (killed from outside hutch, or its spawn server gone), and builds a
// replacement: Prewarmed counts only inits that can run a command.
func (p *pool) watch(in *sandboxInit) {
	<-in.proc.Done()
	p.mu.Lock()
	i := slices.Index(p.ready, in)
	if i >= 0 {
		p.ready = slices.Delete(p.ready, i, i+1)
	}
	p.mu.Unlock()
	if i < 0 {
		return // handed out to a command, or released by close
	}
	in.release()
	p.refill()
}

// take returns a pooled init built with fresh inputs equal to f, or nil.
// With none ready but one being built, it waits for that one: it has a
// head start on a cold init, and a cold init beside it would only compete
// with it for the CPU. It does not refill: building an init costs
// milliseconds of CPU, which would compete with the command being
// started; the command refills once it has ended (or run for a while).
func (p *pool) take(f fresh) *sandboxInit {
	for first := true; ; first = false {
		p.mu.Lock()
		if first && len(p.ready) == 0 && !p.closed {
			p.short(true)
			if p.settling {
				// The refill a command's end put off: now, and
				// waited for below (it has a head start on a cold
				// init, which would compete with it).
				p.settle.Stop()
				p.settling = false
				p.fill()
			}
		} else if first && len(p.ready) <= p.target-p.size {
			p.short(false) // it takes one of the extra ones
		}
		for len(p.ready) == 0 && p.filling > 0 && !p.closed {
			p.built.Wait()
		}
		if len(p.ready) == 0 {
			p.mu.Unlock()
			return nil
		}
		in := p.ready[0]
		p.ready = p.ready[1:]
		p.mu.Unlock()
		select {
		case <-in.proc.Done():
			in.discard() // died while waiting (its server went away)
			continue
		default:
		}
		if !in.fresh.equal(f) {
			in.discard()
			continue
		}
		in.pooled = true
		return in
	}
}

// close ends every pooled init and returns once they and their cgroups
// are gone, inits still being built included.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.built.Broadcast()
	for _, t := range []*time.Timer{p.settle, p.shrink} {
		if t != nil {
			t.Stop()
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range ready {
		wg.Go(in.release)
	}
	wg.Wait()
	p.adds.Wait() // each releases what it built, seeing closed
}

// takeInit returns an init for one command: a pooled one when the policy
// prewarms and one is ready and current, otherwise a fresh one.
func (sb *Sandbox) takeInit() (*sandboxInit, error) {
	f, err := sb.readFresh()
	if err != nil {
		return nil, err
	}
	if sb.pool != nil {
		if in := sb.pool.take(f); in != nil {
			return in, nil
		}
	}
	return sb.startInit(f, spawn.Default().Spawn)
}

// Close ends the Sandbox's pooled inits and removes what it made on the
// host (their cgroups; LevelLandlock's private temporary directory). It
// waits for commands being started to be started, and for the teardown of
// commands whose Wait has returned (their cgroups, removed in the
// background); commands still running are not affected (what they use
// goes once they end). After Close, Start fails with ErrClosed. Close
// is idempotent and safe to call concurrently with Start.
func (sb *Sandbox) Close() error {
	sb.life.Lock()
	defer sb.life.Unlock()
	if sb.closed {
		return nil
	}
	sb.closed = true
	if sb.withdraw != nil {
		// Before the endings below: the zygote then clones no spare
		// when this Sandbox's last init ends.
		sb.withdraw()
	}
	if n := sb.next.Load(); n != nil {
		n.Close()
	}
	sb.closeGranted()
	if sb.pool != nil {
		sb.pool.close()
	}
	sb.files.close()
	sb.closePublished()
	sb.rulesets.close()
	sb.endings.Wait()
	sb.dropProbeGroup()
	return sb.closeTmp()
}

func (sb *Sandbox) isClosed() bool {
	sb.life.RLock()
	defer sb.life.RUnlock()
	return sb.closed
}

// lockLife read-holds sb's life; isClosedLocked is closed under it.
func (sb *Sandbox) lockLife() func() {
	sb.life.RLock()
	return sb.life.RUnlock
}

func (sb *Sandbox) isClosedLocked() bool { return sb.closed }

// retire ends what a Sandbox that Reload replaced kept for commands (its
// pool, its grants' Sandboxes) once the commands being started in it are,
// and sends later starts to the one in effect.
func (sb *Sandbox) retire() {
	sb.life.Lock()
	defer sb.life.Unlock()
	sb.retired.Store(true)
	sb.closeGranted()
	if sb.pool != nil {
		sb.pool.close()
	}
	sb.files.close()
	sb.rulesets.close()
}

// Prewarmed reports how many pooled inits are ready now.
func (sb *Sandbox) Prewarmed() int {
	if sb.pool == nil {
		return 0
	}
	sb.pool.mu.Lock()
	defer sb.pool.mu.Unlock()
	n := 0
	for _, in := range sb.pool.ready {
		select {
		case <-in.proc.Done():
			// Dead, and on its way out of the pool (watch).
		default:
			n++
		}
	}
	return n
}
