package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// sizeUnits are the units a size may carry, by their name in lower case
// (a unit is read in any case): binary (KiB, or Ki as kubectl writes it)
// and decimal (KB, or K) multiples of a byte. 40G and 40gb are 40e9 bytes,
// as kubectl reads 40G; 40GiB and 40Gi are 40<<30.
var sizeUnits = map[string]int64{
	"b":  1,
	"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

const sizeHint = "write a byte count such as 4096 or a number with a unit, in any case: B, KiB, MiB, GiB, TiB (or Ki, Mi, Gi, Ti), KB, MB, GB, TB (or K, M, G, T)"

// parseSize reads a size: a whole number of bytes, optionally followed by a
// unit ("4 MiB", "1.5KiB" when that is a whole number of bytes).
func parseSize(s string) (int64, error) {
	if n, ok := smallCount(s); ok {
		return n, nil // the common case, quickly
	}
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	if num == "" {
		return 0, fmt.Errorf("size %q has no number", s)
	}
	if strings.Trim(num, "0123456789.") != "" || strings.Count(num, ".") > 1 {
		return 0, fmt.Errorf("size %q is not a number of bytes", s)
	}
	mul := int64(1)
	if unit != "" {
		var found bool
		if mul, found = sizeUnits[strings.ToLower(unit)]; !found {
			return 0, fmt.Errorf("size %q has unknown unit %q", s, unit)
		}
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n > math.MaxInt64/mul {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n * mul, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q is not a number of bytes", s)
	}
	v := f * float64(mul)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return int64(v), nil
}

// notSize reports, cheaply, that parseSize refuses s: a size starts with
// its number and holds no operator. The loader tries a size first on
// texts that are mostly expressions of parameters ("T*8KiB"), and need
// not make the message of that error.
func notSize(s string) bool {
	t := strings.TrimSpace(s)
	return t == "" || (t[0] < '0' || t[0] > '9') && t[0] != '.' || strings.ContainsAny(t, "+*/%()")
}

// smallCount reads s when it is only decimal digits, at most 18 of them
// (so that it cannot overflow).
func smallCount(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

const durationHint = "write a duration with a unit: ns, us, ms or s, for example 20us"

// parseDuration reads a non-negative duration with a unit ("20us", "1.5 ms").
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		return 0, fmt.Errorf("duration %q is not valid", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}

// viewText is a view written as a string: "name" or "name[start:end]",
// start and end being sizes; either may be left out.
type viewText struct {
	name       string
	ranged     bool
	start, end int64
	hasEnd     bool
}

const viewHint = `write "name" for a whole buffer or "name[start:end]" for a byte range, for example "x[0:1MiB]"`

// bound reads start and end: parseSize, or an expression over the spec's
// parameters.
func parseViewText(s string, bound func(string) (int64, error)) (viewText, error) {
	name, ranged, lo, hi, err := viewParts(s)
	v := viewText{name: name, ranged: ranged}
	if err != nil {
		return v, err
	}
	if lo != "" {
		n, err := bound(lo)
		if err != nil {
			return v, boundError(s, "start", err)
		}
		v.start = n
	}
	if hi != "" {
		n, err := bound(hi)
		if err != nil {
			return v, boundError(s, "end", err)
		}
		v.end, v.hasEnd = n, true
	}
	return v, nil
}

// viewParts splits view s, written as text, into its buffer's name and
// the texts of its start and end, trimmed ("" where left out); ranged
// says that s has brackets.
func viewParts(s string) (name string, ranged bool, lo, hi string, err error) {
	if isName(s) {
		return s, false, "", "", nil // the common case, quickly
	}
	open := strings.IndexByte(s, '[')
	if open < 0 {
		if strings.ContainsAny(s, "]:") {
			return "", false, "", "", fmt.Errorf("view %q is malformed", s)
		}
		return strings.TrimSpace(s), false, "", "", nil
	}
	name = strings.TrimSpace(s[:open])
	if !strings.HasSuffix(s, "]") {
		return name, true, "", "", fmt.Errorf("view %q does not end with ]", s)
	}
	inner := s[open+1 : len(s)-1]
	lo, hi, ok := strings.Cut(inner, ":")
	if !ok || strings.IndexByte(hi, ':') >= 0 || strings.IndexByte(hi, '[') >= 0 || strings.IndexByte(hi, ']') >= 0 {
		return name, true, "", "", fmt.Errorf("view %q needs one colon between start and end", s)
	}
	return name, true, strings.TrimSpace(lo), strings.TrimSpace(hi), nil
}

// boundError is the error of view s's start or end (which).
func boundError(s, which string, err error) error {
	return fmt.Errorf("view %q: %s: %v", s, which, err)
}

// ParseSize reads a size as specs write them: a whole number of bytes,
// optionally followed by a unit in any case (B, KiB, MiB, GiB, TiB or Ki,
// Mi, Gi, Ti; KB, MB, GB, TB or K, M, G, T): "4096", "40 GiB", "1.5KiB",
// "40G" (40e9, as kubectl reads it).
func ParseSize(s string) (int64, error) { return parseSize(s) }
