package gen

// genSQL is being written (placeholder during development).
func genSQL(specDir string) ([]File, error) { return nil, nil }
