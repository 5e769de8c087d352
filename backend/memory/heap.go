package memory

// minHeap is a binary heap ordered by less, smallest first. It is typed (no
// interface boxing as with container/heap) and gives memory back as it
// shrinks, so a drained queue does not keep the peak's backing array.
type minHeap[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (h *minHeap[T]) len() int { return len(h.items) }

// peek returns the smallest item; the heap must not be empty.
func (h *minHeap[T]) peek() T { return h.items[0] }

func (h *minHeap[T]) push(x T) {
	h.items = append(h.items, x)
	h.up(len(h.items) - 1)
}

// pop removes and returns the smallest item; the heap must not be empty.
func (h *minHeap[T]) pop() T {
	n := len(h.items) - 1
	top := h.items[0]
	h.items[0] = h.items[n]
	var zero T
	h.items[n] = zero // drop the reference so the job can be collected
	h.items = h.items[:n]
	if n > 0 {
		h.down(0)
	}
	if c := cap(h.items); c > 64 && n < c/4 {
		h.items = append(make([]T, 0, c/2), h.items...)
	}
	return top
}

func (h *minHeap[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			return
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *minHeap[T]) down(i int) {
	n := len(h.items)
	for {
		smallest := i
		if l := 2*i + 1; l < n && h.less(h.items[l], h.items[smallest]) {
			smallest = l
		}
		if r := 2*i + 2; r < n && h.less(h.items[r], h.items[smallest]) {
			smallest = r
		}
		if smallest == i {
			return
		}
		h.items[i], h.items[smallest] = h.items[smallest], h.items[i]
		i = smallest
	}
}

// remove deletes x (compared by eq) from the heap and reports whether it
// was there. It scans the heap: only a cancel uses it.
func (h *minHeap[T]) remove(eq func(T) bool) bool {
	for i, it := range h.items {
		if !eq(it) {
			continue
		}
		n := len(h.items) - 1
		h.items[i] = h.items[n]
		var zero T
		h.items[n] = zero
		h.items = h.items[:n]
		if i < n {
			h.down(i)
			h.up(i)
		}
		return true
	}
	return false
}
