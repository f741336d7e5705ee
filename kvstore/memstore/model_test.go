package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// The model test drives a Store and a reference, a map from (identity,
// rule, bucket) to a count, with one sequence of calls decoded from bytes,
// and compares every answer. All identities live in one shard, so that
// their probe runs, removals, the table's growth and shrinking, and the
// shard's table of pair rules (more than maxRules of them with the crowd
// operation) act on each other. After every operation the shard's
// invariants hold (checkShard).
//
// The reference knows only the contract:
//   - time is the latest bucket start written, moved on only by the
//     advance operation, in whole seconds (the rules' lengths are whole
//     seconds, as the configuration's are, so every advance moves it by
//     sweepEvery or more); it never goes back and no write is ahead of it
//     (clock excursions are README's "Clocks");
//   - a bucket is live until its Slot.Expires: lag 0 and 1 (the current
//     and the previous bucket) are read exactly;
//   - once time has reached a counter's Slot.Expires the store drops it:
//     right after an advance an expired bucket reads 0 and Len counts the
//     identities with a live counter;
//   - a write to an expired bucket (lag 2 or 3, a lagging clock) changes
//     no live count; until the next advance the bucket reads between 0 and
//     what was written to it;
//   - Add saturates at math.MaxInt64; a negative cost takes back what the
//     slot holds (refunds here only take back counts held), and taking
//     back from an identity the store does not hold does nothing;
//   - AddIf adds all or nothing and reports the counts after the add, or
//     the current ones; the clauses keep Max + Add within an int64, as the
//     limiter's do;
//   - Update asks its Admitter once, with the counts, keeps them in counts
//     and adds the costs when it admits;
//   - UpdateRule admits iff the estimate (floor(prev × (P-e)/P) + cur,
//     saturated at math.MaxInt64, computed here with big integers) plus
//     the cost is at most the limit, and returns the counts before the add.

// modelRule is a rule of the model: several share a name with different
// lengths, and there are more than the pairs and the inline cells hold.
type modelRule struct {
	name   string
	length time.Duration
}

var modelRules = [8]modelRule{
	{"a", time.Second}, {"a", 2 * time.Second}, {"b", time.Second}, {"b", 3 * time.Second},
	{"c", 2 * time.Second}, {"c", 7 * time.Second}, {"d", time.Second}, {"e", time.Hour},
}

const (
	modelIDs   = 12 // identities the operations pick from
	crowdIDs   = 80 // more identities for the crowd operation, each with a rule of its own
	modelLags  = 4  // buckets read: the current one and three before it
	traceShown = 40 // operations shown when the model and the store disagree
)

// crowdRules are the crowd identities' rules: with more than maxRules of
// them live in the shard, identities count beyond their pair in cells.
var crowdRules = func() (names [crowdIDs]string) {
	for i := range names {
		names[i] = fmt.Sprint("m", i)
	}
	return names
}()

var (
	modelAddCosts  = []int64{0, 1, 2, 3, 7, 100, 1 << 40, math.MaxInt64 / 2, math.MaxInt64 - 2, math.MaxInt64}
	modelCondAdds  = []int64{0, 1, 2, 5, 1 << 40, math.MaxInt64 / 2}
	modelLimits    = []int64{1, 2, 3, 10, 100, 1 << 40, math.MaxInt64}
	modelRuleCosts = []int64{0, 1, 1, 2, 5, 100, 1 << 40, math.MaxInt64}
	modelAdvances  = []time.Duration{time.Second, time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 7 * time.Second, time.Minute, 3 * time.Hour}
)

// Operations, the first byte of each (mod opCount).
const (
	opLoad = iota
	opAdd
	opAdd2
	opAddIf
	opUpdate
	opUpdateRule
	opUpdateRule2
	opAdvance
	opCrowd
	opTakeBack
	opCount
)

type modelKey struct {
	id     string
	name   string
	length time.Duration
	bucket int64
}

func keyOf(id string, sl kvstore.Slot) modelKey {
	return modelKey{id: id, name: sl.Name, length: sl.Length, bucket: sl.Bucket}
}

