package shaped

type Whole struct{ a part }

type part struct {
	w     *Whole
	inner struct{ all []*Whole }
	fn    func(*Whole) // a function that takes a Whole holds none
}

type free struct{ n int }

func (w *Whole) One()   {}
func (w *Whole) Two()   {}
func (w Whole) Three()  {}
func (p *part) Only()   {}
func (f free) Counted() {}
