package servers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// etcdCall posts body to the etcd gRPC gateway's path (etcd's JSON API) and decodes the
// answer into out.
func etcdCall(t *testing.T, s *Server, path string, body, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Post("http://"+s.Addr()+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s: %s", path, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, raw)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestEtcdRestartKeepsData: the private etcd grants a 1 s lease as asked (its short election
// timeout puts its minimum lease TTL at 1 s, the harness's default TTL), and a write it
// acknowledged survives a SIGKILL and a start again: the chaos run's restart is a real
// restart, not a wipe.
func TestEtcdRestartKeepsData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Etcd(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var grant struct {
		TTL string `json:"TTL"`
	}
	etcdCall(t, s, "/v3/lease/grant", map[string]any{"TTL": 1}, &grant)
	if grant.TTL != "1" {
		t.Fatalf("a 1 s lease was granted TTL %q, want 1 (the server's minimum lease TTL is above 1 s)", grant.TTL)
	}

	var put struct{}
	etcdCall(t, s, "/v3/kv/put", map[string]string{"key": b64("chaos-key"), "value": b64("kept")}, &put)
	s.Kill()
	if etcdHealthy(s.Addr()) {
		t.Fatal("etcd still answers after Kill")
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Kvs []struct {
			Value string `json:"value"`
		} `json:"kvs"`
	}
	etcdCall(t, s, "/v3/kv/range", map[string]string{"key": b64("chaos-key")}, &got)
	if len(got.Kvs) != 1 || got.Kvs[0].Value != b64("kept") {
		t.Fatalf("after the restart the key reads %+v, want %q: the restart lost the data", got.Kvs, "kept")
	}
}