// storeModel is the reference: counts by identity and slot, present from
// their first add until an advance expires them.
type storeModel struct {
	now    int64 // Unix nanoseconds, a whole second
	counts map[modelKey]int64
}

func (m *storeModel) get(id string, sl kvstore.Slot) int64 { return m.counts[keyOf(id, sl)] }

func (m *storeModel) live(sl kvstore.Slot) bool {
	return window.Start(sl.Bucket+2, sl.Length).UnixNano() > m.now
}

// add adds cost to the slot: a positive one saturates, a negative one is
// a take-back of what the slot holds.
func (m *storeModel) add(id string, sl kvstore.Slot, cost int64) {
	if cost == 0 {
		return
	}
	k := keyOf(id, sl)
	n := m.counts[k]
	if cost > 0 && n > math.MaxInt64-cost {
		m.counts[k] = math.MaxInt64
		return
	}
	m.counts[k] = n + cost
}

// expire drops the counts time has expired.
func (m *storeModel) expire() {
	for k := range m.counts {
		if !m.live(kvstore.Slot{Name: k.name, Bucket: k.bucket, Length: k.length}) {
			delete(m.counts, k)
		}
	}
}

// holds reports whether id has a count, live or not.
func (m *storeModel) holds(id string) bool {
	for k := range m.counts {
		if k.id == id {
			return true
		}
	}
	return false
}

// identities returns how many identities have a live count and how many
// have any.
func (m *storeModel) identities() (live, all int) {
	l, a := map[string]bool{}, map[string]bool{}
	for k := range m.counts {
		a[k.id] = true
		if m.live(kvstore.Slot{Name: k.name, Bucket: k.bucket, Length: k.length}) {
			l[k.id] = true
		}
	}
	return len(l), len(a)
}

// refAdmits is UpdateRule's verdict by the contract, in big integers:
// min(floor(prev × (P-e)/P) + cur, MaxInt64) + cost <= limit, negative
// counts and cost as zero.
func refAdmits(limit int64, period, elapsed time.Duration, prev, cur, cost int64) bool {
	est := new(big.Int).Mul(big.NewInt(max(prev, 0)), big.NewInt(int64(period-elapsed)))
	est.Quo(est, big.NewInt(int64(period)))
	est.Add(est, big.NewInt(max(cur, 0)))
	if top := big.NewInt(math.MaxInt64); est.Cmp(top) > 0 {
		est = top
	}
	est.Add(est, big.NewInt(max(cost, 0)))
	return est.Cmp(big.NewInt(limit)) <= 0
}

// modelAdmitter admits when every count is at most its threshold and
// every cost fits on its count; it records what it was asked.
type modelAdmitter struct {
	thr, costs []int64
	seen       []int64
	calls      int
}

func (a *modelAdmitter) decide(counts []int64) bool {
	for k, c := range counts {
		if c > a.thr[k] || c > math.MaxInt64-a.costs[k] {
			return false
		}
	}
	return true
}

func (a *modelAdmitter) Admit(counts []int64) bool {
	a.calls++
	a.seen = append(a.seen[:0], counts...)
	return a.decide(counts)
}

// modelRun is one run of the store against the model.
type modelRun struct {
	t     *testing.T
	ctx   context.Context
	s     *Store
	m     storeModel
	ids   []string // in one shard: modelIDs, then the crowd's once it came
	mates []string // more of that shard, for the crowd operation
	data  []byte
	trace []traced
}

// traced is an operation as logged, formatted only when a run fails.
type traced struct {
	format string
	args   []any
}

func (h *modelRun) next() byte {
	if len(h.data) == 0 {
		return 0
	}
	b := h.data[0]
	h.data = h.data[1:]
	return b
}

func (h *modelRun) id(b byte) string { return h.ids[int(b)%modelIDs] }

// slot is spec's rule (low three bits) at lag spec>>3&3 from now.
func (h *modelRun) slot(spec byte) kvstore.Slot {
	r := modelRules[spec&7]
	return kvstore.Slot{Name: r.name, Length: r.length, Bucket: h.m.now/int64(r.length) - int64(spec>>3&3)}
}

func (h *modelRun) logf(format string, args ...any) {
	h.trace = append(h.trace, traced{format, args})
}

