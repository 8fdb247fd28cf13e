package kit

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// URL is a lock URL taken apart for a backend's Open:
//
//	scheme://[user[:password]@]host[:port][,host[:port]...][/path][?name=value&...]
//
// It differs from net/url in one way: the authority may list several hosts,
// separated by commas (a Redis Cluster, RedLock's servers, PostgreSQL's
// fallback hosts). A backend reads the query parameters it knows with
// Text, Duration and Int, passes the rest to its driver with Rest or
// rejects them with Err.
//
// Every error it returns matches core.ErrInvalidArgument and names the part
// of the URL at fault; the URL it quotes never shows the password.
type URL struct {
	Scheme string        // lower case
	User   *url.Userinfo // nil when the URL has no user info
	Hosts  []string      // host[:port] each, as written; none for scheme:///path
	Path   string        // unescaped; "" or starting with "/"

	rawPath string // Path as written, escapes kept
	shown   string // the URL with its password redacted, for errors
	query   url.Values
	known   []string // the parameters the backend asked for, for errors
	err     error    // the first bad parameter value
}

// ParseURL takes rawURL apart. It checks the syntax only: which schemes,
// hosts, paths and parameters make sense is the backend's to say.
func ParseURL(rawURL string) (*URL, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	u := &URL{Scheme: strings.ToLower(scheme), shown: redactRaw(rawURL)}
	switch {
	case !ok || scheme == "":
		return nil, u.Invalid("scheme", "want scheme://..., as in redis://host:6379")
	case strings.IndexFunc(scheme, badSchemeRune) >= 0:
		return nil, u.Invalid("scheme", "%q is not a URL scheme", scheme)
	case strings.Contains(rest, "#"):
		return nil, u.Invalid("fragment", "a lock URL has no #fragment")
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	hosts := authority
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		hosts = authority[at+1:]
		// Parse the user info and the tail with net/url, on a stand-in host.
		authority = authority[:at+1] + "host"
	} else {
		authority = "host"
	}
	p, err := url.Parse(u.Scheme + "://" + authority + tail)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // ue quotes the URL, password included
		}
		return nil, u.Invalid("URL", "%v", err)
	}
	u.User, u.Path, u.rawPath = p.User, p.Path, p.EscapedPath()
	u.shown = u.redacted(hosts, p.RawQuery)
	if hosts != "" {
		for _, h := range strings.Split(hosts, ",") {
			if err := checkHost(h); err != nil {
				return nil, u.Invalid("host", "%q: %v", h, err)
			}
			u.Hosts = append(u.Hosts, h)
		}
	}
	if u.query, err = url.ParseQuery(p.RawQuery); err != nil {
		return nil, u.Invalid("query", "%v", err)
	}
	return u, nil
}

func badSchemeRune(r rune) bool {
	return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')
}

// checkHost accepts host, host:port, [v6] and [v6]:port, with a port of
// digits.
func checkHost(h string) error {
	if h == "" {
		return errors.New("empty host")
	}
	p, err := url.Parse("x://" + h)
	if err != nil || p.Host != h || p.Path != "" || p.User != nil || p.RawQuery != "" {
		return errors.New("not a host[:port]")
	}
	if port := p.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %s is not in 1..65535", port)
		}
	} else if strings.HasSuffix(h, ":") {
		return errors.New("empty port")
	}
	if p.Hostname() == "" {
		return errors.New("no host name before the port")
	}
	return nil
}

