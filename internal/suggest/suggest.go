// Package suggest finds the name a user most likely meant: the
// did-you-mean of dagrun's messages, bounded in work.
package suggest

import "strings"

// MaxLen is the longest name compared; longer ones get no suggestion.
const MaxLen = 64

// Nearest returns the candidate nearest got, when one is near enough to
// be what was meant (a did-you-mean). Names are compared case-folded, in
// edit distance with a transposition of neighbours counting one, and only
// those longer than MaxLen are not compared; the work is charged to budget
// (cells of edit distance), and stops when it is spent.
func Nearest(got string, candidates []string, budget *int) (string, bool) {
	best, bestDist := "", -1
	if len(got) > MaxLen {
		return "", false
	}
	lower := strings.ToLower(got)
	for _, c := range candidates {
		// Every candidate looked at costs, so that many unknown names
		// against many candidates stay bounded too.
		if *budget -= 1 + len(got); *budget < 0 {
			break
		}
		limit := max(1, len(c)/3)
		if len(c) > MaxLen || absInt(len(c)-len(got)) > limit {
			continue
		}
		if *budget -= (len(got) + 1) * (len(c) + 1); *budget < 0 {
			break
		}
		d := EditDistance(lower, strings.ToLower(c))
		if d <= limit && d < len(c) && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best, best != ""
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// EditDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and transpositions of
// neighbours each count one. It keeps three rows: space linear in b.
func EditDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
