package memlock

import (
	"context"
	"sync"

	"github.com/distlock/distlock/core/kit"
)

// Open returns a Provider for a mem:// URL:
//
//	mem://           a new Store of the Provider's own
//	mem://NAME       the Store called NAME in this process, shared by every
//	                 Provider opened on it while one of them is open
//
// The one parameter is identity (WithIdentity). opts apply after the URL's
// settings. Once the last Provider of a named Store is closed the Store is
// dropped, and the next Open of the name starts an empty one, fencing
// counters included. A bad URL is an error matching
// core.ErrInvalidArgument that names the part at fault.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Provider, error) {
	u, err := kit.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "mem" {
		return nil, u.Invalid("scheme", "memlock opens mem://, not %s://", u.Scheme)
	}
	var urlOpts []Option
	u.Text("identity", func(id string) { urlOpts = append(urlOpts, WithIdentity(id)) })
	switch {
	case u.Err() != nil:
		return nil, u.Err()
	case len(u.Hosts) > 1:
		return nil, u.Invalid("host", "mem:// names one store, not %d", len(u.Hosts))
	case u.User != nil:
		return nil, u.Invalid("user", "mem:// takes no user")
	case u.Path != "" && u.Path != "/":
		return nil, u.Invalid("path", "mem:// takes no path: name the store as mem://NAME")
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	if len(u.Hosts) == 0 {
		return New(append(urlOpts, opts...)...)
	}
	store, done := named.get(u.Hosts[0])
	p, err := New(append(append(urlOpts, opts...), WithStore(store))...)
	if err != nil {
		done()
		return nil, err
	}
	p.onDone = done
	return p, nil
}

// named holds the Stores that mem://NAME URLs name: the one state of the
// package, since a URL is all that Providers opened apart share.
var named = registry{stores: make(map[string]*namedStore)}

type registry struct {
	mu     sync.Mutex
	stores map[string]*namedStore
}

type namedStore struct {
	s    *Store
	open int // Providers open on it
}

// get returns the Store called name, made when missing, and the func that
// gives it back once its Provider is closed.
func (r *registry) get(name string) (*Store, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.stores[name]
	if n == nil {
		n = &namedStore{s: NewStore()}
		r.stores[name] = n
	}
	n.open++
	return n.s, sync.OnceFunc(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if n.open--; n.open == 0 {
			delete(r.stores, name)
		}
	})
}
