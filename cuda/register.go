package cuda

import "github.com/dagrun/dagrun/executor/device"

// The CUDA backend is "cuda" to device.Open, and auto's first choice.
func init() {
	device.Register("cuda", 2, func(cfg device.Config) (device.Backend, error) {
		var opts []Option
		if cfg.NoPeer {
			opts = append(opts, NoPeer())
		}
		b, err := New(opts...)
		if err != nil {
			return nil, err
		}
		return b, nil
	})
}
