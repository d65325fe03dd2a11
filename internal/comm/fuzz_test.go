package comm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// FuzzFrames feeds rank 0 and a rank bytes from the network: a hello as a
// stranger sends it, frames after the rendezvous, and (wrapped in a valid
// MAC, as a rank with the secret could send) the JSON of a hello, a
// sequence and a welcome. Nothing may panic, nothing is allocated beyond
// the bounds (a hello's, a frame's limit), and input past a bound is
// refused.
func FuzzFrames(f *testing.F) {
	rootNonce := bytes.Repeat([]byte{1}, nonceLen)
	peerNonce := bytes.Repeat([]byte{2}, nonceLen)
	secret := []byte("fuzz")
	key := sessionKey(secret, rootNonce, peerNonce)
	var seed bytes.Buffer
	w := newLink(key, false)
	hj, _ := json.Marshal(hello{Magic: magic, Rank: 1, World: 2, Hash: SequenceHash([]string{"a"})})
	w.write(&seed, header{kind: kindHello}, append(append([]byte(nil), peerNonce...), hj...))
	writeJSON(&seed, w, kindSequence, []string{"a"})
	w.write(&seed, header{from: 1, to: 0, kind: kindColl}, []byte{1, 2, 3, 4})
	f.Add(seed.Bytes())
	f.Add(hj)
	f.Add([]byte(`{"Err":"x","Mismatch":true,"Payload":"aWQ="}`))
	f.Add([]byte(`["all_reduce g: 4 x f32, sum"]`))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Add(append(hj, bytes.Repeat([]byte{' '}, maxHello-nonceLen-len(hj)+1)...)) // a valid hello one byte too long, wrapped
	// A frame header that claims a 2 GiB payload: nothing is allocated
	// for it.
	f.Add(func() []byte { hb := encodeHeader(header{kind: kindHello, length: 1 << 31}); return hb[:] }())
	const slack = 64 << 10 // the bufio reader, JSON's decoding of a hello, the runtime
	f.Fuzz(func(t *testing.T, data []byte) {
		// As a stranger's bytes: the hello, then the frames that follow.
		rd := bufio.NewReader(bytes.NewReader(data))
		var l *link
		var err error
		if n := allocated(func() { l, _, err = readHello(rd, secret, rootNonce) }); n > maxHello+slack {
			t.Fatalf("reading a stranger's hello allocated %d bytes (a hello is at most %d)", n, maxHello)
		}
		for err == nil {
			var payload []byte
			if n := allocated(func() { _, payload, err = l.read(rd, 1<<20) }); n > 1<<20+slack {
				t.Fatalf("reading a frame of at most 1 MiB allocated %d bytes", n)
			}
			if len(payload) > 1<<20 || len(payload) > len(data) {
				t.Fatalf("a frame of %d bytes read from %d bytes of input with a limit of 1 MiB", len(payload), len(data))
			}
		}
		// As an authenticated rank's JSON.
		var b bytes.Buffer
		newLink(key, false).write(&b, header{kind: kindHello}, append(append([]byte(nil), peerNonce...), data...))
		if _, _, err := readHello(bufio.NewReader(bytes.NewReader(b.Bytes())), secret, rootNonce); err == nil && nonceLen+len(data) > maxHello {
			t.Fatalf("a hello of %d bytes was read (at most %d)", nonceLen+len(data), maxHello)
		}
		for _, kind := range []byte{kindSequence, kindWelcome} {
			b.Reset()
			newLink(key, true).write(&b, header{kind: kind}, data)
			var v any = &welcome{}
			if kind == kindSequence {
				v = &[]string{}
			}
			err := readJSON(bufio.NewReader(&b), newLink(key, false), kind, maxWelcome, v)
			if len(data) > maxWelcome && (err == nil || !strings.Contains(err.Error(), "at most")) {
				t.Fatalf("a message of %d bytes was not refused (at most %d): %v", len(data), maxWelcome, err)
			}
		}
	})
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
