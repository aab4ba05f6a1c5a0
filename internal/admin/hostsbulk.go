package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/fleet"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// MaxHostsPerCreate bounds the hosts of one bulk create (CreateHosts, the
// list form of POST /orgs/{org}/hosts): the batch is one transaction, and
// the time it holds the store grows with it.
const MaxHostsPerCreate = 1000

// HostsInput is the list form of a host create: {"hosts": [...]}.
type HostsInput struct {
	Hosts []HostInput `json:"hosts"`
}

// HostsView answers a bulk create: the hosts in the order given, each
// with its API key (shown this once).
type HostsView struct {
	Hosts []HostView `json:"hosts"`
}

// CreateHosts creates every host of in, in one transaction: all of them or
// none. The pool contract is checked once per pool the batch joins, the
// entries against the pool and against each other. A bad entry refuses
// the batch with the entry's error, its message and fields prefixed with
// its index ("hosts[3].ip"); nothing is written.
func (s *Service) CreateHosts(ctx context.Context, org string, in HostsInput) (HostsView, error) {
	switch n := len(in.Hosts); {
	case n == 0:
		return HostsView{}, Invalid(map[string]string{"hosts": "must list at least one host"})
	case n > MaxHostsPerCreate:
		return HostsView{}, TooManyHosts(strconv.Itoa(n))
	}
	views, at, err := s.createHosts(ctx, org, in.Hosts, batchLabel)
	if err != nil {
		if at >= 0 {
			return HostsView{}, entryError("hosts["+strconv.Itoa(at)+"]", err)
		}
		return HostsView{}, err
	}
	return HostsView{Hosts: views}, nil
}

// TooManyHosts refuses a bulk create of n (a count, or "more than ...")
// hosts.
func TooManyHosts(n string) error {
	return &Error{Kind: ErrInvalid, Code: CodeTooManyEntries,
		Message: fmt.Sprintf("the request lists %s hosts, more than the %d one create takes: send them in several requests", n, MaxHostsPerCreate)}
}

// entryError is err, the failure of the entry at path, with its message
// and fields prefixed with the path.
func entryError(path string, err error) error {
	inner := AsError(err)
	out := *inner
	out.Message = path + ": " + inner.Message
	if len(inner.Fields) > 0 {
		out.Fields = make(map[string]string, len(inner.Fields))
		for f, msg := range inner.Fields {
			out.Fields[path+"."+f] = msg
		}
	}
	return &out
}

// batchLabel names the i-th entry of a host list as its request does.
func batchLabel(i int) string { return "hosts[" + strconv.Itoa(i) + "]" }

