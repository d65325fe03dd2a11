package comm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzFrames feeds rank 0 and a rank bytes from the network: a hello as a
// stranger sends it, frames after the rendezvous, and (wrapped in a valid
// MAC, as a rank with the secret could send) the JSON of a hello, a
// sequence and a welcome. Nothing may panic, and nothing is allocated
// beyond the bounds.
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
	f.Fuzz(func(t *testing.T, data []byte) {
		// As a stranger's bytes: the hello, then the frames that follow.
		rd := bufio.NewReader(bytes.NewReader(data))
		if l, _, err := readHello(rd, secret, rootNonce); err == nil {
			for {
				if _, _, err := l.read(rd, 1<<20); err != nil {
					break
				}
			}
		}
		// As an authenticated rank's JSON.
		var b bytes.Buffer
		newLink(key, false).write(&b, header{kind: kindHello}, append(append([]byte(nil), peerNonce...), data...))
		readHello(bufio.NewReader(bytes.NewReader(b.Bytes())), secret, rootNonce)
		for _, kind := range []byte{kindSequence, kindWelcome} {
			b.Reset()
			newLink(key, true).write(&b, header{kind: kind}, data)
			var v any = &welcome{}
			if kind == kindSequence {
				v = &[]string{}
			}
			readJSON(bufio.NewReader(&b), newLink(key, false), kind, maxWelcome, v)
		}
	})
}
