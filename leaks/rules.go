package leaks

import (
	"math"
	"regexp"
	"slices"
	"sync"
)

// Rule is one kind of secret.
type Rule struct {
	ID          string
	Description string
	// Keywords: the expression is tried only where one of them occurs
	// (as gitleaks does): most text holds none, and a substring search
	// is far cheaper than a regular expression.
	Keywords []string
	Regex    *regexp.Regexp
	// MinEntropy is the least Shannon entropy (bits per byte) of the
	// match's secret part (the first group, or the whole match) for it to
	// count: placeholders like sk-xxxxxxxx are not keys.
	MinEntropy float64
	// lazy stands for Regex in the rules New(nil) uses: the default
	// expression, compiled the first time a keyword calls for it.
	lazy *lazyRegexp
}

// regex is the rule's expression, compiled now if it is not yet.
func (r *Rule) regex() *regexp.Regexp {
	if r.Regex == nil && r.lazy != nil {
		return r.lazy.get()
	}
	return r.Regex
}

// lazyRegexp is an expression compiled on first use. Compiling the
// default rules costs about 1 ms in a warm process and 5 ms in a fresh one
// (their counted repetitions, {36,255}, make programs of thousands of
// instructions), which every hutch run would pay before its command
// started although most commands' arguments and output hold no keyword.
type lazyRegexp struct {
	pattern string
	once    sync.Once
	re      *regexp.Regexp
}

func (l *lazyRegexp) get() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.pattern) })
	return l.re
}

// DefaultRules returns the secret formats the agents hutch serves look
// for, a new slice each call, with their expressions compiled. The
// compiled expressions, safe for concurrent use, are shared: compiled once
// per process, not per call or per Scanner (every Sandbox has one).
func DefaultRules() []Rule {
	rules := defaultRules()
	for i := range rules {
		rules[i].Regex = rules[i].regex()
		rules[i].lazy = nil
	}
	return rules
}

// defaultRules returns copies of the default rules, their expressions
// still to be compiled when first needed, once per process.
func defaultRules() []Rule {
	rules := slices.Clone(defaults)
	for i := range rules {
		rules[i].Keywords = slices.Clone(rules[i].Keywords)
	}
	return rules
}

var defaults = []Rule{
	{ID: "anthropic", Description: "Anthropic API key", Keywords: []string{"sk-ant-"},
		lazy: pattern(`sk-ant-(?:api|admin)\d\d-([A-Za-z0-9_-]{80,120})`), MinEntropy: 3.5},
	{ID: "openrouter", Description: "OpenRouter API key", Keywords: []string{"sk-or-"},
		lazy: pattern(`sk-or-v1-([0-9a-f]{64})`), MinEntropy: 3},
	{ID: "openai", Description: "OpenAI API key", Keywords: []string{"sk-"},
		lazy: pattern(`\bsk-(?:(?:proj|svcacct|admin)-([A-Za-z0-9_-]{32,200})|([A-Za-z0-9]{32,200}))`), MinEntropy: 3.5},
	{ID: "private-key", Description: "PEM private key", Keywords: []string{"PRIVATE KEY-----"},
		lazy: pattern(`-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY-----`)},
	{ID: "github", Description: "GitHub token", Keywords: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		lazy: pattern(`\b(?:gh[pousr]_([A-Za-z0-9]{36,255})|github_pat_([A-Za-z0-9_]{82}))`), MinEntropy: 3},
	{ID: "google", Description: "Google API key", Keywords: []string{"AIza"},
		lazy: pattern(`\bAIza([0-9A-Za-z_-]{35})`), MinEntropy: 3},
	{ID: "slack", Description: "Slack bot or app token", Keywords: []string{"xoxb-", "xapp-"},
		lazy: pattern(`\b(?:xoxb-[0-9]{10,13}-[0-9]{10,13}-([A-Za-z0-9]{24,34})|xapp-\d-[A-Z0-9]{9,12}-\d{10,14}-([a-f0-9]{64}))`), MinEntropy: 3},
	{ID: "discord", Description: "Discord bot token", Keywords: []string{"discord", "Discord", "DISCORD", "Bot "},
		lazy: pattern(`\b[MNO][A-Za-z\d_-]{23,25}\.[A-Za-z\d_-]{6}\.([A-Za-z\d_-]{27,38})\b`), MinEntropy: 3.5},
	{ID: "telegram", Description: "Telegram bot token", Keywords: []string{":AA"},
		lazy: pattern(`\b\d{8,10}:(AA[0-9A-Za-z_-]{33})\b`), MinEntropy: 3},
	{ID: "brave", Description: "Brave Search API key", Keywords: []string{"BSA"},
		lazy: pattern(`\bBSA([A-Za-z0-9_-]{27,30})\b`), MinEntropy: 3.5},
}

func pattern(p string) *lazyRegexp { return &lazyRegexp{pattern: p} }

// entropy is b's Shannon entropy in bits per byte.
func entropy(b []byte) float64 {
	if len(b) == 0 {
		return 0
	}
	var counts [256]int
	for _, c := range b {
		counts[c]++
	}
	h := 0.0
	n := float64(len(b))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
