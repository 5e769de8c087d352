package redis

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// registry is this process's copy of the queue registry (P:queues): each
// queue's index, the low bits of its IDs. Indexes are assigned once, by
// the register script, and never change, so the copy only grows; it is
// reloaded when it lacks a name or index.
type registry struct {
	b *Backend

	mu     sync.RWMutex
	byName map[string]int
	byIdx  map[int]string
}

func newRegistry(b *Backend) *registry {
	return &registry{b: b, byName: map[string]int{}, byIdx: map[int]string{}}
}

func (r *registry) add(name string, idx int) {
	r.byName[name] = idx
	r.byIdx[idx] = name
}

// index returns the index of queue q, registering the queue first if it
// has none: for inserts.
func (r *registry) index(ctx context.Context, q string) (int, error) {
	r.mu.RLock()
	idx, ok := r.byName[q]
	r.mu.RUnlock()
	if ok {
		return idx, nil
	}
	res, err := scriptRegister.eval(ctx, r.b.c, scriptRegister.prefixKeys(r.b.keys), []any{q, MaxQueues})
	if err != nil {
		return 0, err
	}
	n, err := asInt(res)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.add(q, int(n))
	r.mu.Unlock()
	return int(n), nil
}

// name returns the queue of index idx, reloading the registry once when
// it is not known here; ok is false for an index no queue has.
func (r *registry) name(ctx context.Context, idx int) (string, bool, error) {
	r.mu.RLock()
	q, ok := r.byIdx[idx]
	r.mu.RUnlock()
	if ok {
		return q, true, nil
	}
	if idx < 1 || idx > MaxQueues {
		return "", false, nil
	}
	if err := r.reload(ctx); err != nil {
		return "", false, err
	}
	r.mu.RLock()
	q, ok = r.byIdx[idx]
	r.mu.RUnlock()
	return q, ok, nil
}

// lookup returns the index of queue q without registering it (reloading
// the registry when q is not known here); ok is false when q has none.
func (r *registry) lookup(ctx context.Context, q string) (int, bool, error) {
	r.mu.RLock()
	idx, ok := r.byName[q]
	r.mu.RUnlock()
	if ok {
		return idx, true, nil
	}
	if err := r.reload(ctx); err != nil {
		return 0, false, err
	}
	r.mu.RLock()
	idx, ok = r.byName[q]
	r.mu.RUnlock()
	return idx, ok, nil
}

// all reloads the registry and returns every queue name, sorted: for the
// operations that span queues (stats, sweeps, failed jobs).
func (r *registry) all(ctx context.Context) ([]string, error) {
	if err := r.reload(ctx); err != nil {
		return nil, err
	}
	r.mu.RLock()
	out := make([]string, 0, len(r.byName))
	for q := range r.byName {
		out = append(out, q)
	}
	r.mu.RUnlock()
	slices.Sort(out)
	return out, nil
}

// reload reads the whole registry.
func (r *registry) reload(ctx context.Context) error {
	m, err := r.b.c.hgetAll(ctx, r.b.keys.queues)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range m {
		name, ok := strings.CutPrefix(k, "n:")
		if !ok {
			continue
		}
		if idx, err := strconv.Atoi(v); err == nil {
			r.add(name, idx)
		}
	}
	return nil
}