// createHosts checks ins and creates them in one store write. On failure
// at is the index of the entry at fault (-1 when the failure is no one
// entry's, an unknown org say), and err is its error as CreateHost
// answers it. label(i) names the i-th entry as the caller's input does,
// for an error that names another entry than its own: a request's list
// ("hosts[2]"), or the entries apply picked from a desired state
// ("orgs[0].hosts[5]"). The snapshot carries no hosts, so nothing is rebuilt: a host
// reaches routing when the fleet controller registers it.
func (s *Service) createHosts(ctx context.Context, org string, ins []HostInput, label func(i int) string) (views []HostView, at int, err error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return nil, -1, err
	}
	hs := make([]*store.Host, len(ins))
	keys := make([]secret.Secret, len(ins))
	projects := map[string]*store.Project{}
	addrs := make(map[hostAddr]int, len(ins))
	for i, in := range ins {
		fe := fieldErrors{}
		ip := s.checkHostAddress(fe, in.IP, in.Port)
		checkModelName(fe, "model_name", in.ModelName)
		checkRecipe(fe, in.Recipe)
		var hfTok secret.Secret
		if in.HFToken != nil {
			hfTok = *in.HFToken
		}
		checkHFToken(fe, hfTok, in.Recipe)
		if len(in.Notes) > 4096 {
			fe.add("notes", "must be at most 4096 characters")
		}
		drain := checkDrainTimeout(fe, in.DrainTimeout, store.DefaultDrainTimeout)
		if len(fe) == 0 {
			a := hostAddr{ip, in.Port}
			if j, dup := addrs[a]; dup {
				fe.add("ip", "%s has the same ip and port; each host of a batch needs its own address", label(j))
			}
			addrs[a] = i
		}
		if err := fe.err(); err != nil {
			return nil, i, err
		}
		project := in.Project
		if project == "" {
			project = "default"
		}
		pj, ok := projects[project]
		if !ok {
			if _, pj, err = s.project(ctx, org, project); err != nil {
				return nil, i, err
			}
			projects[project] = pj
		}
		keys[i], _ = secret.Mint(secret.PrefixHostKey)
		hs[i] = &store.Host{OrgID: o.ID, ProjectID: pj.ID, IP: ip, Port: in.Port, ModelName: in.ModelName, APIKey: keys[i],
			Recipe: in.Recipe, Notes: in.Notes, AutoApply: in.AutoApply, State: store.HostPending, DrainTimeout: drain, HFToken: hfTok}
	}
	index := make(map[*store.Host]int, len(hs))
	for i, h := range hs {
		index[h] = i
	}
	var failed = -1
	check := func(pool []store.Host, joining []*store.Host) error {
		i, err := joinCheck(pool, joining, index, label)
		failed = i
		return err
	}
	if err := s.st.CreateHosts(ctx, hs, check); err != nil {
		var ee *store.EntryError
		if errors.As(err, &ee) && !errors.Is(err, store.ErrWriteConflict) { // a write conflict is the batch's, not the entry's
			return nil, ee.Index, hostStoreError(hs[ee.Index], ee.Err)
		}
		var ae *Error
		if errors.As(err, &ae) && ae.Code == CodePoolContract {
			return nil, failed, err
		}
		return nil, -1, fromStore(err, "host")
	}
	s.hostsChanged(ctx) // once per batch: the fleet endpoints reload their directory
	views = make([]HostView, len(hs))
	byProject := map[int64]string{}
	for name, pj := range projects {
		byProject[pj.ID] = name
	}
	for i, h := range hs {
		views[i] = s.hostView(h, byProject[h.ProjectID])
		views[i].APIKey = keys[i].Reveal()
	}
	if len(hs) == 1 {
		h := hs[0]
		s.log.Info("fleet host added", "org", org, "host", h.ID, "ip", h.IP, "port", h.Port, "model_name", h.ModelName)
	} else {
		s.log.Info("fleet hosts added", "org", org, "hosts", len(hs), "first", hs[0].ID, "last", hs[len(hs)-1].ID)
	}
	return views, -1, nil
}

// hostStoreError is the store's refusal of h: an address already held
// names the address, as the client may not know which of its hosts a
// concurrent write took.
func hostStoreError(h *store.Host, err error) error {
	var ce *store.ConflictError
	if errors.As(err, &ce) && ce.What == "host address" {
		addr := net.JoinHostPort(h.IP, strconv.Itoa(h.Port))
		return &Error{Kind: ErrConflict, Code: CodeConflict,
			Message: fmt.Sprintf("a live host of the org already has the address %s: retire it first, or give this host another", addr),
			Fields:  map[string]string{"ip": "a live host of the org already has this ip and port"}, Err: err}
	}
	return fromStore(err, "host")
}

// joinCheck checks the contract of one pool a batch joins: each joining
// host against the pool's hosts and the joining hosts before it, as
// creating them one by one would. Parameters compare by equality, so each
// distinct contract is compared once, not each host. It returns the index
// (by index) of the first host refused; a refusal names the joining host
// it differs from by label of its index.
func joinCheck(pool []store.Host, joining []*store.Host, index map[*store.Host]int, label func(i int) string) (int, error) {
	type contract struct {
		key   string
		r     *store.Host
		other string // how the refusal names r
	}
	var seen []contract
	keyOf := func(h *store.Host) string {
		var b strings.Builder
		for _, p := range fleet.ContractParams(h.Recipe.VLLM) {
			b.WriteString(p.Value)
			b.WriteByte(0)
		}
		return b.String()
	}
	add := func(h *store.Host, other string) {
		k := keyOf(h)
		for _, c := range seen {
			if c.key == k {
				return
			}
		}
		seen = append(seen, contract{key: k, r: h, other: other})
	}
	for i := range pool {
		if pool[i].Recipe.VLLM != nil {
			add(&pool[i], "host "+strconv.FormatInt(pool[i].ID, 10))
		}
	}
	for _, h := range joining {
		for _, c := range seen {
			if name, theirs, ours, differ := fleet.ContractDiff(c.r.Recipe.VLLM, h.Recipe.VLLM); differ {
				return index[h], contractError(h, name, theirs, ours, c.other)
			}
		}
		add(h, label(index[h]))
	}
	return -1, nil
}
