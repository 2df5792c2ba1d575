package kafka

// AfterSubmit makes c call f between each batch's enqueue and its commit.
func AfterSubmit(c *Consumer, f func()) { c.afterSubmit = f }
