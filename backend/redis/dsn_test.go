package redis

import (
	"crypto/tls"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/spi"
)

func TestParseDSN(t *testing.T) {
	cfg, err := ParseDSN("redis://app:s%40cret@10.0.0.1:6380/3?dial_timeout=2s&wait_replicas=2&wait_timeout=150ms")
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Options
	if o == nil || cfg.ClusterOptions != nil {
		t.Fatalf("standalone DSN gave %+v", cfg)
	}
	if o.Addr != "10.0.0.1:6380" || o.Username != "app" || o.Password != "s@cret" || o.DB != 3 || o.DialTimeout != 2*time.Second || o.TLSConfig != nil {
		t.Errorf("options %+v", o)
	}
	if cfg.WaitReplicas != 2 || cfg.WaitTimeout != 150*time.Millisecond {
		t.Errorf("wait %d %v", cfg.WaitReplicas, cfg.WaitTimeout)
	}
	if !o.ContextTimeoutEnabled {
		t.Error("standalone: ContextTimeoutEnabled is off: calls would outlive their deadlines (see bounded)")
	}
	if cfg.StrictDurability {
		t.Error("StrictDurability without strict_durability")
	}
	for dsn, want := range map[string]bool{
		"redis://h?strict_durability=true":                     true,
		"redis://h?strict_durability=1":                        true,
		"redis://h?strict_durability=false":                    false,
		"redis://h?strict_durability=true&strict_durability=0": false, // the last one counts, as for wait_replicas
		"redis+cluster://h:1?strict_durability=true":           true,
		"redis+sentinel://s1/m?strict_durability=true":         true,
	} {
		cfg, err := ParseDSN(dsn)
		if err != nil || cfg.StrictDurability != want {
			t.Errorf("ParseDSN(%q): StrictDurability %v, %v; want %v", dsn, cfg.StrictDurability, err, want)
		}
	}

	cfg, err = ParseDSN("rediss://:pw@cache.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.Options; o.Addr != "cache.example.com:6379" || o.Username != "" || o.Password != "pw" || o.TLSConfig == nil || o.TLSConfig.ServerName != "cache.example.com" {
		t.Errorf("rediss options %+v", o)
	}

	cfg, err = ParseDSN("redis+cluster://u:p@127.0.0.1:7001,127.0.0.1:7002,[::1]:7003/?read_timeout=1s&wait_replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	co := cfg.ClusterOptions
	if co == nil || cfg.Options != nil {
		t.Fatalf("cluster DSN gave %+v", cfg)
	}
	if !slices.Equal(co.Addrs, []string{"127.0.0.1:7001", "127.0.0.1:7002", "[::1]:7003"}) || co.Username != "u" || co.Password != "p" || co.ReadTimeout != time.Second || co.TLSConfig != nil {
		t.Errorf("cluster options %+v", co)
	}
	if cfg.WaitReplicas != 1 || cfg.WaitTimeout != 0 {
		t.Errorf("wait default: %d %v, want 1 and 0 (the default timeout, see waitMS)", cfg.WaitReplicas, cfg.WaitTimeout)
	}
	if !co.ContextTimeoutEnabled {
		t.Error("cluster: ContextTimeoutEnabled is off: calls would outlive their deadlines (see bounded)")
	}
	cfg, err = ParseDSN("rediss+cluster://h1:7001")
	if err != nil || cfg.ClusterOptions.TLSConfig == nil {
		t.Errorf("rediss+cluster: %+v %v", cfg, err)
	}

	cfg, err = ParseDSN("redis+sentinel://app:s%40cret@s1,s2:26380/my%20master/2?dial_timeout=2s&sentinel_password=spw&wait_replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FailoverOptions == nil || !cfg.FailoverOptions.ContextTimeoutEnabled {
		t.Error("sentinel: ContextTimeoutEnabled is off: calls would outlive their deadlines (see bounded)")
	}
	fo := cfg.FailoverOptions
	if fo == nil || cfg.Options != nil || cfg.ClusterOptions != nil {
		t.Fatalf("sentinel DSN gave %+v", cfg)
	}
	if fo.MasterName != "my master" || !slices.Equal(fo.SentinelAddrs, []string{"s1:26379", "s2:26380"}) ||
		fo.Username != "app" || fo.Password != "s@cret" || fo.SentinelUsername != "" || fo.SentinelPassword != "spw" ||
		fo.DB != 2 || fo.DialTimeout != 2*time.Second || fo.TLSConfig != nil || cfg.WaitReplicas != 1 {
		t.Errorf("sentinel options %+v, wait %d", fo, cfg.WaitReplicas)
	}
	cfg, err = ParseDSN("rediss+sentinel://s1:26379/m")
	if err != nil || cfg.FailoverOptions.TLSConfig == nil || cfg.FailoverOptions.Dialer == nil {
		t.Errorf("rediss+sentinel: %+v %v", cfg, err)
	}
}

// TestUseTLS: Config.UseTLS sets the TLS configuration (and the fast-failing dialer) of whichever
// client the DSN names, and OpenConfig makes a backend from the adjusted Config.
func TestUseTLS(t *testing.T) {
	tc := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: "example"}
	for _, dsn := range []string{"redis://h", "rediss://h", "redis+cluster://h:1", "redis+sentinel://h/m"} {
		cfg, err := ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.UseTLS(tc)
		var got *tls.Config
		var dialer bool
		switch {
		case cfg.Options != nil:
			got, dialer = cfg.Options.TLSConfig, cfg.Options.Dialer != nil
		case cfg.ClusterOptions != nil:
			got, dialer = cfg.ClusterOptions.TLSConfig, cfg.ClusterOptions.Dialer != nil
		default:
			got, dialer = cfg.FailoverOptions.TLSConfig, cfg.FailoverOptions.Dialer != nil
		}
		if got != tc || !dialer {
			t.Errorf("%s: UseTLS left TLS %v, dialer set %v", dsn, got, dialer)
		}
		b, err := OpenConfig(cfg)
		if err != nil {
			t.Fatalf("OpenConfig(%s): %v", dsn, err)
		}
		b.Close()
	}
	if _, err := OpenConfig(Config{}); !errors.Is(err, spi.ErrInvalidOption) {
		t.Errorf("OpenConfig(Config{}) = %v, want spi.ErrInvalidOption", err)
	}
}

