package batch

import (
	"fmt"
	"reflect"
)

type kind uint8

const (
	kindInvalid kind = iota // the zero Message
	kindData
	kindEnd
)

// Message is what a producer sends to a [Coordinator]: one item of a batch, or
// the end of a batch. Build one with [Data] or [End]; the zero Message is
// invalid. Messages are small values, comparable when T is.
type Message[T any] struct {
	batchID string
	item    T
	kind    kind
}

// Data returns a message carrying item for the batch batchID.
func Data[T any](batchID string, item T) Message[T] {
	return Message[T]{batchID: batchID, item: item, kind: kindData}
}

// End returns the end-of-batch message for batchID. Every batch needs one:
// until it arrives the batch cannot complete.
func End[T any](batchID string) Message[T] {
	return Message[T]{batchID: batchID, kind: kindEnd}
}

// BatchID returns the batch the message belongs to.
func (m Message[T]) BatchID() string { return m.batchID }

// Item returns the message's item; it is the zero T for an end-of-batch.
func (m Message[T]) Item() T { return m.item }

// IsEnd reports whether m is an end-of-batch message.
func (m Message[T]) IsEnd() bool { return m.kind == kindEnd }

// Validate returns a *[MessageError] if m cannot be sent: it is the zero
// Message, its batch ID is empty, or it is a data message whose item is a nil
// pointer, map, channel, function or interface. [Coordinator.Send] calls it.
func (m Message[T]) Validate() error { return m.validate(nilable[T]()) }

// validate is Validate with the nil-ability of T worked out by the caller,
// once, rather than per message.
func (m Message[T]) validate(nilableT bool) error {
	switch {
	case m.kind == kindInvalid:
		return &MessageError{Reason: "zero Message; build messages with Data or End"}
	case m.batchID == "":
		return &MessageError{Reason: "empty batch ID"}
	case m.kind == kindData && nilableT && isNil(m.item):
		return &MessageError{BatchID: m.batchID, Reason: "nil item"}
	}
	return nil
}

// String describes the message for logs, without its item.
func (m Message[T]) String() string {
	switch m.kind {
	case kindData:
		return fmt.Sprintf("data(%q)", m.batchID)
	case kindEnd:
		return fmt.Sprintf("end(%q)", m.batchID)
	}
	return "invalid"
}

// nilable reports whether a T can be nil in a way that means "no item": a
// pointer, map, channel, function or interface. Nil slices are allowed: an
// empty slice is a valid item.
func nilable[T any]() bool {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer, reflect.Interface:
		return true
	}
	return false
}

// isNil reports whether v is nil, or an interface holding a nil pointer, map,
// channel or function. T must be nilable; boxing a pointer-shaped value or an
// interface allocates nothing.
func isNil[T any](v T) bool {
	a := any(v)
	if a == nil {
		return true
	}
	switch rv := reflect.ValueOf(a); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
