package simbahttp

import (
	"fmt"
	"hash/fnv"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/printable"
)

// timelineWindow is the longest span the page's timeline bars cover.
const timelineWindow = 10 * time.Minute

type pageData struct {
	Title    string
	Open     bool // the timeline's term tables start unfolded
	Refresh  int
	Status   Status
	Now      string
	Health   string
	Holders  []pageHolder
	Lines    []timelineLine
	Groups   []pageGroup
	Sessions []pageSession
	Window   string
}

type pageHolder struct {
	Holder
	Color template.CSS
}

type timelineLine struct {
	Name     string
	Segments []segment
	Entries  []pageEntry
}

type segment struct {
	Left, Width float64
	Color       template.CSS
	Label       string
	Title       string
	Open        bool
}

type pageEntry struct {
	Token  int64
	Owner  string
	Self   bool
	Since  string
	Until  string
	Took   string
	Reason string
	Color  template.CSS
}

type pageGroup struct {
	Name       string
	Members    []pageMember
	Partitions string
	Count      int
}

type pageMember struct {
	ID    simba.SessionID
	Owner string
	Self  bool
}

type pageSession struct {
	ID        simba.SessionID
	Owner     string
	Remaining string
	Self      bool
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	st := h.Status(r.Context())
	col := newColors(st)
	d := pageData{Title: h.o.Title, Refresh: max(1, int(h.o.Refresh.Round(time.Second)/time.Second)), Status: st,
		Now: clock(st.At)}
	// What the page shows of owners, names, reasons and errors comes from other processes
	// (an older release's owner may hold a bidirectional override, which owners refuse now)
	// or from the backend's records, which anyone with write access can forge: shown as text.
	d.Status.Session.Owner = visible(st.Session.Owner)
	d.Status.Session.Reason = visible(st.Session.Reason)
	d.Status.BackendError = visible(st.BackendError)
	if st.LastError != nil {
		le := *st.LastError
		le.Error, le.Name = visible(le.Error), visible(le.Name)
		d.Status.LastError = &le
	}
	for _, hd := range st.Holders {
		c := col.of(hd.Owner, hd.Session)
		hd.Name, hd.Owner, hd.Unreadable = visible(hd.Name), visible(hd.Owner), visible(hd.Unreadable)
		d.Holders = append(d.Holders, pageHolder{Holder: hd, Color: c})
	}
	if st.Degraded != nil {
		dg := *st.Degraded
		dg.Summary, dg.LastError = visible(dg.Summary), visible(dg.LastError)
		d.Status.Degraded = &dg
	}
	if st.Degraded != nil {
		d.Health = "degraded"
	} else if st.Healthy {
		d.Health = "live"
	} else {
		d.Health = "unavailable"
	}

	// Timeline bars over the window from the earliest entry (at most timelineWindow ago) to now.
	start := st.At
	for _, entries := range st.Timeline {
		for _, e := range entries {
			if e.Since.Before(start) {
				start = e.Since
			}
		}
	}
	if st.At.Sub(start) > timelineWindow {
		start = st.At.Add(-timelineWindow)
	}
	span := st.At.Sub(start)
	if span < 10*time.Second {
		span = 10 * time.Second
		start = st.At.Add(-span)
	}
	d.Window = fmt.Sprintf("%s – %s", clock(start), clock(st.At))
	names := make([]string, 0, len(st.Timeline))
	for name := range st.Timeline {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		line := timelineLine{Name: visible(name)}
		entries := st.Timeline[name]
		for _, e := range entries {
			from, until := e.Since, st.At
			if e.Until != nil {
				until = *e.Until
			}
			color := col.of(e.Owner, e.Session)
			if until.After(start) {
				if from.Before(start) {
					from = start
				}
				left := float64(from.Sub(start)) / float64(span) * 100
				width := max(float64(until.Sub(from))/float64(span)*100, 0.6)
				line.Segments = append(line.Segments, segment{Left: left, Width: min(width, 100-left), Color: color,
					Label: fmt.Sprintf("%s #%s", who(e), token(e.Token)), Open: e.Until == nil,
					Title: fmt.Sprintf("%s held %s with token %s from %s", who(e), line.Name, token(e.Token), clock(e.Since))})
			}
		}
		for i := len(entries) - 1; i >= 0; i-- {
			e := entries[i]
			pe := pageEntry{Token: e.Token, Owner: who(e), Self: e.Self, Since: clock(e.Since), Until: "now",
				Reason: e.Reason, Color: col.of(e.Owner, e.Session)}
			end := st.At
			if e.Until != nil {
				end = *e.Until
				pe.Until = clock(end)
			}
			pe.Took = end.Sub(e.Since).Round(100 * time.Millisecond).String()
			line.Entries = append(line.Entries, pe)
		}
		d.Lines = append(d.Lines, line)
	}
	d.Open = len(d.Lines) <= 2

	owners := make(map[simba.SessionID]string)
	if st.Backend != nil {
		for _, s := range st.Backend.Sessions {
			owners[s.ID] = s.Owner
		}
	}
	for _, g := range st.Groups {
		pg := pageGroup{Name: visible(g.Name), Count: g.Count, Partitions: ints(g.Partitions)}
		for _, m := range g.Members {
			pg.Members = append(pg.Members, pageMember{ID: m, Owner: visible(owners[m]), Self: st.Session.Live && m == st.Session.ID})
		}
		d.Groups = append(d.Groups, pg)
	}
	if st.Backend != nil {
		for _, s := range st.Backend.Sessions {
			rem := millis(s.RemainingMillis)
			if s.Unreadable != "" {
				rem = "unreadable record: " + visible(s.Unreadable)
			}
			d.Sessions = append(d.Sessions, pageSession{ID: s.ID, Owner: visible(s.Owner),
				Remaining: rem, Self: st.Session.Live && s.ID == st.Session.ID})
		}
	}

	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := pageTemplate.Execute(w, d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func who(e *Entry) string {
	if e.Owner != "" {
		return visible(e.Owner)
	}
	return short(e.Session)
}

// visible returns s as simba status shows it (printable.Escape): html/template escapes markup,
// not characters that reorder or hide the text around them, so a forged owner "node-a\u202e…"
// displayed reversed what followed it.
func visible(s string) string { return printable.Escape(s) }

func token(t int64) string {
	if t == 0 {
		return "?"
	}
	return fmt.Sprint(t)
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05") }

func ints(ps []int) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}

func short(id simba.SessionID) string {
	s := visible(string(id))
	if r := []rune(s); len(r) > 8 {
		return string(r[:8]) + "…"
	}
	return s
}

// palette holds distinguishable colors for holders.
var palette = []template.CSS{"#2f81f7", "#d2691e", "#2da44e", "#8250df", "#cf222e", "#0a7d8c", "#bf8700", "#e85aad"}

// colors gives each holder (by owner, or session when the owner is unknown) a color: the
// holders sorted by name take the palette in order, so the colors stay put across refreshes
// while the set of holders does.
type colors map[string]template.CSS

func holderKey(owner string, session simba.SessionID) string {
	if owner != "" {
		return owner
	}
	return string(session)
}

func newColors(st Status) colors {
	keys := make(map[string]bool)
	for _, hd := range st.Holders {
		keys[holderKey(hd.Owner, hd.Session)] = true
	}
	for _, entries := range st.Timeline {
		for _, e := range entries {
			keys[holderKey(e.Owner, e.Session)] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	c := make(colors, len(sorted))
	for i, k := range sorted {
		if i < len(palette) {
			c[k] = palette[i]
			continue
		}
		f := fnv.New32a()
		f.Write([]byte(k))
		c[k] = template.CSS(fmt.Sprintf("hsl(%d 55%% 45%%)", f.Sum32()%360))
	}
	return c
}

func (c colors) of(owner string, session simba.SessionID) template.CSS {
	return c[holderKey(owner, session)]
}

func millis(ms int64) string {
	if ms < 0 {
		return "—"
	}
	return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"short":  short,
	"millis": millis,
	"token":  token,
	"clock":  clock,
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}{{with .Status.Session.Owner}} · {{.}}{{end}}</title>
<style>
:root { --fg:#1f2328; --muted:#656d76; --line:#d8dee4; --bg:#f6f8fa; --ok:#1a7f37; --bad:#cf222e; }
* { box-sizing:border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; align-items:center; gap:16px; padding:14px 24px; background:#fff; border-bottom:1px solid var(--line); }
header h1 { font-size:18px; margin:0; }
header .who { color:var(--muted); }
header nav { margin-left:auto; display:flex; gap:14px; }
a { color:#0969da; text-decoration:none; } a:hover { text-decoration:underline; }
.badge { display:inline-block; padding:2px 10px; border-radius:999px; font-weight:600; font-size:12px; color:#fff; }
.badge.live { background:var(--ok); } .badge.unavailable { background:var(--bad); } .badge.degraded { background:#b7791f; }
.you { display:inline-block; padding:0 6px; border-radius:4px; font-size:11px; font-weight:600; background:#ddf4ff; color:#0969da; margin-left:6px; }
main { padding:20px 24px; display:grid; gap:18px; max-width:1100px; }
section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:14px 18px; }
section h2 { font-size:15px; margin:0 0 10px; }
table { border-collapse:collapse; width:100%; }
th, td { text-align:left; padding:5px 8px; border-bottom:1px solid var(--line); white-space:nowrap; }
th { color:var(--muted); font-weight:600; font-size:12px; }
tr:last-child td { border-bottom:0; }
code, .mono { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:12.5px; }
.muted { color:var(--muted); }
.dot { display:inline-block; width:9px; height:9px; border-radius:50%; margin-right:6px; vertical-align:middle; }
.line { display:grid; grid-template-columns:110px 1fr; column-gap:12px; align-items:center; margin:6px 0; }
.line .name { font-weight:600; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
.line details { grid-column:2; }
.bar { position:relative; height:26px; background:var(--bg); border:1px solid var(--line); border-radius:5px; overflow:hidden; }
.seg { position:absolute; top:0; bottom:0; color:#fff; font-size:11.5px; line-height:26px; padding:0 6px; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; border-right:1px solid #fff; }
.seg.open { box-shadow:inset -3px 0 0 rgba(255,255,255,.6); }
.axis { display:flex; justify-content:space-between; color:var(--muted); font-size:11px; margin-top:2px; }
details summary { cursor:pointer; color:var(--muted); font-size:12px; margin:2px 0; }
.error { color:var(--bad); }
</style>
</head>
<body>
<header>
  <h1>{{.Title}}</h1>
  <span class="who">{{with .Status.Session.Owner}}{{.}} · {{end}}{{if .Status.Session.Live}}session <code>{{short .Status.Session.ID}}</code>{{else}}no session{{end}}</span>
  <span class="badge {{.Health}}" id="health">{{.Health}}</span>
  <nav><span class="muted">updated {{.Now}} UTC</span><a href="status">status JSON</a><a href="healthz">healthz</a></nav>
</header>
<main>
{{if not .Status.Healthy}}<section class="error" id="reason">{{.Status.Session.Reason}}</section>{{end}}
{{with .Status.Degraded}}<section class="error" id="degraded">{{.Summary}}</section>{{end}}
<section>
  <h2>Leases</h2>
  {{if .Holders}}
  <table id="holders">
    <tr><th>Name</th><th>Holder</th><th>Session</th><th>Token</th><th>Time left</th></tr>
    {{range .Holders}}
    <tr class="holder" data-name="{{.Name}}" data-holder="{{.Owner}}" data-token="{{.Token}}" data-self="{{.Self}}">
      <td><b>{{.Name}}</b></td>
      <td><span class="dot" style="background:{{.Color}}"></span>{{.Owner}}{{if .Self}}<span class="you">this client</span>{{end}}</td>
      <td class="mono">{{short .Session}}</td>
      <td class="mono">{{token .Token}}</td>
      <td>{{if .Unreadable}}<span class="unreadable">unreadable record: {{.Unreadable}}</span>{{else}}{{millis .RemainingMillis}}{{end}}</td>
    </tr>
    {{end}}
  </table>
  {{else}}<p class="muted">No lease is held.</p>{{end}}
</section>
<section>
  <h2>Timeline <span class="muted" style="font-weight:400">{{.Window}} UTC</span></h2>
  {{$open := .Open}}
  {{range .Lines}}
  <div class="line" data-name="{{.Name}}">
    <div class="name">{{.Name}}</div>
    <div class="bar">{{range .Segments}}<div class="seg{{if .Open}} open{{end}}" title="{{.Title}}" style="left:{{printf "%.2f" .Left}}%;width:{{printf "%.2f" .Width}}%;background:{{.Color}}">{{.Label}}</div>{{end}}</div>
    <details{{if $open}} open{{end}}><summary>{{len .Entries}} term(s) of {{.Name}}</summary>
    <table>
      <tr><th>Token</th><th>Holder</th><th>From</th><th>Until</th><th>For</th><th>Ended</th></tr>
      {{range .Entries}}
      <tr class="term" data-token="{{.Token}}" data-holder="{{.Owner}}"><td class="mono">{{token .Token}}</td><td><span class="dot" style="background:{{.Color}}"></span>{{.Owner}}{{if .Self}}<span class="you">this client</span>{{end}}</td><td>{{.Since}}</td><td>{{.Until}}</td><td>{{.Took}}</td><td class="muted">{{.Reason}}</td></tr>
      {{end}}
    </table>
    </details>
  </div>
  {{else}}<p class="muted">No term seen yet.</p>{{end}}
</section>
{{if .Groups}}
<section>
  <h2>Groups</h2>
  <table id="groups">
    <tr><th>Group</th><th>Members</th><th>Partitions of this client</th></tr>
    {{range .Groups}}
    <tr data-group="{{.Name}}"><td><b>{{.Name}}</b>{{if .Count}} <span class="muted">({{.Count}} partitions)</span>{{end}}</td>
      <td>{{range $i, $m := .Members}}{{if $i}}, {{end}}{{with $m.Owner}}{{.}} {{end}}<span class="mono muted">{{short $m.ID}}</span>{{if $m.Self}}<span class="you">this client</span>{{end}}{{end}}</td>
      <td>{{.Partitions}}</td></tr>
    {{end}}
  </table>
</section>
{{end}}
{{if .Sessions}}
<section>
  <h2>Backend sessions</h2>
  <table id="sessions">
    <tr><th>Session</th><th>Owner</th><th>Time left</th></tr>
    {{range .Sessions}}<tr><td class="mono">{{short .ID}}</td><td>{{.Owner}}{{if .Self}}<span class="you">this client</span>{{end}}</td><td>{{.Remaining}}</td></tr>{{end}}
  </table>
</section>
{{end}}
{{with .Status.BackendError}}<section class="error">backend snapshot: {{.}}</section>{{end}}
{{with .Status.LastError}}<section><h2>Last backend error</h2><span class="muted">{{clock .At}}</span> {{.Op}} {{.Name}} ({{.Class}}): <code>{{.Error}}</code></section>{{end}}
</main>
</body>
</html>
`))
