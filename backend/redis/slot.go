package redis

import (
	"fmt"
	"strings"
	"sync"
)

// keySlot is the Redis Cluster hash slot of a key: CRC16 (XMODEM) of its
// hash tag (the text between the first '{' and the next '}', when not
// empty) or of the whole key, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// slotCheck is the test hook that checks every script call's keys (see
// client.slots).
type slotCheck struct {
	mu    sync.Mutex
	calls map[string]int // script name -> calls checked
}

// check reports an error unless every key of a script call hashes to the
// same Cluster slot; a nil check checks nothing.
func (sc *slotCheck) check(s *script, keys []string) error {
	if sc == nil {
		return nil
	}
	sc.mu.Lock()
	if sc.calls == nil {
		sc.calls = map[string]int{}
	}
	sc.calls[s.name]++
	sc.mu.Unlock()
	if len(keys) == 0 {
		return fmt.Errorf("script %s: called without keys: a cluster cannot route it", s.name)
	}
	for _, k := range keys[1:] {
		if keySlot(k) != keySlot(keys[0]) {
			return fmt.Errorf("script %s: keys %q and %q are in different cluster slots", s.name, keys[0], k)
		}
	}
	return nil
}

// called returns how often each script was checked.
func (sc *slotCheck) called() map[string]int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	out := map[string]int{}
	for k, v := range sc.calls {
		out[k] = v
	}
	return out
}
