module example.com/mapbackend

go 1.26.0

require github.com/simba-go/simba v0.0.0-00010101000000-000000000000

require golang.org/x/sys v0.49.0 // indirect

// The backend is built against the Simba checkout it lives in; a backend in its own repository
// requires a released version instead and drops this line.
replace github.com/simba-go/simba => ../..
