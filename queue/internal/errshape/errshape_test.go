package errshape_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sheaf-dev/sheaf/internal/testexit"
	"github.com/sheaf-dev/sheaf/queue/internal/errshape"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testexit.Option()) }

func TestOf(t *testing.T) {
	for in, want := range map[string]string{
		"job 123 failed after 45ms":                                 "job <n> failed after <n>ms",
		"row 3f2504e0-4f89-11d3-9a0c-0305e82c3301 missing":          "row <uuid> missing",
		"bad pointer 0xc000123abc":                                  "bad pointer <hex>",
		"commit 9fceb02d0ae598e95dc970b74767f19372d61af8 not found": "commit <hex> not found",
		"the request was acceded to":                                "the request was acceded to",
		"deadbeef is a word here, 1deadbeef is not":                 "deadbeef is a word here, <hex> is not",
		"county Travis: upstream returned 503 for request 0x1f":     "county Travis: upstream returned <n> for request <hex>",
		"": "",
	} {
		require.Equal(t, want, errshape.Of(in), in)
	}
}
