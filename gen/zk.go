package gen

// genZK is being written (placeholder during development).
func genZK(specDir string) ([]File, error) { return nil, nil }
