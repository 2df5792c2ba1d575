package queue

import "github.com/sheaf-dev/sheaf/queue/internal/maintain"

// upkeep returns the periodic work the client's options ask of the elected
// leader among its runners, besides rescue (which a runner adds itself):
// roll-ups, the counts of finished runs, and pruning.
func (c *Client) upkeep() []maintain.Task { return c.upkeepAt(nil) }
