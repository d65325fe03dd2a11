package comm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelloBoundToItsConnection: a rank's hello verifies only under the
// nonce rank 0 sent on that connection and the secret; recorded and
// replayed on another connection (another nonce from rank 0), or sent by
// someone without the secret, it fails authentication.
func TestHelloBoundToItsConnection(t *testing.T) {
	secret := []byte("the world's secret")
	rootNonce := bytes.Repeat([]byte{7}, nonceLen)
	peerNonce := bytes.Repeat([]byte{9}, nonceLen)
	helloFrame := func(secret, rootNonce []byte) []byte {
		var b bytes.Buffer
		l := newLink(sessionKey(secret, rootNonce, peerNonce), false)
		hj, err := json.Marshal(hello{Magic: magic, Rank: 1, World: 2})
		require.NoError(t, err)
		require.NoError(t, l.write(&b, header{kind: kindHello}, append(slices(peerNonce), hj...)))
		return b.Bytes()
	}
	_, h, err := readHello(bufio.NewReader(bytes.NewReader(helloFrame(secret, rootNonce))), secret, rootNonce)
	require.NoError(t, err, "the hello of this connection")
	assert.Equal(t, 1, h.Rank)

	otherNonce := bytes.Repeat([]byte{8}, nonceLen)
	_, _, err = readHello(bufio.NewReader(bytes.NewReader(helloFrame(secret, rootNonce))), secret, otherNonce)
	assert.ErrorIs(t, err, errAuth, "a hello replayed on a connection with another nonce")

	_, _, err = readHello(bufio.NewReader(bytes.NewReader(helloFrame([]byte("a guess"), rootNonce))), secret, rootNonce)
	assert.ErrorIs(t, err, errAuth, "a hello under another secret")
}

// TestLinkRefusesFrameOverLimit: a frame that claims one byte more than
// the reader's limit is refused before its payload is read; one of the
// limit is read.
func TestLinkRefusesFrameOverLimit(t *testing.T) {
	key := sessionKey([]byte("k"), bytes.Repeat([]byte{1}, nonceLen), bytes.Repeat([]byte{2}, nonceLen))
	for _, size := range []int{16, 17} {
		var b bytes.Buffer
		require.NoError(t, newLink(key, false).write(&b, header{from: 1, kind: kindColl}, make([]byte, size)))
		_, payload, err := newLink(key, true).read(bufio.NewReader(&b), 16)
		if size <= 16 {
			require.NoError(t, err)
			assert.Len(t, payload, size)
			continue
		}
		require.Error(t, err)
		assert.Contains(t, err.Error(), "a frame of 17 bytes (at most 16 here)")
	}
}
