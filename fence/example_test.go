package fence_test

import (
	"errors"
	"fmt"

	"github.com/simba-go/simba/fence"
)

// Every helper checks a resource name before any I/O. A Redis key's hash tag is made of the
// name between braces, so braces are refused, as are spaces and control bytes.
func ExampleValidateResource() {
	fmt.Println(fence.ValidateResource("invoice-42"))
	err := fence.ValidateResource("invoice-{42}")
	fmt.Println(err)
	fmt.Println(errors.Is(err, fence.ErrInvalidResource))
	// Output:
	// <nil>
	// fence: invalid resource: "invoice-{42}": byte 8 (0x7b) is not printable ASCII without braces
	// true
}
