package cli

import "context"

// cmdSpec is one entry of vipproxy's command table: a command or one of
// its subcommands, in words. The table is the one source of `--help`,
// `vipproxy help COMMAND`, the man page vipproxy(8), the command list of
// docs/operations.md and the shell completions. A command's flags are not
// written here: they are those its own code parses (flagsOf asks it).
type cmdSpec struct {
	name     string
	summary  string // one line: lower case, no final period
	args     string // its arguments in usage, when they are not [flags]
	about    string // more for --help and the man page ("" : none)
	doc      string // the page of docs/ that says more ("" : none)
	examples []example
	subs     []*cmdSpec // subcommands, dispatched by run
	// run runs a top-level command with the arguments after its name
	// (subcommands: nil; their command's run dispatches them).
	run func(ctx context.Context, env Env, args []string) int
}

// example is a command line and what it does.
type example struct{ line, what string }

// commandTable is every command of vipproxy, in the order of its help.
func commandTable() []*cmdSpec {
	return []*cmdSpec{
		{name: "serve", run: runServe, summary: "run the proxy (socket-activated under systemd)",
			about: "Serves the VIP ports until SIGTERM or SIGINT, then drains open connections for timeouts.drain. " +
				"Under systemd, vipproxy.socket holds the VIP listeners and passes them to vipproxy.service, which runs this; " +
				"SIGHUP reloads the config (use vipproxy reload, which says whether the daemon took it).",
			doc: "how-it-works.md",
			examples: []example{
				{"vipproxy serve --config ./vipproxy.toml", "run in the foreground without systemd (vipproxy binds the VIP ports itself)"},
			}},
		{name: "check", run: runCheck, summary: "validate a config and print the effective config",
			about: "Prints the config with every default filled in and exits 0, or prints one file:line: key: reason line " +
				"per problem and exits 2. What check passes, every other command takes.",
			doc: "configuration.md",
			examples: []example{
				{"vipproxy check --quiet", "validate /etc/vipproxy/vipproxy.toml; print nothing when it is valid (the units' ExecStartPre=)"},
				{"vipproxy check --keepalived-conf /etc/keepalived/keepalived.conf", "also reject what in keepalived's config would cut or split the VIP"},
			}},
		{name: "probe", run: runProbe, summary: "exit 0 only if the local daemon is ready (keepalived's track script)",
			about: "Asks the daemon's /readyz: its probe socket first, then its control socket, then admin.listen when it is a unix socket " +
				"(never over TCP: another program could answer there for a daemon that is down). " +
				"Prints the answer on stdout and exits 0 when ready; else prints why on stderr and exits 1.",
			examples: []example{
				{"vipproxy probe", "is this node's proxy ready to hold the VIP?"},
				{"vipproxy probe --control '' --admin unix:/run/vipproxy-admin.sock", "ask a unix admin endpoint only"},
			}},
		{name: "status", run: runStatus, summary: "print the daemon's state for a person: backends, VIP, keepalived, last reload",
			about: "Asks the daemon's control socket, then admin.listen when it is a unix socket; over TCP only an endpoint named with --admin. " +
				"Exits 0 when the daemon is ready, 1 when it is not or does not answer.",
			doc: "operations.md",
			examples: []example{
				{"vipproxy status", "backends with their state, the VIPs held, the last reload"},
				{"vipproxy status --json", "the same for scripts"},
				{"vipproxy status --admin 127.0.0.1:6449", "also ask the admin endpoint over TCP (trusting whoever holds that port)"},
			}},
		{name: "doctor", run: runDoctor, summary: "check the host (VIP port, link, ARP, drop-ins, keepalived or BGP, backends), each with its fix",
			about: "Prints each check as PASS, WARN or FAIL with the fix, or SKIP. Asks the daemon as status does. Exits 1 if any check failed " +
				"(a warning does not), 2 on a bad config.",
			doc: "operations.md",
			examples: []example{
				{"vipproxy doctor", "every check"},
				{"vipproxy doctor --only vip-port,arp --json", "two checks, as JSON"},
			}},
		{name: "reload", run: runReload, summary: "validate the config, SIGHUP the daemon, exit 1 if it refused the file (ExecReload=)",
			about: "Exits 0 when the new config serves, 2 when the file is invalid (the daemon is not signalled), " +
				"1 when the daemon refused it (the running config keeps serving). kill -HUP alone reports success either way.",
			examples: []example{
				{"vipproxy reload --pid $MAINPID", "vipproxy.service's ExecReload="},
				{"systemctl reload vipproxy.service", "the same through systemd"},
			}},
		{name: "prestop", run: runPreStop, summary: "tell the daemon whether systemd restarts or stops it (ExecStop=)",
			about: "Asks systemd which job stops the daemon's unit and tells the daemon on its control socket: " +
				"a restart hands the open connections over to the next daemon through systemd's file descriptor store, " +
				"a stop drains them. A daemon told nothing drains. Runs as root (ExecStop=+), before systemd's SIGTERM; " +
				"exits 0 when it cannot tell, so the stop goes on.",
			doc: "operations.md",
			examples: []example{
				{"vipproxy prestop --pid=$MAINPID", "vipproxy.service's ExecStop="},
			}},
		{name: "network", run: runNetwork, summary: "set up the dummy link, the VIPs and the uplinks' ARP sysctls through systemd-networkd",
			doc: "host-network.md",
			subs: []*cmdSpec{
				{name: "render", summary: "print the networkd drop-ins and the sysctl file; write nothing",
					examples: []example{{"vipproxy network render --root /tmp/node", "print them with their paths under /tmp/node"}}},
				{name: "write", summary: "write the networkd drop-ins and the sysctl file to their paths (under --root); --diff: print what would change, write nothing",
					examples: []example{{"vipproxy network write --diff", "what writing them would change"}}},
				{name: "apply", summary: "write the networkd drop-ins and the sysctl file, set the uplink sysctls, reload networkd and verify (--diff: dry run)",
					examples: []example{
						{"vipproxy network apply", "vipproxy-network.service's ExecStart="},
						{"vipproxy network apply --netlink", "without systemd-networkd: create the link and the VIPs with netlink"},
					}},
				{name: "check", summary: "verify the live link, VIPs and sysctls; exit 1 on any problem",
					examples: []example{{"vipproxy network check", "one line per problem, or ok"}}},
				{name: "remove", summary: "undo apply: remove the networkd drop-ins, the sysctl file, the link and the VIPs",
					examples: []example{{"vipproxy network remove", "before removing vipproxy from a node"}}},
			}},
		{name: "keepalived", run: runKeepalived, summary: "render keepalived's vrrp_script and vrrp_instance for the VIPs (vip.mode = vrrp)",
			about: "keepalived.conf includes the file. The form without a subcommand (--out FILE to write) is deprecated.",
			doc:   "host-network.md",
			subs: []*cmdSpec{
				{name: "render", summary: "print the vrrp_script and vrrp_instance; write nothing",
					examples: []example{{"vipproxy keepalived render", "what keepalived would read"}}},
				{name: "write", summary: "write the vrrp_script and vrrp_instance to --out FILE (default " + keepalivedFile + "); --diff: print what would change, write nothing",
					examples: []example{
						{"vipproxy keepalived write && systemctl reload keepalived", "write " + keepalivedFile + " and have keepalived read it"},
						{"vipproxy keepalived write --diff", "what writing it would change"},
					}},
			}},
		{name: "bird", run: runBird, summary: "render BIRD 2's include file announcing the VIPs by BGP (vip.mode = bgp)",
			about: "bird.conf includes the file. The form without a subcommand (--out FILE to write) is deprecated.",
			doc:   "bgp.md",
			subs: []*cmdSpec{
				{name: "render", summary: "print BIRD's include file; write nothing",
					examples: []example{{"vipproxy bird render", "what BIRD would read"}}},
				{name: "write", summary: "write BIRD's include file to --out FILE (default " + birdFile + "); --diff: print what would change, write nothing",
					examples: []example{{"vipproxy bird write && birdc configure", "write " + birdFile + " and have BIRD read it"}}},
			}},
		{name: "announce", run: runAnnounce, summary: "hold the VIPs on the announce link while the local daemon is ready (vip.mode = bgp)",
			about: "vipproxy-announce.service runs it; BIRD exports the VIPs on that link.",
			doc:   "bgp.md",
			examples: []example{
				{"vipproxy announce", "vipproxy-announce.service's ExecStart="},
			}},
		{name: "units", run: runUnits, summary: "render the socket units' drop-ins with the VIP listeners, and vipproxy.service's credentials drop-in",
			about: "vipproxy.socket's drop-in has one ListenStream= per VIP of the first port; each other port's is " +
				"vipproxy-port@NAME.socket's. systemd binds them only when the socket starts. When the config names " +
				"files under /run/credentials/vipproxy.service/, vipproxy.service.d/credentials.conf has the " +
				"LoadCredential= lines that copy them there.",
			doc: "configuration.md",
			subs: []*cmdSpec{
				{name: "render", summary: "print the socket units' drop-ins; write nothing",
					examples: []example{{"vipproxy units render", "the drop-ins with their paths"}}},
				{name: "write", summary: "write the socket units' drop-ins (under --root), remove those of ports the config no longer has and, with more than one port, install the vipproxy-port@.socket template where systemd has none; --diff: print what would change, write nothing",
					examples: []example{
						{"vipproxy units write && systemctl daemon-reload && systemctl restart vipproxy.socket", "after changing the VIPs or ports"},
						{"vipproxy units write --diff", "what writing them would change"},
					}},
			}},
		{name: "completion", run: runCompletion, summary: "print the shell completion script for bash or zsh",
			subs: []*cmdSpec{
				{name: "bash", summary: "print the bash completion script",
					examples: []example{
						{"source <(vipproxy completion bash)", "complete vipproxy's commands and flags in this bash"},
						{"vipproxy completion bash > /usr/share/bash-completion/completions/vipproxy", "for every bash on this node"},
					}},
				{name: "zsh", summary: "print the zsh completion script",
					examples: []example{{"vipproxy completion zsh > \"${fpath[1]}/_vipproxy\"", "install it where zsh looks for completions"}}},
			}},
		{name: "version", run: runVersion, summary: "print the version, the commit, the Go version and the architecture",
			examples: []example{{"vipproxy --version", "the same"}}},
		{name: "help", run: runHelp, args: "[COMMAND [SUBCOMMAND]]", summary: "print the help of vipproxy or of a command",
			examples: []example{{"vipproxy help network apply", "the flags and examples of network apply"}}},
	}
}

// lookup finds the command or subcommand at path (["network", "apply"]).
func lookup(path []string) *cmdSpec {
	specs := commandTable()
	var found *cmdSpec
	for _, name := range path {
		found = nil
		for _, s := range specs {
			if s.name == name {
				found = s
			}
		}
		if found == nil {
			return nil
		}
		specs = found.subs
	}
	return found
}
