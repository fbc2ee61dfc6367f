package zookeeper

import (
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/generated/wire"
)

// layout places the generated ZooKeeper layout (package wire, from spec/zk.yaml) under the
// configured chroot. go-zookeeper has no chroot of its own, so the backend prefixes every
// path.
type layout struct{ chroot string }

func (l layout) lease(name string) string    { return l.chroot + wire.LeasePath(name) }
func (l layout) group(g string) string       { return l.chroot + wire.GroupPath(g) }
func (l layout) member(g, sid string) string { return l.chroot + wire.MemberPath(g, sid) }
func (l layout) leasesRoot() string          { return l.chroot + wire.LeasesPath }
func (l layout) groupsRoot() string          { return l.chroot + wire.GroupsPath }
func (l layout) root() string                { return l.chroot + wire.RootPath }
func (l layout) waitersRoot() string         { return l.chroot + wire.WaitersPath }
func (l layout) queue(name string) string    { return l.chroot + wire.QueuePath(name) }

// waiter is the path a waiter node of session sid for name is created with (ZooKeeper
// appends the sequence number).
func (l layout) waiter(name, sid string) string { return l.chroot + wire.WaiterPath(name, sid) }

// waiterOf returns the lease name, session id and sequence number of a waiter node path
// (wire.ParseWaiterPath).
func (l layout) waiterOf(p string) (name, sid string, seq int64, ok bool) {
	if rest, ok := l.unchroot(p); ok {
		return wire.ParseWaiterPath(rest)
	}
	return "", "", 0, false
}

// persistentNode is a node the backend creates if missing.
type persistentNode struct {
	path  string
	flags int32
	acl   []zk.ACL
}

// persistent lists the persistent nodes the backend creates, parents first: the chroot's
// segments (with the root's ACL), then the layout's roots.
func (l layout) persistent(a acls) []persistentNode {
	var out []persistentNode
	if l.chroot != "" {
		segs := strings.Split(l.chroot[1:], "/")
		for i := range segs {
			out = append(out, persistentNode{"/" + strings.Join(segs[:i+1], "/"), wire.RootNodeFlags, a.root})
		}
	}
	return append(out,
		persistentNode{l.root(), wire.RootNodeFlags, a.root},
		persistentNode{l.leasesRoot(), wire.LeasesNodeFlags, a.leases},
		persistentNode{l.groupsRoot(), wire.GroupsNodeFlags, a.groups},
		persistentNode{l.waitersRoot(), wire.WaitersNodeFlags, a.waiters})
}

// unchroot returns p relative to the chroot, as the generated layout spells it.
func (l layout) unchroot(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, l.chroot)
	return rest, ok && strings.HasPrefix(rest, "/")
}

// leaseName returns the lease name of a lease node path (wire.ParseLeasePath).
func (l layout) leaseName(p string) (string, bool) {
	if rest, ok := l.unchroot(p); ok {
		return wire.ParseLeasePath(rest)
	}
	return "", false
}

// groupName returns the group name of a group node path (wire.ParseGroupPath).
func (l layout) groupName(p string) (string, bool) {
	if rest, ok := l.unchroot(p); ok {
		return wire.ParseGroupPath(rest)
	}
	return "", false
}

// memberOf returns the group and session id of a member node path (wire.ParseMemberPath).
func (l layout) memberOf(p string) (group, sid string, ok bool) {
	if rest, ok := l.unchroot(p); ok {
		return wire.ParseMemberPath(rest)
	}
	return "", "", false
}

// acls are the ACLs of each kind of node, following the layout's ACL intent
// (wire.ZKACLIntent): with a digest identity, creator (scheme "auth") and world entries with
// the layout's perms; without one, world:anyone with all perms (nothing protects the nodes).
type acls struct {
	root, leases, groups, group, member []zk.ACL
	waiters, queue, waiter              []zk.ACL
	// leaseWorld is the world entry of a lease node's ACL; the creator entry is the creating
	// session's own identity (session.leaseACL).
	leaseWorld []zk.ACL
}

func newACLs(authenticated bool) acls {
	mk := func(creator, world int32) []zk.ACL {
		if !authenticated {
			return []zk.ACL{{Perms: wire.ZKPermAll, Scheme: wire.ZKSchemeWorld, ID: wire.ZKWorldID}}
		}
		out := []zk.ACL{{Perms: creator, Scheme: wire.ZKSchemeCreator, ID: ""}}
		if world != 0 {
			out = append(out, zk.ACL{Perms: world, Scheme: wire.ZKSchemeWorld, ID: wire.ZKWorldID})
		}
		return out
	}
	return acls{
		root:       mk(wire.RootNodeCreatorPerms, wire.RootNodeWorldPerms),
		leases:     mk(wire.LeasesNodeCreatorPerms, wire.LeasesNodeWorldPerms),
		leaseWorld: []zk.ACL{{Perms: wire.LeaseNodeWorldPerms, Scheme: wire.ZKSchemeWorld, ID: wire.ZKWorldID}},
		groups:     mk(wire.GroupsNodeCreatorPerms, wire.GroupsNodeWorldPerms),
		group:      mk(wire.GroupNodeCreatorPerms, wire.GroupNodeWorldPerms),
		member:     mk(wire.MemberNodeCreatorPerms, wire.MemberNodeWorldPerms),
		waiters:    mk(wire.WaitersNodeCreatorPerms, wire.WaitersNodeWorldPerms),
		queue:      mk(wire.QueueNodeCreatorPerms, wire.QueueNodeWorldPerms),
		waiter:     mk(wire.WaiterNodeCreatorPerms, wire.WaiterNodeWorldPerms),
	}
}
