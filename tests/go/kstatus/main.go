// Command kstatus prints kstatus' verdict on one Kubernetes object, read as JSON from standard
// input: the status (InProgress, Current, Failed, Terminating, …) and message that
// sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute gives, the computation Flux and kpt wait on.
// tests/e2e/tests/kstatus.rs runs it on an ExecutorUpgradePolicy through an upgrade.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("reading standard input: %v", err)
	}
	object := &unstructured.Unstructured{}
	if err := object.UnmarshalJSON(input); err != nil {
		fail("parsing the object: %v", err)
	}
	result, err := status.Compute(object)
	if err != nil {
		fail("computing the status: %v", err)
	}
	out, err := json.Marshal(map[string]string{
		"status":  result.Status.String(),
		"message": result.Message,
	})
	if err != nil {
		fail("encoding the result: %v", err)
	}
	fmt.Println(string(out))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kstatus: "+format+"\n", args...)
	os.Exit(1)
}