// redactRaw hides the password of a URL that failed to parse: what lies
// between the first ":" of the user info and its "@".
func redactRaw(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// redacted is the URL as written, with its password replaced by "xxxxx".
func (u *URL) redacted(hosts, rawQuery string) string {
	shown := *u
	if pw, ok := u.User.Password(); ok && pw != "" {
		shown.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	s := shown.Format(u.Scheme, []string{hosts}, nil)
	if rawQuery != "" {
		s += "?" + rawQuery
	}
	return s
}

// String returns the URL with its password redacted.
func (u *URL) String() string { return u.shown }

// Format returns the URL with another scheme, hosts and query, and the same
// user info and path: the connection string a backend hands its driver.
// A nil query leaves the query out.
func (u *URL) Format(scheme string, hosts []string, query url.Values) string {
	var b strings.Builder
	b.WriteString(scheme + "://")
	if u.User != nil {
		b.WriteString(u.User.String() + "@")
	}
	b.WriteString(strings.Join(hosts, ","))
	b.WriteString(u.rawPath)
	if len(query) > 0 {
		b.WriteString("?" + query.Encode())
	}
	return b.String()
}

// Invalid returns an error matching core.ErrInvalidArgument that quotes the
// URL and names part (a scheme, a host, a parameter) as the fault.
func (u *URL) Invalid(part, format string, args ...any) error {
	return Invalid("URL %s: %s: %s", u.shown, part, fmt.Sprintf(format, args...))
}

// param returns the one value of parameter key, and false when it is absent;
// it records an error when it is given twice or empty. The parameter counts
// as read: Rest and Err no longer see it.
func (u *URL) param(key string) (string, bool) {
	u.known = append(u.known, key)
	vs, ok := u.query[key]
	delete(u.query, key)
	switch {
	case !ok:
		return "", false
	case len(vs) > 1:
		u.fail(u.Invalid("parameter "+key, "given %d times", len(vs)))
		return "", false
	case vs[0] == "":
		u.fail(u.Invalid("parameter "+key, "empty value"))
		return "", false
	}
	return vs[0], true
}

func (u *URL) fail(err error) {
	if u.err == nil {
		u.err = err
	}
}

// Text calls set with the value of parameter key when the URL has it.
func (u *URL) Text(key string, set func(string)) {
	if v, ok := u.param(key); ok {
		set(v)
	}
}

// Duration calls set with the value of parameter key, a time.Duration
// ("30s", "1m30s"), when the URL has it.
func (u *URL) Duration(key string, set func(time.Duration)) {
	v, ok := u.param(key)
	if !ok {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		u.fail(u.Invalid("parameter "+key, "%q is not a duration (such as 30s or 1m30s)", v))
		return
	}
	set(d)
}

// Int calls set with the value of parameter key, a decimal integer, when
// the URL has it.
func (u *URL) Int(key string, set func(int)) {
	v, ok := u.param(key)
	if !ok {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		u.fail(u.Invalid("parameter "+key, "%q is not an integer", v))
		return
	}
	set(n)
}

// Rest removes and returns the parameters no reader has read, for a
// backend that passes them on to its driver.
func (u *URL) Rest() url.Values {
	rest := u.query
	u.query = url.Values{}
	return rest
}

// Err returns the first bad parameter value a reader met, or else an error
// naming the first parameter (in sorted order) that nothing read.
func (u *URL) Err() error {
	if u.err != nil {
		return u.err
	}
	if len(u.query) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(u.query))
	known := slices.Compact(slices.Sorted(slices.Values(u.known)))
	if len(known) == 0 {
		return u.Invalid("parameter "+keys[0], "unknown: %s:// takes no parameters", u.Scheme)
	}
	return u.Invalid("parameter "+keys[0], "unknown: %s:// takes %s", u.Scheme, strings.Join(known, ", "))
}

// Handoff calls set with the bounds of local handoff runs (a backend's
// WithLocalHandoff) that parameters handoff_max (an integer) and
// handoff_span (a duration) give, when the URL has either; the default
// (DefaultHandoffLimits) stands for the one it lacks.
func (u *URL) Handoff(set func(HandoffLimits)) {
	l, given := DefaultHandoffLimits(), false
	u.Int("handoff_max", func(n int) { l.Max, given = n, true })
	u.Duration("handoff_span", func(d time.Duration) { l.Span, given = d, true })
	if given {
		set(l)
	}
}
