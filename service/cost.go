package service

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/rlverify/rlverify/policy"
)

// requestCost is the tokens r asks for under the policy's declared cost
// (policy cost): the header or query parameter it names, else the
// declared default; 1 when the policy declares no weighted requests. An
// unreadable or undeclared cost is the client's error (400), decided
// before any store call.
func requestCost(c *policy.Cost, r *http.Request) (int, error) {
	if c == nil {
		return 1, nil
	}
	var v string
	if c.In == policy.CostInQuery {
		v = r.URL.Query().Get(c.Name)
	} else {
		v = r.Header.Get(c.Name)
	}
	if v == "" {
		return int(c.Default), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || !c.Allows(n) {
		return 0, fmt.Errorf("%s %s: %q is not a cost %d … %d", c.In, c.Name, clipValue(v), c.MinCost(), c.Max)
	}
	return int(n), nil
}

// clipValue cuts a client's value for an error message (it is data: the
// response escapes nothing, so only its length is bounded here).
func clipValue(v string) string {
	if len(v) > 32 {
		return v[:32] + "…"
	}
	return v
}
