package simba

// MaxCallsInFlight is maxCallsInFlight, for the tests of package simba_test: the most backend
// calls other than the session's own that a client has in flight at once.
const MaxCallsInFlight = maxCallsInFlight
