package trace_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/dagrun/dagrun/trace"
)

// FuzzReadChrome feeds ReadChrome, as dagrun viz does, any bytes: it
// never panics, and whatever it accepts draws as SVG and HTML in bounded
// time (the fuzzer's own timeout catches a picture that never ends).
func FuzzReadChrome(f *testing.F) {
	lane := `{"name":"thread_name","ph":"M","ts":0,"pid":1,"tid":1,"args":{"name":"s","stream":0,"stream_name":"s","device":0,"priority":0,"kind":"compute"}}`
	slice := `{"name":"k","cat":"launch","ph":"X","ts":0,"dur":5,"pid":1,"tid":1,"args":{"op":"k","op_id":0,"kind":"launch","bytes":0}}`
	flows := `{"name":"e0","cat":"wait","ph":"s","id":1,"ts":4,"pid":1,"tid":1,"args":{"event":0,"op_id":0}},{"name":"e0","cat":"wait","ph":"f","bp":"e","id":1,"ts":4,"pid":1,"tid":1,"args":{"event":0,"op_id":0}}`
	for _, seed := range []string{
		`{"traceEvents":[` + lane + `,` + slice + `]}`,
		`{"traceEvents":[` + lane + `,` + slice + `,` + flows + `]}`,
		`[` + lane + `,` + slice + `]`,
		`{"traceEvents":[` + lane + `,` + slice + `],"otherData":{"generator":"dagrun","schema_version":1,"rank":{"rank":0,"world":2,"offset_from_rendezvous_us":3},"est_makespan_us":4}}`,
		`{"traceEvents":[` + lane + `,{"name":"k","ph":"X","ts":0,"dur":9223372036854775,"pid":1,"tid":1,"args":{"kind":"launch"}}]}`,
		`{"a":1}`,
		`[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := trace.ReadChrome(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := tr.WriteSVG(io.Discard); err != nil {
			t.Fatalf("a trace ReadChrome accepts does not draw: %v", err)
		}
		if err := tr.WriteHTML(io.Discard); err != nil {
			t.Fatalf("a trace ReadChrome accepts does not draw as HTML: %v", err)
		}
	})
}
