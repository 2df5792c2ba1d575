package console

// Routes returns the patterns the mux of h registers, for tests.
func Routes(h any) []string {
	var out []string
	for _, rt := range h.(*console).routes {
		out = append(out, rt.Method+" "+rt.Pattern)
	}
	return out
}

// SetSearchWindow makes the pages of h's searches examine n jobs, for tests.
func SetSearchWindow(h any, n int64) { h.(*console).window = n }