func (h *modelRun) fatalf(format string, args ...any) {
	h.t.Helper()
	var tr []string
	for _, op := range h.trace[max(len(h.trace)-traceShown, 0):] {
		tr = append(tr, fmt.Sprintf(op.format, op.args...))
	}
	h.t.Fatalf("after %d operations (the last %d below, now %s):\n\t%s\n%s", len(h.trace), len(tr),
		time.Unix(0, h.m.now).UTC().Format(time.TimeOnly), strings.Join(tr, "\n\t"), fmt.Sprintf(format, args...))
}

// expect checks a count the store reported for id's slot: exact for a
// live bucket; for an expired one, between 0 and what the model holds.
func (h *modelRun) expect(what, id string, sl kvstore.Slot, got int64) {
	want := h.m.get(id, sl)
	if h.m.live(sl) {
		if got != want {
			h.fatalf("%s: %s %s/%s bucket %d (live): got %d, want %d", what, id, sl.Name, sl.Length, sl.Bucket, got, want)
		}
		return
	}
	if got < 0 || got > want {
		h.fatalf("%s: %s %s/%s bucket %d (expired): got %d, want 0 to %d", what, id, sl.Name, sl.Length, sl.Bucket, got, want)
	}
}

// load reads slots of id from the store and checks them.
func (h *modelRun) load(what, id string, slots []kvstore.Slot) {
	counts := make([]int64, len(slots))
	if err := h.s.Load(h.ctx, id, slots, counts); err != nil {
		h.fatalf("%s: Load: %v", what, err)
	}
	for k, sl := range slots {
		h.expect(what, id, sl, counts[k])
	}
}

// checkAll reads every identity's every rule at every lag, and every count
// the model holds; exact says the store has just swept, so that Len is
// the identities with a live count.
func (h *modelRun) checkAll(exact bool) {
	var slots []kvstore.Slot
	for spec := range byte(len(modelRules) * modelLags) {
		slots = append(slots, h.slot(spec))
	}
	for _, id := range h.ids[:modelIDs] {
		h.load("check", id, slots)
	}
	for j, id := range h.ids[modelIDs:] {
		slots = slots[:0]
		for _, l := range []time.Duration{time.Second, 2 * time.Second} {
			for lag := range int64(modelLags) {
				slots = append(slots, kvstore.Slot{Name: crowdRules[j], Length: l, Bucket: h.m.now/int64(l) - lag})
			}
		}
		h.load("check", id, slots)
	}
	for k := range h.m.counts {
		h.load("check held", k.id, []kvstore.Slot{{Name: k.name, Bucket: k.bucket, Length: k.length}})
	}
	live, all := h.m.identities()
	if got := h.s.Len(); exact && got != live || got < live || got > all {
		h.fatalf("Len = %d; %d identities have a live count, %d any (exact: %v)", got, live, all, exact)
	}
}

// modelShard returns the hash seed of the model's stores and identities
// that a store of that seed keeps in one shard, modelIDs and then
// crowdIDs: found once per process, not per input of the fuzzer.
var modelShard = sync.OnceValues(func() (maphash.Seed, []string) {
	s := New()
	return s.seed, sameShard(s, modelIDs+crowdIDs)
})

func hasSlot(slots []kvstore.Slot, sl kvstore.Slot) bool {
	for _, x := range slots {
		if x == sl {
			return true
		}
	}
	return false
}

