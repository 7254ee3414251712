package notify_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vipproxy/vipproxy/internal/testutil"
	"github.com/vipproxy/vipproxy/service/notify"
)

// Store, Remove and Barrier speak sd_notify as systemd reads it: the
// stand-in store holds what was stored, by name, until removed, and the
// barrier returns once everything before it was handled.
func TestFDStoreProtocol(t *testing.T) {
	st := testutil.NewFDStore(t, 8)
	env := map[string]string{}
	for _, kv := range st.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	store, why := notify.OpenFDStore(func(k string) string { return env[k] })
	if store == nil || store.Max() != 8 {
		t.Fatalf("OpenFDStore: %v, %q; want a store of 8", store, why)
	}
	defer store.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, n := range []string{"pair.0.c.a.b.c", "pair.0.b.a.b.c"} {
		if err := store.Store(n, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Remove("pair.0.c.a.b.c"); err != nil {
		t.Fatal(err)
	}
	if err := store.Barrier(); err != nil {
		t.Fatal(err)
	}
	if got := st.Held(); !slices.Equal(got, []string{"pair.0.b.a.b.c"}) {
		t.Errorf("the store holds %q after the barrier", got)
	}
	if err := store.Store("a:b", r); err == nil {
		t.Error("a name with ':' was sent")
	}
}

// Without $FDSTORE there is no store to hand connections to, and the
// reason says what the unit lacks; without NOTIFY_SOCKET, no systemd.
func TestFDStoreUnavailable(t *testing.T) {
	st := testutil.NewFDStore(t, 8)
	store, why := notify.OpenFDStore(func(k string) string {
		if k == "NOTIFY_SOCKET" {
			return st.Path
		}
		return ""
	})
	if store == nil || store.Max() != 0 || why == "" {
		t.Errorf("without FDSTORE: %v, %q; want a connection of size 0 and a reason", store, why)
	}
	if store != nil {
		store.Close()
	}
	if s, why := notify.OpenFDStore(func(string) string { return "" }); s != nil || why == "" {
		t.Errorf("without NOTIFY_SOCKET: %v, %q", s, why)
	}
}
