package gen

// genRedis is being written (placeholder during development).
func genRedis(specDir string) ([]File, error) { return nil, nil }
