package runner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The children's idempotency keys are in the database: their form must not
// change, or a child released before an upgrade would be released again.
func TestChildKeysKeepTheirForm(t *testing.T) {
	t.Parallel()
	require.Equal(t, "sheaf-dep:county-summary:job:42", ChildKey("county-summary", EachGroup(42)))
	require.Equal(t, "sheaf-dep:consolidated:period:2025-12-08", ChildKey("consolidated", PeriodGroup("2025-12-08")))
}