func TestParseDSNErrors(t *testing.T) {
	for dsn, want := range map[string]string{
		"":                           "want redis://",
		"127.0.0.1:6379":             "want redis://",
		"http://127.0.0.1":           `unknown scheme "http"`,
		"redis://":                   "no host",
		"redis://h1:1,h2:2":          "several hosts need redis+cluster://",
		"redis://h:99999":            "bad port",
		"redis://h/x/y":              "invalid URL path",
		"redis://h/zero":             "invalid database number",
		"redis://h?nope=1":           "unexpected option: nope",
		"redis://h?wait_replicas=-1": "wait_replicas",
		"redis://h?wait_replicas=1&wait_timeout=": "wait_timeout",
		"redis://h?strict_durability=yes":         `strict_durability "yes" is not true or false`,
		"redis+cluster://h:1?strict_durability=":  "strict_durability",
		"redis+cluster://h1":                      `seed "h1" needs host:port`,
		"redis+cluster://h1:1,,h2:2":              "empty host",
		"redis+cluster://h1:7001#frag":            "no #fragment",
		"redis://h:6379/0#frag":                   "no #fragment",
		"redis+cluster://h1:1/0":                  "no database path",
		"redis+cluster://h1:1?addr=h2:2":          "not with addr=",
		"redis+cluster://u:secret@h1:1?x=1":       "unexpected option: x",
		"u:secret://x@h1:1":                       "want redis://",
		"redis://u:secret@h/zero":                 "invalid database number",
		"redis+sentinel://u:secret@s1:26379":      "name the master",
		"redis+sentinel://s1/":                    "name the master",
		"redis+sentinel://s1/m/0/x":               "want /master or /master/db",
		"redis+sentinel://s1/m?master_name=n":     "put the master in the path",
		"redis+sentinel://s1/m?password=secret":   "put the master in the path",
		"redis+sentinel://u:secret@s1/m?x=1":      "unexpected option: x",
		"redis+sentinel://s1/m/zero":              "invalid database number",
	} {
		_, err := ParseDSN(dsn)
		if !errors.Is(err, spi.ErrInvalidOption) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDSN(%q) = %v, want spi.ErrInvalidOption mentioning %q", dsn, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseDSN(%q) shows the password: %v", dsn, err)
		}
		if _, err := Open(dsn); !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("Open(%q) = %v, want spi.ErrInvalidOption", dsn, err)
		}
	}
}

func TestOptions(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, spi.ErrInvalidOption) {
		t.Errorf("New(nil) = %v", err)
	}
	for _, to := range []time.Duration{-time.Second, time.Microsecond, time.Millisecond - 1} {
		if _, err := Open("redis://h", WithWaitReplicas(1, to)); !errors.Is(err, spi.ErrInvalidOption) {
			t.Errorf("WithWaitReplicas(1, %v) = %v, want spi.ErrInvalidOption", to, err)
		}
	}
	if _, err := Open("redis+cluster://h:1", WithRouteBySlot(false)); !errors.Is(err, spi.ErrInvalidOption) {
		t.Errorf("routeBySlot off for a Cluster client = %v", err)
	}
	b, err := Open("redis://h", WithRouteBySlot(true))
	if err != nil || !b.RouteBySlot() {
		t.Errorf("routeBySlot forced on: %v", err)
	}
	b.Close()
}
