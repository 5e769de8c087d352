package jobq

import (
	"context"
	"fmt"

	"github.com/jobq/jobq/backend"
)

// Args is a payload type that names its own job type, so the type string
// is written once, beside the Go type it belongs to:
//
//	type Thumbnail struct{ Image string `json:"image"` }
//
//	func (Thumbnail) Kind() string { return "thumbnail" }
//
// HandleArgs registers a handler for it and EnqueueArgs enqueues it; the
// string API checks it too, so a registration, an enqueue and a payload
// can never disagree about the type. Kind must have a value receiver and
// return the same non-empty string for every value.
type Args interface {
	Kind() string
}

// HandleArgs registers fn for the jobs of T's Kind, decoding each payload
// into a T as Handle does. It panics, at start-up, when T's Kind is empty
// or the type is registered twice.
func HandleArgs[T Args](r *Registry, fn func(ctx context.Context, args T) error, opts ...HandlerOptions) {
	Handle(r, kindOf[T](), fn, opts...)
}

// kindOf is the Kind of T's zero value. A pointer T has a nil zero value,
// whose Kind (on a value receiver) would panic with a nil dereference:
// say what to change instead.
func kindOf[T Args]() (kind string) {
	defer func() {
		if p := recover(); p != nil {
			var zero T
			panic(fmt.Sprintf("jobq: the Kind method of %T panicked on its zero value (%v): give it a value receiver and register the value type", zero, p))
		}
	}()
	var zero T
	kind = zero.Kind()
	if kind == "" {
		panic(fmt.Sprintf("jobq: %T.Kind returns an empty string", zero))
	}
	return kind
}

// EnqueueArgs enqueues args as a job of its own Kind: Enqueue without the
// type string to get wrong. A nil args, or a nil pointer whose Kind cannot
// be called on it (a value receiver, or a pointer receiver that reads the
// value), names no type: it returns an error wrapping ErrInvalidInput and
// writes nothing, rather than panicking in the caller.
func (c *Client) EnqueueArgs(ctx context.Context, args Args, opts ...EnqueueOption) (int64, error) {
	if args == nil {
		return 0, fmt.Errorf("enqueue: %w", &backend.InputError{Field: "type", Reason: "EnqueueArgs needs a payload whose Kind names it"})
	}
	// kindOfValue calls Kind as Workflow.Add and Enqueue do, recovering
	// from the nil dereference of a nil pointer.
	kind, ok := kindOfValue(args)
	if !ok {
		return 0, fmt.Errorf("enqueue: %w", &backend.InputError{Field: "type", Reason: fmt.Sprintf("EnqueueArgs got a nil %T, whose Kind method cannot run on it: pass the value or a non-nil pointer", args)})
	}
	return c.Enqueue(ctx, kind, args, opts...)
}

// kindMismatch checks a payload that names its own type against the type
// it is enqueued or registered as: "" when they agree or the payload names
// none.
func kindMismatch(typ string, payload any) string {
	k, ok := kindOfValue(payload)
	if !ok || k == typ {
		return ""
	}
	return fmt.Sprintf("the payload's Go type %T is of kind %q (its Kind method), not %q", payload, k, typ)
}

// kindOfValue is v's Kind when v is an Args. A nil pointer whose Kind has
// a value receiver names none (calling it would panic).
func kindOfValue(v any) (kind string, ok bool) {
	a, isArgs := v.(Args)
	if !isArgs {
		return "", false
	}
	defer func() {
		if recover() != nil {
			kind, ok = "", false
		}
	}()
	return a.Kind(), true
}

// jobKeyOf calls a payload's JobKey, which a nil pointer payload cannot
// answer: that is no key rather than a panic in the caller.
func jobKeyOf(k Keyed) (key string) {
	defer func() {
		if recover() != nil {
			key = ""
		}
	}()
	return k.JobKey()
}
