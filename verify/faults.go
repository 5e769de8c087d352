package verify

import (
	"context"
	"fmt"

	"github.com/jobq/jobq/internal/lifecycle"
	"github.com/jobq/jobq/internal/localserver"
	"github.com/jobq/jobq/internal/ticker"
)

// startFaults starts one loop per fault of the run. Each loop undoes its
// fault when it stops (a paused worker goes on, the proxy forwards again,
// the broker is up), so once the group has stopped the system is whole
// and the queue can drain.
func (r *verifier) startFaults(ctx context.Context) {
	loops := map[Fault]func(context.Context){
		FaultKill:    r.killer,
		FaultPause:   r.pauser,
		FaultProxy:   r.cutter,
		FaultRestart: r.restarter,
		FaultReplay:  r.replayer,
	}
	for _, f := range r.cfg.Faults {
		if loop := loops[f]; loop != nil {
			r.faults.Start(ctx, lifecycle.Component{Name: string(f), Run: loop})
		}
	}
}

// killer kills a random worker process every KillEvery; the fleet
// restarts it.
func (r *verifier) killer(ctx context.Context) {
	rng := r.rng(1)
	ticker.Loop(ctx, r.cfg.KillEvery, func(context.Context) {
		if r.fleet.kill(rng) {
			r.count("kill")
		}
	})
}

// pauser stops a worker process every PauseEvery for PauseFor, one at a
// time (a tick that comes during a pause is dropped), and always lets it
// go on before it returns.
func (r *verifier) pauser(ctx context.Context) {
	rng := r.rng(2)
	var last *proc
	ticker.Loop(ctx, r.cfg.PauseEvery, func(ctx context.Context) {
		p := r.fleet.pause(rng, last)
		if p == nil {
			return
		}
		last = p
		r.count("pause")
		ticker.Sleep(ctx, r.cfg.PauseFor)
		r.fleet.resume(p)
	})
}

// cutter works the proxy every ProxyCutEvery, in turn: a cut of every
// connection; a blackhole for PauseFor (longer than a lease), healed by
// delivering what it held late or by a cut; another cut; and a latency of
// a quarter lease for two leases. It leaves the proxy forwarding when it
// returns.
func (r *verifier) cutter(ctx context.Context) {
	rng := r.rng(3)
	base := r.cfg.ProxyLatency
	for i := 0; ticker.Sleep(ctx, r.cfg.ProxyCutEvery); i++ {
		switch i % 4 {
		case 0, 2:
			n := r.proxy.Cut()
			r.events.write(evCut, num("conns", int64(n)))
			r.count("cut")
		case 1:
			r.proxy.Blackhole()
			r.events.write(evBlackhole, num("conns", int64(r.proxy.Conns())))
			r.count("blackhole")
			ticker.Sleep(ctx, r.cfg.PauseFor)
			mode := "resume"
			if rng.IntN(2) == 0 {
				mode = "cut"
			}
			r.proxy.Heal(mode == "cut")
			r.events.write(evHeal, str("mode", mode))
		case 3:
			spike := base + r.cfg.Lease/4
			r.proxy.SetLatency(spike)
			r.events.write(evLatency, str("d", spike.String()), str("spike", "true"))
			r.count("latency")
			ticker.Sleep(ctx, 2*r.cfg.Lease)
			r.proxy.SetLatency(base)
			r.events.write(evLatency, str("d", base.String()))
		}
	}
	r.proxy.Heal(false)
	r.proxy.SetLatency(base)
}

// restarter kills the private broker every RestartEvery and starts it
// again after RestartDown. The start runs even when ctx has ended, so the
// broker is up when the loop returns.
func (r *verifier) restarter(ctx context.Context) {
	ticker.Loop(ctx, r.cfg.RestartEvery, func(ctx context.Context) {
		r.events.write(evBrokerDown, str("kind", r.broker.kind))
		if err := r.broker.kill(); err != nil {
			r.fleetFail(err)
			return
		}
		r.count("restart")
		ticker.Sleep(ctx, r.cfg.RestartDown)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), localserver.StartTimeout)
		defer cancel()
		if err := r.broker.start(sctx); err != nil {
			r.fleetFail(fmt.Errorf("verify: restart the private %s: %w", r.broker.kind, err))
			return
		}
		r.events.write(evBrokerUp, str("kind", r.broker.kind))
	})
}

// fleetFail ends the run with err: something the run needs broke.
func (r *verifier) fleetFail(err error) {
	if r.fleet != nil {
		r.fleet.fail(err)
	}
}
