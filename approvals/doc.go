// Package approvals owns the decisions taken before a tool call runs:
// per tool a default (ALLOW, PROMPT or DENY) with a danger level, an
// approval hook for PROMPT, and the approvals a user chose to remember,
// with a scope (agent, tool, argument pattern, workspace) and an expiry,
// listable and revocable: a Store, whose Backend keeps them (package
// grantsdb's SQLite database, table remembered_permissions, in the
// process or, for the hutch CLI, in its hutch-grants helper).
//
// # Rules
//
// A tool's default is its Rule: a Decision, a Danger for the prompt to
// show, and whether its argument is a shell command line (Shell).
// DefaultRules has attocode's documented table under attocode's tool
// names (read_file, glob, grep, write_file, edit_file, spawn_agent, bash;
// its danger levels one step up, on hutch's scale) and the names other
// agents use (read, ls, write, edit, sh, shell, exec, process_start,
// run_command); a tool in no rule is prompted at high danger. Engine.Rules
// replaces the table; LoadRules reads one from a TOML file, on top of
// DefaultRules:
//
//	[tools.bash]
//	decision = "deny"        # allow, prompt or deny
//
//	[tools.deploy]
//	decision = "prompt"
//	danger = "high"          # low, medium or high
//	shell = true             # judged command by command, as below
//
// A table for a tool with a default changes only the fields it sets (bash
// above stays a shell tool at high danger); one for another tool adds it
// and must set decision and danger. An unknown key, a bad value, a table
// setting nothing, a file that is not regular or is over 1 MiB are
// refused, naming the file, the line, the tool and the field. The CLI
// takes such a file as hutch grants decide --rules FILE, and hutch grants
// rules [--rules FILE] [--json] prints the table in effect. The local API
// (package localapi) has no approvals route yet, for rules or decisions.
//
// # Shell commands
//
// A remembered grant's pattern is a glob (* any run, \* a star). For a
// tool whose argument is a path, it is matched against the whole
// argument, and the newest live grant that matches decides. For a shell
// tool (Rule.Shell: bash, sh, shell, exec, process_start and run_command
// in DefaultRules) the command line is parsed (mvdan.cc/sh, bash syntax)
// and split into its simple commands: every command anywhere in it,
// whether joined by ;, &&, ||, | or &, in a subshell or a { } block, in
// the body of an if, while, for, case or function, or in a $(...),
// backticks, <(...) or $((...)); an assignment, export, let, [[ ]] or
// (( )) standing alone is a command too. Each is printed back on one line
// by the shell printer (so "npm   test" is "npm test" and "> out" is
// ">out"), with its redirections and those of the compound commands
// around it, and a here-document's body on the lines after. A literal
// string given to sh -c (or bash, dash, zsh... -c, also after sudo, env,
// xargs or find -exec) or to eval is parsed in turn, up to 4 deep. Then:
//
//   - a remembered deny that matches any of the commands, or the whole
//     command line, denies the call, whatever allows there are (a deny is
//     also matched against each command's bare words: without quotes,
//     assignments or redirections, and without the command name's
//     directory, so \sudo, X=1 sudo and /usr/bin/sudo do not escape "sudo
//     *");
//   - the call is allowed only if every command matches a remembered
//     allow: "npm test*" approves "npm test --watch", never "npm test; rm
//     -rf ~";
//   - otherwise the tool's rule applies (for a shell tool, prompt).
//
// What the parser cannot see through can never be approved by a pattern
// and falls to the tool's rule, with a Reason saying why: a line that
// does not parse, a command name that is an expansion ($X args, ${CMD},
// {rm,-rf,~}), a string given to sh -c or eval built from expansions
// (sh -c "$X", eval "$(tool init)"), strings nested deeper than 4. A
// deny still applies to what it can see. An interpreter's one-liner
// (python3 -c '...', node -e '...') and a script file (bash build.sh,
// . ./env.sh) are one command like any other: the code inside is not
// parsed, so "python3 -c *" approves any Python. A command that runs its
// arguments as a command (sudo, env, timeout, xargs, find -exec) is one
// command too, matched as a whole by allows: "timeout *" approves
// whatever it times. A denial also sees through the wrappers whose words
// it can read (env, sudo, doas, timeout, nice, ionice, stdbuf, nohup,
// setsid, time, command, builtin, exec; not xargs or find -exec): "sudo *"
// denies env X=1 sudo id and timeout 5 sudo reboot.
//
// The Verdict's Reason says which command decided: the deny grant, its
// pattern and the command it matched, the command that no grant allows,
// or every command with the grant that allows it.
//
// An approval remembered through the hook with no pattern is, for a
// shell call, one exact grant per command, so that the same compound
// line is approved next time and no other command rides on it (each of
// its commands alone is approved too); with a pattern it is one grant of
// that pattern. A refusal remembered with no pattern is an exact deny of
// the whole line. A call no pattern can approve is approved once and not
// remembered.
//
// It is a layer of consent and convenience in front of the sandbox, not
// a boundary: a pattern on a command line never bounds a model that can
// write a script. What a command can do is what its runtime.Policy lets
// the kernel enforce, whatever was decided here.
package approvals