// runModel decodes data into operations and runs them on a new store and
// the model.
func runModel(t *testing.T, data []byte) {
	t.Helper()
	s := New()
	seed, ids := modelShard()
	s.seed = seed
	h := &modelRun{t: t, ctx: context.Background(), s: s, data: data,
		m:   storeModel{now: t0.UnixNano(), counts: map[modelKey]int64{}},
		ids: ids[:modelIDs], mates: ids[modelIDs:]}
	for len(h.data) > 0 {
		switch h.next() % opCount {
		case opLoad:
			id, n := h.id(h.next()), 1+int(h.next()%6)
			var slots []kvstore.Slot
			for range n {
				slots = append(slots, h.slot(h.next()))
			}
			h.logf("Load %s %v", id, slots)
			h.load("Load", id, slots)
		case opAdd, opAdd2:
			h.add()
		case opAddIf:
			h.addIf()
		case opUpdate:
			h.update()
		case opUpdateRule, opUpdateRule2:
			h.updateRule()
		case opAdvance:
			d, id := modelAdvances[int(h.next())%len(modelAdvances)], h.id(h.next())
			h.m.now += int64(d)
			// a/1s at lag 0: a bucket that starts at the new time.
			h.addBoth(fmt.Sprint("advance ", d), id, []kvstore.Slot{h.slot(0)}, []int64{1})
			h.m.expire()
			h.checkAll(true)
		case opCrowd:
			h.crowd()
		case opTakeBack:
			h.takeBack()
		}
		sh, _ := s.shard(ids[0])
		if checkShard(t, sh); t.Failed() {
			h.fatalf("the shard's invariants do not hold")
		}
	}
	h.checkAll(false)
}

// add is an Add of up to four distinct slots: positive costs, and
// take-backs of what a live slot holds.
func (h *modelRun) add() {
	id, n := h.id(h.next()), 1+int(h.next()%4)
	var slots []kvstore.Slot
	var costs []int64
	for range n {
		sl, cb := h.slot(h.next()), h.next()
		if hasSlot(slots, sl) {
			continue
		}
		c := modelAddCosts[int(cb)%len(modelAddCosts)]
		if cb&0x80 != 0 {
			c = 0
			if held := h.m.get(id, sl); h.m.live(sl) && held > 0 {
				c = -min(held, 1+int64(cb&0x3f))
				if cb&0x40 != 0 {
					c = -held
				}
			}
		}
		slots, costs = append(slots, sl), append(costs, c)
	}
	h.addBoth("Add", id, slots, costs)
	h.load("after Add", id, slots)
}

// addBoth adds costs to id's slots in the store and in the model.
func (h *modelRun) addBoth(what, id string, slots []kvstore.Slot, costs []int64) {
	h.logf("%s: Add %s %v %v", what, id, slots, costs)
	if err := h.s.Add(h.ctx, id, slots, costs); err != nil {
		h.fatalf("Add: %v", err)
	}
	for k, sl := range slots {
		h.m.add(id, sl, costs[k])
	}
}

// addIf is an AddIf of up to four distinct clauses. A clause on an expired
// bucket, whose count the store may have dropped, has a Max that holds
// for any count up to the model's.
func (h *modelRun) addIf() {
	id, n := h.id(h.next()), 1+int(h.next()%4)
	var conds []kvstore.Cond
	var slots []kvstore.Slot
	for range n {
		sl, mb, ab := h.slot(h.next()), h.next(), h.next()
		if hasSlot(slots, sl) {
			continue
		}
		add, held, live := modelCondAdds[int(ab)%len(modelCondAdds)], h.m.get(id, sl), h.m.live(sl)
		if !live && held > math.MaxInt64-add {
			add = 0
		}
		var mx int64
		switch mb % 6 {
		case 0:
			mx = held - 1
		case 1:
			mx = held
		case 2:
			mx = held + min(1, math.MaxInt64-held)
		case 3:
			mx = math.MaxInt64
		case 4:
			mx = int64(mb >> 3)
		case 5:
			mx = -1
		}
		mx = min(mx, math.MaxInt64-add)
		if !live {
			mx = max(mx, held)
		}
		slots, conds = append(slots, sl), append(conds, kvstore.Cond{Slot: sl, Max: mx, Add: add})
	}
	want := true
	for _, c := range conds {
		want = want && h.m.get(id, c.Slot) <= c.Max
	}
	h.logf("AddIf %s %v", id, conds)
	counts := make([]int64, len(conds))
	ok, err := h.s.AddIf(h.ctx, id, conds, counts)
	if err != nil || ok != want {
		h.fatalf("AddIf = %v, %v; want %v, nil", ok, err, want)
	}
	if ok {
		for _, c := range conds {
			h.m.add(id, c.Slot, c.Add)
		}
	}
	for k, c := range conds {
		h.expect("AddIf's counts", id, c.Slot, counts[k])
	}
	h.load("after AddIf", id, slots)
}

