package localapi

import _ "embed"

// OpenAPI is the OpenAPI 3.1 description of the protocol (openapi.json
// beside this file): every route, request and answer, field by field,
// and every error code. A test holds it to what the Handler serves and
// writes, so that clients in other languages can be checked against it.
//
//go:embed openapi.json
var OpenAPI []byte
