// Package leaks owns finding secrets in what passes through hutch: a
// command's arguments and environment, its output as it flows, a file
// read. It finds them by rules kept as data (an id, a regular
// expression, keywords that must occur for the expression to be tried, an
// entropy floor), in the raw text and in its URL-, base64- and
// hex-decoded forms, and by the exact values the host registers (its own
// keys, and by default every environment variable whose name looks like
// a secret's), which catches any format. A Finding says which rule, where
// and in which encoding, never the secret.
//
// A Stream scans output as it is written, holding only what may still be
// part of a secret (a bounded window): a secret split across writes is
// found once, whole, and the whole output is never kept. A Redactor
// passes output on with the secrets replaced, holding back as little.
package leaks
