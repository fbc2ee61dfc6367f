// Package access holds tests of the backends' refusals of credentials that need a private
// server (chaos/servers): the shared PostgreSQL trusts every connection from 127.0.0.1, so only
// a private server with password authentication can refuse a wrong password (28P01).
package access
