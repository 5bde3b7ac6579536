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
}

// DefaultRules returns the secret formats the agents hutch serves look
// for, a new slice each call; the compiled expressions, safe for
// concurrent use, are shared: compiled once per process, not per Scanner
// (every Sandbox has one).
func DefaultRules() []Rule {
	rules := slices.Clone(defaultRules())
	for i := range rules {
		rules[i].Keywords = slices.Clone(rules[i].Keywords)
	}
	return rules
}

var defaultRules = sync.OnceValue(compileDefaultRules)

func compileDefaultRules() []Rule {
	return []Rule{
		{ID: "anthropic", Description: "Anthropic API key", Keywords: []string{"sk-ant-"},
			Regex: regexp.MustCompile(`sk-ant-(?:api|admin)\d\d-([A-Za-z0-9_-]{80,120})`), MinEntropy: 3.5},
		{ID: "openrouter", Description: "OpenRouter API key", Keywords: []string{"sk-or-"},
			Regex: regexp.MustCompile(`sk-or-v1-([0-9a-f]{64})`), MinEntropy: 3},
		{ID: "openai", Description: "OpenAI API key", Keywords: []string{"sk-"},
			Regex: regexp.MustCompile(`\bsk-(?:(?:proj|svcacct|admin)-([A-Za-z0-9_-]{32,200})|([A-Za-z0-9]{32,200}))`), MinEntropy: 3.5},
		{ID: "private-key", Description: "PEM private key", Keywords: []string{"PRIVATE KEY-----"},
			Regex: regexp.MustCompile(`-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY-----`)},
		{ID: "github", Description: "GitHub token", Keywords: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
			Regex: regexp.MustCompile(`\b(?:gh[pousr]_([A-Za-z0-9]{36,255})|github_pat_([A-Za-z0-9_]{82}))`), MinEntropy: 3},
		{ID: "google", Description: "Google API key", Keywords: []string{"AIza"},
			Regex: regexp.MustCompile(`\bAIza([0-9A-Za-z_-]{35})`), MinEntropy: 3},
		{ID: "slack", Description: "Slack bot or app token", Keywords: []string{"xoxb-", "xapp-"},
			Regex: regexp.MustCompile(`\b(?:xoxb-[0-9]{10,13}-[0-9]{10,13}-([A-Za-z0-9]{24,34})|xapp-\d-[A-Z0-9]{9,12}-\d{10,14}-([a-f0-9]{64}))`), MinEntropy: 3},
		{ID: "discord", Description: "Discord bot token", Keywords: []string{"discord", "Discord", "DISCORD", "Bot "},
			Regex: regexp.MustCompile(`\b[MNO][A-Za-z\d_-]{23,25}\.[A-Za-z\d_-]{6}\.([A-Za-z\d_-]{27,38})\b`), MinEntropy: 3.5},
		{ID: "telegram", Description: "Telegram bot token", Keywords: []string{":AA"},
			Regex: regexp.MustCompile(`\b\d{8,10}:(AA[0-9A-Za-z_-]{33})\b`), MinEntropy: 3},
		{ID: "brave", Description: "Brave Search API key", Keywords: []string{"BSA"},
			Regex: regexp.MustCompile(`\bBSA([A-Za-z0-9_-]{27,30})\b`), MinEntropy: 3.5},
	}
}

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
