package main

// Under ulimit -v, malloc keeps to one arena: see internal/onearena.
import _ "github.com/pipefeed/pipe/internal/onearena"
