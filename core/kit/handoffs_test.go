package kit

import "testing"

// must stops the test when ok is false.
func must(t *testing.T, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Fatal(what)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestHandoffsLine(t *testing.T) {
	var hs Handoffs[*int, string]
	a, first := hs.Enqueue("k", "a")
	must(t, first, "want first true")
	must(t, isClosed(a.Turn()), "want isClosed(a.Turn()) true")
	b, first := hs.Enqueue("k", "b")
	must(t, !first, "want first false")
	must(t, !isClosed(b.Turn()), "want isClosed(b.Turn()) false")
	must(t, hs.Len("k") == 2, "hs.Len('k') != 2")
	tag, ok := hs.First("k")
	must(t, ok, "want ok true")
	must(t, tag == "a", "tag != 'a'")

	// Only the first, idle waiter can be claimed, once.
	must(t, hs.Claim("k") == a, "hs.Claim('k') != a")
	must(t, hs.Claim("k") == nil, "hs.Claim('k') != nil")
	must(t, !hs.Away(a), "a claimed waiter must wait for its handoff")
	must(t, hs.Deliver(a, "grant"), "want hs.Deliver(a, 'grant') true")
	h, ok, next := hs.Take("k", a)
	must(t, ok, "want ok true")
	must(t, h == "grant", "h != 'grant'")
	must(t, next, "want next true")
	must(t, isClosed(b.Turn()), "b moved up")

	// An away waiter is not claimed until it is back.
	must(t, hs.Away(b), "want hs.Away(b) true")
	must(t, hs.Claim("k") == nil, "hs.Claim('k') != nil")
	hs.Back(b)
	must(t, hs.Claim("k") == b, "hs.Claim('k') != b")
	hs.Unclaim(b)
	must(t, hs.Claim("k") == b, "hs.Claim('k') != b")

	// A waiter that leaves after its delivery gets the grant; one that
	// left before makes the delivery fail.
	must(t, hs.Deliver(b, "late"), "want hs.Deliver(b, 'late') true")
	h, ok, next = hs.Leave("k", b)
	must(t, ok, "want ok true")
	must(t, h == "late", "h != 'late'")
	must(t, !next, "want next false")
	must(t, !hs.Deliver(b, "again"), "want hs.Deliver(b, 'again') false")
	must(t, hs.Len("k") == 0, "hs.Len('k') != 0")
	_, ok = hs.First("k")
	must(t, !ok, "want ok false")
}

func TestHandoffsHolder(t *testing.T) {
	var hs Handoffs[*int, string]
	x, y := new(int), new(int)
	_, ok := hs.Holder("k")
	must(t, !ok, "want ok false")
	hs.SetHolder("k", x)
	hs.SetHolder("k", y)
	hs.DropHolder("k", x) // no longer the holder: nothing happens
	got, ok := hs.Holder("k")
	must(t, ok, "want ok true")
	must(t, got == y, "got != y")
	hs.DropHolder("k", y)
	_, ok = hs.Holder("k")
	must(t, !ok, "want ok false")
}
