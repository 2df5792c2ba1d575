package runner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRuleSet(t *testing.T) {
	t.Parallel()
	dep := func(name, child string, parents ...string) *Registered[int] {
		return &Registered[int]{Dependency: Dependency{Rule: Rule{Name: name, Parents: parents}, ChildKind: child}}
	}
	var rs RuleSet[int]
	require.NoError(t, rs.Add(dep("b", "summary", "report")))
	require.NoError(t, rs.Add(dep("a", "digest", "summary", "other")))
	require.EqualError(t, rs.Add(dep("a", "x", "report")), `rule "a" registered twice`)
	require.EqualError(t, rs.Add(dep("c", "report", "digest")),
		`rule "c" would make a cycle: ["digest"] already waits, through other rules, for "report"`)
	require.EqualError(t, rs.Add(dep("d", "report", "report")),
		`rule "d" would make a cycle: ["report"] already waits, through other rules, for "report"`)

	names := func(rules []*Registered[int]) (out []string) {
		for _, ru := range rules {
			out = append(out, ru.Name)
		}
		return out
	}
	require.Equal(t, []string{"a", "b"}, names(rs.For("")))
	require.Equal(t, []string{"a"}, names(rs.For("other")))
	require.NotNil(t, rs.For("nothing"))
	require.Empty(t, rs.For("nothing"))
	require.Equal(t, "summary", rs.Named("b").ChildKind)
	require.Nil(t, rs.Named("z"))
}
