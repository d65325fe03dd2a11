package comm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// SequenceHash is the hash of a collective sequence (one line per
// collective, as dag.Graph.CollectiveSequence gives) that ranks compare.
func SequenceHash(seq []string) string {
	h := sha256.New()
	for _, s := range seq {
		fmt.Fprintf(h, "%d:%s\n", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CompareSequences returns nil when every rank's sequence equals rank 0's,
// else an error naming the first rank and the first collective that
// differs.
func CompareSequences(seqs [][]string) error {
	if len(seqs) == 0 {
		return nil
	}
	want := SequenceHash(seqs[0])
	for r := 1; r < len(seqs); r++ {
		if SequenceHash(seqs[r]) == want {
			continue
		}
		return &Error{Rank: 0, Op: "rendezvous", Peer: r, Msg: firstDifference(seqs[0], 0, seqs[r], r), Err: ErrMismatch}
	}
	return nil
}

// firstDifference says where rank b's sequence leaves rank a's.
func firstDifference(a []string, ra int, b []string, rb int) string {
	for i := 0; i < len(a) || i < len(b); i++ {
		switch {
		case i >= len(a):
			return fmt.Sprintf("the collective sequences differ: rank %d has %d collectives, rank %d has more; its #%d is %q (every rank must issue the same collectives in the same order)",
				ra, len(a), rb, i+1, b[i])
		case i >= len(b):
			return fmt.Sprintf("the collective sequences differ: rank %d has %d collectives, rank %d has more; its #%d is %q (every rank must issue the same collectives in the same order)",
				rb, len(b), ra, i+1, a[i])
		case a[i] != b[i]:
			return fmt.Sprintf("the collective sequences differ at #%d: rank %d has %q, rank %d has %q (every rank must issue the same collectives in the same order)",
				i+1, ra, a[i], rb, b[i])
		}
	}
	return "the collective sequences differ"
}