// update is an Update of up to four distinct slots whose admitter holds
// live counts to thresholds; a cost on an expired bucket fits on any count
// up to the model's.
func (h *modelRun) update() {
	id, n := h.id(h.next()), 1+int(h.next()%4)
	var slots []kvstore.Slot
	a := &modelAdmitter{}
	for range n {
		sl, cb, tb := h.slot(h.next()), h.next(), h.next()
		if hasSlot(slots, sl) {
			continue
		}
		c, held, thr := modelAddCosts[int(cb)%len(modelAddCosts)], h.m.get(id, sl), int64(math.MaxInt64)
		if h.m.live(sl) {
			switch tb % 4 {
			case 1:
				thr = held - 1
			case 2:
				thr = held
			case 3:
				thr = int64(tb >> 2)
			}
		} else if held > math.MaxInt64-c {
			c = 0
		}
		slots, a.costs, a.thr = append(slots, sl), append(a.costs, c), append(a.thr, thr)
	}
	modelCounts := make([]int64, len(slots))
	for k, sl := range slots {
		modelCounts[k] = h.m.get(id, sl)
	}
	want := a.decide(modelCounts)
	h.logf("Update %s %v costs %v thresholds %v", id, slots, a.costs, a.thr)
	counts := make([]int64, len(slots))
	ok, err := h.s.Update(h.ctx, id, slots, counts, a.costs, a)
	if err != nil || ok != want || a.calls != 1 {
		h.fatalf("Update = %v, %v after %d calls of the admitter; want %v, nil after 1", ok, err, a.calls, want)
	}
	for k, sl := range slots {
		h.expect("Update's admitter", id, sl, a.seen[k])
		if counts[k] != a.seen[k] {
			h.fatalf("Update left counts %v; the admitter saw %v", counts, a.seen)
		}
	}
	if ok {
		for k, sl := range slots {
			h.m.add(id, sl, a.costs[k])
		}
	}
	h.load("after Update", id, slots)
}

// updateRule is an UpdateRule at the current bucket, or at the previous
// one (a lagging clock) when the bucket before it, expired, holds nothing.
func (h *modelRun) updateRule() {
	id, rb, lb, sb, cb := h.id(h.next()), h.next(), h.next(), h.next(), h.next()
	mr := modelRules[rb&7]
	r := window.Rule{Name: mr.name, Limit: modelLimits[int(lb)%len(modelLimits)], Period: mr.length}
	cost := modelRuleCosts[int(cb)%len(modelRuleCosts)]
	l := int64(r.Period)
	pos := window.Pos{Index: h.m.now / l, Elapsed: time.Duration(h.m.now%l) + time.Duration(sb)*(time.Second/256)}
	prevSlot := kvstore.Slot{Name: r.Name, Bucket: pos.Index - 1, Length: r.Period}
	if rb&8 != 0 && h.m.get(id, kvstore.Slot{Name: r.Name, Bucket: pos.Index - 2, Length: r.Period}) == 0 {
		pos.Index--
		prevSlot.Bucket--
	}
	curSlot := kvstore.Slot{Name: r.Name, Bucket: pos.Index, Length: r.Period}
	wantPrev, wantCur := h.m.get(id, prevSlot), h.m.get(id, curSlot)
	want := refAdmits(r.Limit, r.Period, pos.Elapsed, wantPrev, wantCur, cost)
	h.logf("UpdateRule %s %s/%s limit %d at %+v cost %d", id, r.Name, r.Period, r.Limit, pos, cost)
	prev, cur, ok, err := h.s.UpdateRule(h.ctx, id, r, pos, cost)
	if err != nil || prev != wantPrev || cur != wantCur || ok != want {
		h.fatalf("UpdateRule = %d, %d, %v, %v; want %d, %d, %v, nil", prev, cur, ok, err, wantPrev, wantCur, want)
	}
	if ok {
		h.m.add(id, curSlot, cost)
	}
	h.load("after UpdateRule", id, []kvstore.Slot{prevSlot, curSlot})
}

