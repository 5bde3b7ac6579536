package leaks_test

import (
	"bytes"
	"fmt"

	"github.com/hutchbox/hutch/leaks"
)

// A Finding names the rule, where the secret starts and in which
// encoding it was found, never the secret; a value the host registers is
// found in any format, here base64-encoded.
func ExampleScanner_Scan() {
	s := leaks.DefaultScanner()
	s.AddValue("DEPLOY_TOKEN", "correct-horse-battery-staple")
	out := []byte("token: ghp_0123456789abcdefghijABCDEFGHIJ012345\n" +
		"Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ==\n")
	for _, f := range s.Scan(out) {
		fmt.Println(f.Rule, f.Name, f.Offset, f.Encoding)
	}
	// Output:
	// github  7 raw
	// host-value DEPLOY_TOKEN 48 base64
}

// A Redactor passes output on with every secret replaced, holding back
// only what may still be the start of one.
func ExampleScanner_Redactor() {
	var dst bytes.Buffer
	r := leaks.DefaultScanner().Redactor(&dst, func(f leaks.Finding) { fmt.Println("found:", f.Rule) })
	fmt.Fprint(r, "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH\n")
	r.Close()
	fmt.Print(dst.String())
	// Output:
	// found: openai
	// export OPENAI_API_KEY=[REDACTED:openai]
}
