package nats

// AfterSubmit makes c call f between each batch's enqueue and its acks.
func AfterSubmit(c *Consumer, f func()) { c.afterSubmit = f }