// crowd adds 1 for up to crowdIDs more identities of the shard, each
// under a rule of its own: the shard's table grows, and past maxRules
// rules identities count in cells.
func (h *modelRun) crowd() {
	kb, lb := h.next(), h.next()
	if len(h.ids) == modelIDs {
		h.ids = append(h.ids[:modelIDs:modelIDs], h.mates...)
	}
	k, l, lag := 1+int(kb)%crowdIDs, time.Duration(1+lb&1)*time.Second, int64(lb>>1&1)
	h.logf("crowd of %d, %s, lag %d", k, l, lag)
	for j := range k {
		id, sl := h.ids[modelIDs+j], kvstore.Slot{Name: crowdRules[j], Length: l, Bucket: h.m.now/int64(l) - lag}
		if err := h.s.Add(h.ctx, id, []kvstore.Slot{sl}, []int64{1}); err != nil {
			h.fatalf("Add: %v", err)
		}
		h.m.add(id, sl, 1)
	}
}

// takeBack takes counts back: from an identity the model holds nothing
// of, which must stay missing; from one it holds, every live count.
func (h *modelRun) takeBack() {
	id, spec := h.id(h.next()), h.next()
	if !h.m.holds(id) {
		before := h.s.Len()
		slots := []kvstore.Slot{h.slot(spec), h.slot(spec + 8)}
		h.logf("Add %s %v [-1 -2] (not held)", id, slots)
		if err := h.s.Add(h.ctx, id, slots, []int64{-1, -2}); err != nil {
			h.fatalf("Add: %v", err)
		}
		h.load("after taking back from an identity not held", id, slots)
		if got := h.s.Len(); got != before {
			h.fatalf("Len = %d after taking back from an identity not held, %d before", got, before)
		}
		return
	}
	var slots []kvstore.Slot
	var costs []int64
	for k, n := range h.m.counts {
		if sl := (kvstore.Slot{Name: k.name, Bucket: k.bucket, Length: k.length}); k.id == id && n > 0 && h.m.live(sl) {
			slots, costs = append(slots, sl), append(costs, -n)
		}
	}
	if len(slots) == 0 {
		return
	}
	sort.Sort(bySlot{slots, costs}) // the map's order: runs repeat
	h.addBoth("take all back", id, slots, costs)
	h.load("after taking all back", id, slots)
}

// bySlot sorts slots and their costs together.
type bySlot struct {
	slots []kvstore.Slot
	costs []int64
}

func (b bySlot) Len() int { return len(b.slots) }
func (b bySlot) Less(i, j int) bool {
	x, y := b.slots[i], b.slots[j]
	return x.Name < y.Name || x.Name == y.Name && (x.Length < y.Length || x.Length == y.Length && x.Bucket < y.Bucket)
}
func (b bySlot) Swap(i, j int) {
	b.slots[i], b.slots[j] = b.slots[j], b.slots[i]
	b.costs[i], b.costs[j] = b.costs[j], b.costs[i]
}

// spec is the slot byte of rule r at lag.
func spec(r, lag byte) byte { return r | lag<<3 }

// Cost bytes (indexes of modelAddCosts) and take-back bytes.
const (
	cost1      = 1
	cost7      = 4
	costHalf   = 7
	costTop    = 9
	takeAll    = 0xc0
	takeOne    = 0x80
	condNoMore = 1 // AddIf: Max is the count held
	condRoom   = 3 // AddIf: Max is the largest
	condAdd1   = 1
	condAdd5   = 3
)

