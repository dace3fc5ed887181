# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_h9sandbox_global_optspecs
    string join \n config= format= json v/verbose h/help V/version
end

function __fish_h9sandbox_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_h9sandbox_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_h9sandbox_using_subcommand
    set -l cmd (__fish_h9sandbox_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -s V -l version -d 'Print version'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "up" -d 'Start a sandbox: a hardened container with the work directory bind-mounted'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "exec" -d 'Run a command in a sandbox: a program and its arguments, or one shell command line'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "ps" -d 'List the commands running in a sandbox\'s background (exec --detach)'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "logs" -d 'Print the output of a background command (exec --detach), or the egress proxy\'s decisions'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "kill" -d 'Kill a background command\'s whole process tree (exec --detach)'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "bootstrap" -d 'Run a one-time setup command in a sandbox (streams its output; recorded in the sandbox)'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "down" -d 'Stop and remove sandboxes and their sub-sandboxes (always removes, even when the stop fails)'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "reap" -d 'Remove abandoned sandboxes of this state directory, and say what and why'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "renew" -d 'Extend a sandbox\'s lease (up --ttl): it then expires TTL from now'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "trust" -d 'Trust a project\'s ./sandbox.toml, its exact content, so that `up` and `mcp` use it'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "stop" -d 'Stop a sandbox\'s container, keeping it and its scratch volume (see `start`)'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "start" -d 'Start a stopped sandbox again (also after a daemon restart or a reboot)'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "pause" -d 'Freeze every process of a sandbox (see `resume`)'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "resume" -d 'Thaw a paused sandbox'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "snapshot" -d 'Commit a sandbox\'s file system (not its work dir) to a local image'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "run" -d 'Create a sandbox, run one command in it, remove it: the `docker run --rm` of sandboxes'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "ls" -d 'List sandboxes with their real container state, sub-sandboxes under their parent'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "read" -d 'Print a file of the sandbox\'s work dir (read on the host, refusing paths that leave it)'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "write" -d 'Replace a file of the sandbox\'s work dir atomically with stdin or --from FILE'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "edit" -d 'Replace text in a file of the sandbox\'s work dir (exactly one occurrence, or --all)'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "mcp" -d 'Serve the sandbox tools to an AI agent over the Model Context Protocol (stdio)'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "generate" -d 'Generate shell completion scripts and man pages from this command line\'s definition'
complete -c h9sandbox -n "__fish_h9sandbox_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l workdir -d 'Host directory bind-mounted at the same path; not one holding the host\'s secrets or code (a dot-directory of your home, a system tree such as /usr or /etc, ...; see allowed_workdirs) [default: current directory]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l image -d 'Image to run [config: image]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l name -d 'Container name [default: h9sandbox-<short id>]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l cpus -d 'CPU limit in cores [config: cpus]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l memory -d 'Memory limit, e.g. 512m or 2g [config: memory]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l pids-limit -d 'Maximum number of processes [config: pids_limit]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l network -d 'Network mode; allowlist: HTTP and HTTPS to the --allow hosts only [config: network]' -r -f -a "bridge\t'Docker\'s default bridge: outbound access, no published ports'
none\t'No network at all, only loopback'
allowlist\t'Only loopback, where the agent relays `127.0.0.1:3128` to a proxy sidecar that forwards HTTP and HTTPS to the allowed hosts only (config `allow`; see `sandbox::egress`)'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l allow -d 'Host an allowlist sandbox may reach: a name, or *.domain (repeatable; implies --network allowlist) [config: allow]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l runtime -d 'OCI runtime of the container, e.g. runsc for gVisor (see scripts/setup-gvisor.sh) [config: runtime]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l label -d 'Extra label on the container and record (repeatable)' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l parent -d 'Make this a sub-sandbox of ID: its image, limits, network and work dir, which the flags may only tighten' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l bootstrap -d 'Shell command run once the container is ready; \'\' for none [config: bootstrap_cmd]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l bootstrap-timeout -d 'Seconds before the bootstrap\'s process tree is killed; 0 = none [config: bootstrap_timeout_secs]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l user -d 'User of the sandbox\'s processes: root, host (your uid:gid) or UID:GID [config: user]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l owner-pid -d 'Tie the sandbox to a process: once it exits, `reap` removes the sandbox. A PID, or `parent` (the process that started h9sandbox) [default: none]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l ttl -d 'Lease: `reap` removes the sandbox this long after it started, unless `renew`ed (e.g. 90s, 30m, 2h, 1d) [default: none]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l bootstrap-required -d 'Fail, and remove the sandbox, when the bootstrap command fails [config: bootstrap_required]'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l reuse -d 'With --name: when a Running sandbox of that name has the same image, limits and work dir, print its ID and change nothing (fail naming what differs)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand up" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -l cwd -d 'Working directory, relative to the work dir or absolute inside it [default: the work dir]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -s e -l env -d 'Environment variable for the command (repeatable)' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -l timeout -d 'Seconds before the command\'s process tree is killed; 0 = none [config: exec_timeout_secs]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -l max-output -d 'With --format json: bytes kept of each of stdout and stderr' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -s i -l interactive -d 'Attach standard input to the command'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -s d -l detach -d 'Run it in the background: print its handle at once (see `ps`, `logs`, `kill`)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand exec" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ps" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ps" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ps" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ps" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ps" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand logs" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand logs" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand logs" -l network -d 'The egress proxy\'s decisions instead (network = "allowlist")'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand logs" -s f -l follow -d 'Keep printing what it writes until its processes have exited (or Ctrl-C)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand logs" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand logs" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand logs" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand kill" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand kill" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand kill" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand kill" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand kill" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand bootstrap" -l timeout -d 'Seconds before the command\'s process tree is killed; 0 = none [config: bootstrap_timeout_secs]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand bootstrap" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand bootstrap" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand bootstrap" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand bootstrap" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand bootstrap" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand down" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand down" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand down" -l all -d 'Every sandbox of this state directory'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand down" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand down" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand down" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand reap" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand reap" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand reap" -l dry-run -d 'Report what would be removed, and remove nothing'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand reap" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand reap" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand reap" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand renew" -l ttl -d 'New lease length from now, which later renewals keep (e.g. 30m, 2h) [default: the sandbox\'s TTL]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand renew" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand renew" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand renew" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand renew" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand renew" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand trust" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand trust" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand trust" -l forget -d 'Stop trusting it (the file need not exist any more)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand trust" -l list -d 'List the trusted files, and whether each still has the content trusted'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand trust" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand trust" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand trust" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand stop" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand stop" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand stop" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand stop" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand stop" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand start" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand start" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand start" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand start" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand start" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand pause" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand pause" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand pause" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand pause" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand pause" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand resume" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand resume" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand resume" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand resume" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand resume" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand snapshot" -l tag -d 'Name of the image to make, e.g. my-env:v1' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand snapshot" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand snapshot" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand snapshot" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand snapshot" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand snapshot" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l workdir -d 'Host directory bind-mounted at the same path; not one holding the host\'s secrets or code (a dot-directory of your home, a system tree such as /usr or /etc, ...; see allowed_workdirs) [default: current directory]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l image -d 'Image to run [config: image]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l name -d 'Container name [default: h9sandbox-<short id>]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l cpus -d 'CPU limit in cores [config: cpus]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l memory -d 'Memory limit, e.g. 512m or 2g [config: memory]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l pids-limit -d 'Maximum number of processes [config: pids_limit]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l network -d 'Network mode; allowlist: HTTP and HTTPS to the --allow hosts only [config: network]' -r -f -a "bridge\t'Docker\'s default bridge: outbound access, no published ports'
none\t'No network at all, only loopback'
allowlist\t'Only loopback, where the agent relays `127.0.0.1:3128` to a proxy sidecar that forwards HTTP and HTTPS to the allowed hosts only (config `allow`; see `sandbox::egress`)'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l allow -d 'Host an allowlist sandbox may reach: a name, or *.domain (repeatable; implies --network allowlist) [config: allow]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l runtime -d 'OCI runtime of the container, e.g. runsc for gVisor (see scripts/setup-gvisor.sh) [config: runtime]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l label -d 'Extra label on the container and record (repeatable)' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l parent -d 'Make this a sub-sandbox of ID: its image, limits, network and work dir, which the flags may only tighten' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l bootstrap -d 'Shell command run once the container is ready; \'\' for none [config: bootstrap_cmd]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l bootstrap-timeout -d 'Seconds before the bootstrap\'s process tree is killed; 0 = none [config: bootstrap_timeout_secs]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l user -d 'User of the sandbox\'s processes: root, host (your uid:gid) or UID:GID [config: user]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l owner-pid -d 'Tie the sandbox to a process: once it exits, `reap` removes the sandbox. A PID, or `parent` (the process that started h9sandbox) [default: none]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l ttl -d 'Lease: `reap` removes the sandbox this long after it started, unless `renew`ed (e.g. 90s, 30m, 2h, 1d) [default: none]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l cwd -d 'Working directory, relative to the work dir or absolute inside it [default: the work dir]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -s e -l env -d 'Environment variable for the command (repeatable)' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l timeout -d 'Seconds before the command\'s process tree is killed; 0 = none [config: exec_timeout_secs]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l max-output -d 'With --format json: bytes kept of each of stdout and stderr' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l bootstrap-required -d 'Fail, and remove the sandbox, when the bootstrap command fails [config: bootstrap_required]'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l reuse -d 'With --name: when a Running sandbox of that name has the same image, limits and work dir, print its ID and change nothing (fail naming what differs)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -s i -l interactive -d 'Attach standard input to the command'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ls" -l interval -d 'With --watch: seconds between two looks at the sandboxes' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ls" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ls" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ls" -s w -l watch -d 'Redraw the list whenever it changes, until Ctrl-C'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ls" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ls" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand ls" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand read" -l max-bytes -d 'Print at most this many bytes (JSON: the content holds at most this many)' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand read" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand read" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand read" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand read" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand read" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand write" -l from -d 'Take the content from this host file instead of stdin' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand write" -l mode -d 'Permission bits in octal [default: an existing file\'s, else 644]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand write" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand write" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand write" -l parents -d 'Create missing parent directories'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand write" -l append -d 'Add to the end of the existing content (still replaced atomically)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand write" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand write" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand write" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand edit" -l old -d 'Text to find (exact, whitespace and newlines included)' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand edit" -l new -d 'Replacement text (may be empty)' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand edit" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand edit" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand edit" -l all -d 'Replace every occurrence (at least one must exist)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand edit" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand edit" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand edit" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand mcp" -l workdir -d 'Work dir of sandboxes made without one (--auto-up, sandbox_up), and where relative work dirs start [default: current directory]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand mcp" -l image -d 'Image of the sandboxes the session makes [config: image]' -r
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand mcp" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand mcp" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand mcp" -l auto-up -d 'Make the session\'s sandbox at start (the tools\' default), removed when the session ends'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand mcp" -l all-sandboxes -d 'Let the tools list and act on every sandbox of the state directory, also those made elsewhere [default: only the sandboxes this session made, and their sub-sandboxes]'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand mcp" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand mcp" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand mcp" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and not __fish_seen_subcommand_from completions man help" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and not __fish_seen_subcommand_from completions man help" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and not __fish_seen_subcommand_from completions man help" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and not __fish_seen_subcommand_from completions man help" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and not __fish_seen_subcommand_from completions man help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and not __fish_seen_subcommand_from completions man help" -f -a "completions" -d 'A shell\'s completion script on stdout, or every shell\'s into DIR with --all'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and not __fish_seen_subcommand_from completions man help" -f -a "man" -d 'Man pages: h9sandbox.1 and one h9sandbox-SUBCOMMAND.1 per subcommand, into DIR'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and not __fish_seen_subcommand_from completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from completions" -l all -d 'Write the scripts of every shell into this directory' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from completions" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from completions" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from completions" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from completions" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from man" -l config -d 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]' -r -F
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from man" -l format -d 'Output format' -r -f -a "table\t'For people: a table, or plain lines'
json\t'For programs: one JSON document on stdout'"
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from man" -l json -d 'Same as --format json'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from man" -s v -l verbose -d 'Print every engine command line to stderr before running it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from help" -f -a "completions" -d 'A shell\'s completion script on stdout, or every shell\'s into DIR with --all'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from help" -f -a "man" -d 'Man pages: h9sandbox.1 and one h9sandbox-SUBCOMMAND.1 per subcommand, into DIR'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand generate; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "up" -d 'Start a sandbox: a hardened container with the work directory bind-mounted'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "exec" -d 'Run a command in a sandbox: a program and its arguments, or one shell command line'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "ps" -d 'List the commands running in a sandbox\'s background (exec --detach)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "logs" -d 'Print the output of a background command (exec --detach), or the egress proxy\'s decisions'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "kill" -d 'Kill a background command\'s whole process tree (exec --detach)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "bootstrap" -d 'Run a one-time setup command in a sandbox (streams its output; recorded in the sandbox)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "down" -d 'Stop and remove sandboxes and their sub-sandboxes (always removes, even when the stop fails)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "reap" -d 'Remove abandoned sandboxes of this state directory, and say what and why'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "renew" -d 'Extend a sandbox\'s lease (up --ttl): it then expires TTL from now'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "trust" -d 'Trust a project\'s ./sandbox.toml, its exact content, so that `up` and `mcp` use it'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "stop" -d 'Stop a sandbox\'s container, keeping it and its scratch volume (see `start`)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "start" -d 'Start a stopped sandbox again (also after a daemon restart or a reboot)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "pause" -d 'Freeze every process of a sandbox (see `resume`)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "resume" -d 'Thaw a paused sandbox'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "snapshot" -d 'Commit a sandbox\'s file system (not its work dir) to a local image'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "run" -d 'Create a sandbox, run one command in it, remove it: the `docker run --rm` of sandboxes'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "ls" -d 'List sandboxes with their real container state, sub-sandboxes under their parent'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "read" -d 'Print a file of the sandbox\'s work dir (read on the host, refusing paths that leave it)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "write" -d 'Replace a file of the sandbox\'s work dir atomically with stdin or --from FILE'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "edit" -d 'Replace text in a file of the sandbox\'s work dir (exactly one occurrence, or --all)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "mcp" -d 'Serve the sandbox tools to an AI agent over the Model Context Protocol (stdio)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "generate" -d 'Generate shell completion scripts and man pages from this command line\'s definition'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and not __fish_seen_subcommand_from up exec ps logs kill bootstrap down reap renew trust stop start pause resume snapshot run ls read write edit mcp generate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and __fish_seen_subcommand_from generate" -f -a "completions" -d 'A shell\'s completion script on stdout, or every shell\'s into DIR with --all'
complete -c h9sandbox -n "__fish_h9sandbox_using_subcommand help; and __fish_seen_subcommand_from generate" -f -a "man" -d 'Man pages: h9sandbox.1 and one h9sandbox-SUBCOMMAND.1 per subcommand, into DIR'
