// Package luacheck checks the generated Redis Lua scripts (generated/luascripts, lua/) against a
// real Redis: every script loads with SCRIPT LOAD under its generated SHA1, the EVALSHA wrappers
// fall back after SCRIPT FLUSH, and each script behaves as DESIGN.md §5 and spec/redis.yaml say,
// in standalone mode and, when a Redis Cluster is reachable, in Cluster mode. It holds tests only.
package luacheck
