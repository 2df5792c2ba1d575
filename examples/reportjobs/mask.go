package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sheaf-dev/sheaf/queue"
)

// The requester's roles, as a job's Auth carries them in "role", and what
// each may see:
//
//	ADMIN        every county, nothing masked
//	SUPERVISOR   the counties in "counties"; SSNs show their last four digits
//	CASE_WORKER  the one county in "county"; SSNs hidden
const (
	roleAdmin      = "ADMIN"
	roleSupervisor = "SUPERVISOR"
	roleCaseWorker = "CASE_WORKER"
)

// hiddenSSN is what a case worker sees of an SSN.
const hiddenSSN = "hidden"

// errDenied is the error of a report its requester may not see; no retry
// changes that, so the job fails at once.
var errDenied = errors.New("access denied")

// maskFor returns how the requester with claims auth sees the entries of
// county's report, or errDenied if they may not see it.
func maskFor(auth queue.Auth, county string) (func(Entry) Entry, error) {
	role, _ := auth["role"].(string)
	switch role {
	case roleAdmin:
		return func(e Entry) Entry { return e }, nil
	case roleSupervisor:
		if !slices.Contains(claimStrings(auth["counties"]), county) {
			return nil, fmt.Errorf("%w: a supervisor of %v may not see %s", errDenied, claimStrings(auth["counties"]), county)
		}
		return func(e Entry) Entry {
			e.SSN = "***-**-" + e.SSN[max(len(e.SSN)-4, 0):]
			return e
		}, nil
	case roleCaseWorker:
		if c, _ := auth["county"].(string); c != county {
			return nil, fmt.Errorf("%w: a case worker of %q may not see %s", errDenied, c, county)
		}
		return func(e Entry) Entry {
			e.SSN = hiddenSSN
			return e
		}, nil
	}
	return nil, fmt.Errorf("%w: role %q", errDenied, role)
}

// claimStrings reads a list claim: []string when set in the program,
// []any once the claims have been stored as JSON.
func claimStrings(v any) []string {
	switch v := v.(type) {
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, s := range v {
			if s, ok := s.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