// modelScenarios are hand-written operation sequences, seeds of
// FuzzModel and cases of TestModel.
var modelScenarios = map[string][]byte{
	// One identity's rule through roll-overs of one and more buckets,
	// decided by UpdateRule between advances.
	"roll over": {
		opUpdateRule, 0, 0, 2, 0, 1, opUpdateRule, 0, 0, 2, 128, 4, opUpdateRule, 0, 0, 2, 255, 1,
		opAdvance, 0, 1, opUpdateRule, 0, 0, 2, 128, 1, opUpdateRule, 0, 8, 2, 0, 1,
		opAdvance, 2, 1, opUpdateRule, 0, 1, 3, 10, 2, opLoad, 0, 3, spec(1, 0), spec(1, 1), spec(1, 2), spec(1, 3),
		opAdvance, 6, 1, opUpdateRule, 0, 1, 3, 10, 2, opLoad, 0, 3, spec(1, 0), spec(1, 1), spec(1, 2), spec(1, 3),
	},
	// Lagging writes two and three buckets back, into the pair's rule and
	// others, leave the current and the previous bucket alone.
	"lagging writes": {
		opAdd, 1, 1, spec(0, 0), cost7, spec(0, 1), cost1,
		opAdd, 1, 3, spec(0, 2), cost1, spec(0, 3), cost7, spec(1, 2), cost1, spec(2, 3), cost1,
		opLoad, 1, 5, spec(0, 0), spec(0, 1), spec(0, 2), spec(0, 3), spec(1, 2), spec(2, 3),
		opUpdateRule, 1, 0, 3, 0, 1,
		opAdvance, 0, 2, opAdd, 1, 0, spec(0, 3), cost1, opLoad, 1, 3, spec(0, 0), spec(0, 1), spec(0, 2), spec(0, 3),
		opAdvance, 0, 2, opLoad, 1, 3, spec(0, 0), spec(0, 1), spec(0, 2), spec(0, 3),
	},
	// Every rule of one identity: the pair, the inline cells and beyond,
	// taken back whole, then expired.
	"many rules": {
		opAdd, 3, 3, spec(0, 0), cost1, spec(1, 0), cost7, spec(2, 0), cost1, spec(3, 0), cost7,
		opAdd, 3, 3, spec(4, 0), cost1, spec(5, 1), cost7, spec(6, 0), cost1, spec(7, 1), cost7,
		opAddIf, 3, 1, spec(1, 0), condNoMore, condAdd1, spec(5, 1), condRoom, condAdd5,
		opAddIf, 3, 1, spec(1, 0), condRoom, condAdd1, spec(5, 1), condRoom, condAdd5,
		opAdvance, 0, 4, opTakeBack, 3, 0, opAdvance, 2, 4, opAdvance, 6, 4,
	},
	// More identities in the shard than its first table holds, each with
	// a rule of its own, more than maxRules of them: the table grows, the
	// identities past the rules count in cells, and after two minutes the
	// table shrinks back.
	"crowd": {
		opAdd, 5, 0, spec(0, 0), cost1, opCrowd, 79, 0, opAdd, 6, 1, spec(3, 0), cost7, spec(5, 0), cost1,
		opUpdateRule, 7, 4, 3, 64, 1, opCrowd, 40, 3, opAdvance, 0, 5, opAdd, 6, 0, spec(3, 1), cost1,
		opAdvance, 6, 5, opAdvance, 6, 6, opCrowd, 10, 1, opAdvance, 7, 6,
	},
	// Counts at the top of an int64: Add stops there, a take-back comes
	// off it, AddIf and UpdateRule refuse on it.
	"saturation": {
		opAdd, 8, 1, spec(0, 0), costTop, spec(3, 0), costHalf,
		opAdd, 8, 1, spec(0, 0), costTop, spec(3, 0), costTop,
		opAdd, 8, 0, spec(0, 0), takeOne | 5,
		opAddIf, 8, 1, spec(0, 0), condRoom, condAdd5, spec(3, 0), condRoom, 0,
		opUpdateRule, 8, 0, 6, 0, 1, opUpdateRule, 8, 3, 6, 0, 0,
		opUpdate, 8, 1, spec(0, 0), cost1, 0, spec(3, 0), 0, 2,
		opAdd, 8, 1, spec(0, 0), takeAll, spec(3, 0), takeAll,
		opTakeBack, 9, 3,
	},
}

func TestModel(t *testing.T) {
	for name, data := range modelScenarios {
		t.Run(name, func(t *testing.T) { runModel(t, data) })
	}
	for seed := range uint64(100) {
		t.Run(fmt.Sprint("random-", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			data := make([]byte, 400)
			for i := range data {
				data[i] = byte(r.Uint32())
			}
			runModel(t, data)
		})
	}
}

func FuzzModel(f *testing.F) {
	for _, data := range modelScenarios {
		f.Add(data)
	}
	f.Fuzz(runModel)
}
