package main

func faults(args []string) error  { return nil }
func hostile(args []string) error { return nil }
