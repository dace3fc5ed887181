
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'h9sandbox' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'h9sandbox'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'h9sandbox' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('up', 'up', [CompletionResultType]::ParameterValue, 'Start a sandbox: a hardened container with the work directory bind-mounted')
            [CompletionResult]::new('exec', 'exec', [CompletionResultType]::ParameterValue, 'Run a command in a sandbox: a program and its arguments, or one shell command line')
            [CompletionResult]::new('ps', 'ps', [CompletionResultType]::ParameterValue, 'List the commands running in a sandbox''s background (exec --detach)')
            [CompletionResult]::new('logs', 'logs', [CompletionResultType]::ParameterValue, 'Print the output of a background command (exec --detach), or the egress proxy''s decisions')
            [CompletionResult]::new('kill', 'kill', [CompletionResultType]::ParameterValue, 'Kill a background command''s whole process tree (exec --detach)')
            [CompletionResult]::new('bootstrap', 'bootstrap', [CompletionResultType]::ParameterValue, 'Run a one-time setup command in a sandbox (streams its output; recorded in the sandbox)')
            [CompletionResult]::new('down', 'down', [CompletionResultType]::ParameterValue, 'Stop and remove sandboxes and their sub-sandboxes (always removes, even when the stop fails)')
            [CompletionResult]::new('reap', 'reap', [CompletionResultType]::ParameterValue, 'Remove abandoned sandboxes of this state directory, and say what and why')
            [CompletionResult]::new('renew', 'renew', [CompletionResultType]::ParameterValue, 'Extend a sandbox''s lease (up --ttl): it then expires TTL from now')
            [CompletionResult]::new('trust', 'trust', [CompletionResultType]::ParameterValue, 'Trust a project''s ./sandbox.toml, its exact content, so that `up` and `mcp` use it')
            [CompletionResult]::new('stop', 'stop', [CompletionResultType]::ParameterValue, 'Stop a sandbox''s container, keeping it and its scratch volume (see `start`)')
            [CompletionResult]::new('start', 'start', [CompletionResultType]::ParameterValue, 'Start a stopped sandbox again (also after a daemon restart or a reboot)')
            [CompletionResult]::new('pause', 'pause', [CompletionResultType]::ParameterValue, 'Freeze every process of a sandbox (see `resume`)')
            [CompletionResult]::new('resume', 'resume', [CompletionResultType]::ParameterValue, 'Thaw a paused sandbox')
            [CompletionResult]::new('snapshot', 'snapshot', [CompletionResultType]::ParameterValue, 'Commit a sandbox''s file system (not its work dir) to a local image')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Create a sandbox, run one command in it, remove it: the `docker run --rm` of sandboxes')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List sandboxes with their real container state, sub-sandboxes under their parent')
            [CompletionResult]::new('read', 'read', [CompletionResultType]::ParameterValue, 'Print a file of the sandbox''s work dir (read on the host, refusing paths that leave it)')
            [CompletionResult]::new('write', 'write', [CompletionResultType]::ParameterValue, 'Replace a file of the sandbox''s work dir atomically with stdin or --from FILE')
            [CompletionResult]::new('edit', 'edit', [CompletionResultType]::ParameterValue, 'Replace text in a file of the sandbox''s work dir (exactly one occurrence, or --all)')
            [CompletionResult]::new('mcp', 'mcp', [CompletionResultType]::ParameterValue, 'Serve the sandbox tools to an AI agent over the Model Context Protocol (stdio)')
            [CompletionResult]::new('generate', 'generate', [CompletionResultType]::ParameterValue, 'Generate shell completion scripts and man pages from this command line''s definition')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'h9sandbox;up' {
            [CompletionResult]::new('--workdir', '--workdir', [CompletionResultType]::ParameterName, 'Host directory bind-mounted at the same path; not one holding the host''s secrets or code (a dot-directory of your home, a system tree such as /usr or /etc, ...; see allowed_workdirs) [default: current directory]')
            [CompletionResult]::new('--image', '--image', [CompletionResultType]::ParameterName, 'Image to run [config: image]')
            [CompletionResult]::new('--name', '--name', [CompletionResultType]::ParameterName, 'Container name [default: h9sandbox-<short id>]')
            [CompletionResult]::new('--cpus', '--cpus', [CompletionResultType]::ParameterName, 'CPU limit in cores [config: cpus]')
            [CompletionResult]::new('--memory', '--memory', [CompletionResultType]::ParameterName, 'Memory limit, e.g. 512m or 2g [config: memory]')
            [CompletionResult]::new('--pids-limit', '--pids-limit', [CompletionResultType]::ParameterName, 'Maximum number of processes [config: pids_limit]')
            [CompletionResult]::new('--network', '--network', [CompletionResultType]::ParameterName, 'Network mode; allowlist: HTTP and HTTPS to the --allow hosts only [config: network]')
            [CompletionResult]::new('--allow', '--allow', [CompletionResultType]::ParameterName, 'Host an allowlist sandbox may reach: a name, or *.domain (repeatable; implies --network allowlist) [config: allow]')
            [CompletionResult]::new('--runtime', '--runtime', [CompletionResultType]::ParameterName, 'OCI runtime of the container, e.g. runsc for gVisor (see scripts/setup-gvisor.sh) [config: runtime]')
            [CompletionResult]::new('--label', '--label', [CompletionResultType]::ParameterName, 'Extra label on the container and record (repeatable)')
            [CompletionResult]::new('--parent', '--parent', [CompletionResultType]::ParameterName, 'Make this a sub-sandbox of ID: its image, limits, network and work dir, which the flags may only tighten')
            [CompletionResult]::new('--bootstrap', '--bootstrap', [CompletionResultType]::ParameterName, 'Shell command run once the container is ready; '''' for none [config: bootstrap_cmd]')
            [CompletionResult]::new('--bootstrap-timeout', '--bootstrap-timeout', [CompletionResultType]::ParameterName, 'Seconds before the bootstrap''s process tree is killed; 0 = none [config: bootstrap_timeout_secs]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'User of the sandbox''s processes: root, host (your uid:gid) or UID:GID [config: user]')
            [CompletionResult]::new('--owner-pid', '--owner-pid', [CompletionResultType]::ParameterName, 'Tie the sandbox to a process: once it exits, `reap` removes the sandbox. A PID, or `parent` (the process that started h9sandbox) [default: none]')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'Lease: `reap` removes the sandbox this long after it started, unless `renew`ed (e.g. 90s, 30m, 2h, 1d) [default: none]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--bootstrap-required', '--bootstrap-required', [CompletionResultType]::ParameterName, 'Fail, and remove the sandbox, when the bootstrap command fails [config: bootstrap_required]')
            [CompletionResult]::new('--reuse', '--reuse', [CompletionResultType]::ParameterName, 'With --name: when a Running sandbox of that name has the same image, limits and work dir, print its ID and change nothing (fail naming what differs)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;exec' {
            [CompletionResult]::new('--cwd', '--cwd', [CompletionResultType]::ParameterName, 'Working directory, relative to the work dir or absolute inside it [default: the work dir]')
            [CompletionResult]::new('-e', '-e', [CompletionResultType]::ParameterName, 'Environment variable for the command (repeatable)')
            [CompletionResult]::new('--env', '--env', [CompletionResultType]::ParameterName, 'Environment variable for the command (repeatable)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Seconds before the command''s process tree is killed; 0 = none [config: exec_timeout_secs]')
            [CompletionResult]::new('--max-output', '--max-output', [CompletionResultType]::ParameterName, 'With --format json: bytes kept of each of stdout and stderr')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'Attach standard input to the command')
            [CompletionResult]::new('--interactive', '--interactive', [CompletionResultType]::ParameterName, 'Attach standard input to the command')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'Run it in the background: print its handle at once (see `ps`, `logs`, `kill`)')
            [CompletionResult]::new('--detach', '--detach', [CompletionResultType]::ParameterName, 'Run it in the background: print its handle at once (see `ps`, `logs`, `kill`)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;ps' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;logs' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--network', '--network', [CompletionResultType]::ParameterName, 'The egress proxy''s decisions instead (network = "allowlist")')
            [CompletionResult]::new('-f', '-f', [CompletionResultType]::ParameterName, 'Keep printing what it writes until its processes have exited (or Ctrl-C)')
            [CompletionResult]::new('--follow', '--follow', [CompletionResultType]::ParameterName, 'Keep printing what it writes until its processes have exited (or Ctrl-C)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;kill' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;bootstrap' {
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Seconds before the command''s process tree is killed; 0 = none [config: bootstrap_timeout_secs]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;down' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'Every sandbox of this state directory')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;reap' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--dry-run', '--dry-run', [CompletionResultType]::ParameterName, 'Report what would be removed, and remove nothing')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;renew' {
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'New lease length from now, which later renewals keep (e.g. 30m, 2h) [default: the sandbox''s TTL]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;trust' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--forget', '--forget', [CompletionResultType]::ParameterName, 'Stop trusting it (the file need not exist any more)')
            [CompletionResult]::new('--list', '--list', [CompletionResultType]::ParameterName, 'List the trusted files, and whether each still has the content trusted')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;stop' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;start' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;pause' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;resume' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;snapshot' {
            [CompletionResult]::new('--tag', '--tag', [CompletionResultType]::ParameterName, 'Name of the image to make, e.g. my-env:v1')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;run' {
            [CompletionResult]::new('--workdir', '--workdir', [CompletionResultType]::ParameterName, 'Host directory bind-mounted at the same path; not one holding the host''s secrets or code (a dot-directory of your home, a system tree such as /usr or /etc, ...; see allowed_workdirs) [default: current directory]')
            [CompletionResult]::new('--image', '--image', [CompletionResultType]::ParameterName, 'Image to run [config: image]')
            [CompletionResult]::new('--name', '--name', [CompletionResultType]::ParameterName, 'Container name [default: h9sandbox-<short id>]')
            [CompletionResult]::new('--cpus', '--cpus', [CompletionResultType]::ParameterName, 'CPU limit in cores [config: cpus]')
            [CompletionResult]::new('--memory', '--memory', [CompletionResultType]::ParameterName, 'Memory limit, e.g. 512m or 2g [config: memory]')
            [CompletionResult]::new('--pids-limit', '--pids-limit', [CompletionResultType]::ParameterName, 'Maximum number of processes [config: pids_limit]')
            [CompletionResult]::new('--network', '--network', [CompletionResultType]::ParameterName, 'Network mode; allowlist: HTTP and HTTPS to the --allow hosts only [config: network]')
            [CompletionResult]::new('--allow', '--allow', [CompletionResultType]::ParameterName, 'Host an allowlist sandbox may reach: a name, or *.domain (repeatable; implies --network allowlist) [config: allow]')
            [CompletionResult]::new('--runtime', '--runtime', [CompletionResultType]::ParameterName, 'OCI runtime of the container, e.g. runsc for gVisor (see scripts/setup-gvisor.sh) [config: runtime]')
            [CompletionResult]::new('--label', '--label', [CompletionResultType]::ParameterName, 'Extra label on the container and record (repeatable)')
            [CompletionResult]::new('--parent', '--parent', [CompletionResultType]::ParameterName, 'Make this a sub-sandbox of ID: its image, limits, network and work dir, which the flags may only tighten')
            [CompletionResult]::new('--bootstrap', '--bootstrap', [CompletionResultType]::ParameterName, 'Shell command run once the container is ready; '''' for none [config: bootstrap_cmd]')
            [CompletionResult]::new('--bootstrap-timeout', '--bootstrap-timeout', [CompletionResultType]::ParameterName, 'Seconds before the bootstrap''s process tree is killed; 0 = none [config: bootstrap_timeout_secs]')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'User of the sandbox''s processes: root, host (your uid:gid) or UID:GID [config: user]')
            [CompletionResult]::new('--owner-pid', '--owner-pid', [CompletionResultType]::ParameterName, 'Tie the sandbox to a process: once it exits, `reap` removes the sandbox. A PID, or `parent` (the process that started h9sandbox) [default: none]')
            [CompletionResult]::new('--ttl', '--ttl', [CompletionResultType]::ParameterName, 'Lease: `reap` removes the sandbox this long after it started, unless `renew`ed (e.g. 90s, 30m, 2h, 1d) [default: none]')
            [CompletionResult]::new('--cwd', '--cwd', [CompletionResultType]::ParameterName, 'Working directory, relative to the work dir or absolute inside it [default: the work dir]')
            [CompletionResult]::new('-e', '-e', [CompletionResultType]::ParameterName, 'Environment variable for the command (repeatable)')
            [CompletionResult]::new('--env', '--env', [CompletionResultType]::ParameterName, 'Environment variable for the command (repeatable)')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Seconds before the command''s process tree is killed; 0 = none [config: exec_timeout_secs]')
            [CompletionResult]::new('--max-output', '--max-output', [CompletionResultType]::ParameterName, 'With --format json: bytes kept of each of stdout and stderr')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--bootstrap-required', '--bootstrap-required', [CompletionResultType]::ParameterName, 'Fail, and remove the sandbox, when the bootstrap command fails [config: bootstrap_required]')
            [CompletionResult]::new('--reuse', '--reuse', [CompletionResultType]::ParameterName, 'With --name: when a Running sandbox of that name has the same image, limits and work dir, print its ID and change nothing (fail naming what differs)')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'Attach standard input to the command')
            [CompletionResult]::new('--interactive', '--interactive', [CompletionResultType]::ParameterName, 'Attach standard input to the command')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;ls' {
            [CompletionResult]::new('--interval', '--interval', [CompletionResultType]::ParameterName, 'With --watch: seconds between two looks at the sandboxes')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('-w', '-w', [CompletionResultType]::ParameterName, 'Redraw the list whenever it changes, until Ctrl-C')
            [CompletionResult]::new('--watch', '--watch', [CompletionResultType]::ParameterName, 'Redraw the list whenever it changes, until Ctrl-C')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;read' {
            [CompletionResult]::new('--max-bytes', '--max-bytes', [CompletionResultType]::ParameterName, 'Print at most this many bytes (JSON: the content holds at most this many)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;write' {
            [CompletionResult]::new('--from', '--from', [CompletionResultType]::ParameterName, 'Take the content from this host file instead of stdin')
            [CompletionResult]::new('--mode', '--mode', [CompletionResultType]::ParameterName, 'Permission bits in octal [default: an existing file''s, else 644]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--parents', '--parents', [CompletionResultType]::ParameterName, 'Create missing parent directories')
            [CompletionResult]::new('--append', '--append', [CompletionResultType]::ParameterName, 'Add to the end of the existing content (still replaced atomically)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;edit' {
            [CompletionResult]::new('--old', '--old', [CompletionResultType]::ParameterName, 'Text to find (exact, whitespace and newlines included)')
            [CompletionResult]::new('--new', '--new', [CompletionResultType]::ParameterName, 'Replacement text (may be empty)')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'Replace every occurrence (at least one must exist)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;mcp' {
            [CompletionResult]::new('--workdir', '--workdir', [CompletionResultType]::ParameterName, 'Work dir of sandboxes made without one (--auto-up, sandbox_up), and where relative work dirs start [default: current directory]')
            [CompletionResult]::new('--image', '--image', [CompletionResultType]::ParameterName, 'Image of the sandboxes the session makes [config: image]')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--auto-up', '--auto-up', [CompletionResultType]::ParameterName, 'Make the session''s sandbox at start (the tools'' default), removed when the session ends')
            [CompletionResult]::new('--all-sandboxes', '--all-sandboxes', [CompletionResultType]::ParameterName, 'Let the tools list and act on every sandbox of the state directory, also those made elsewhere [default: only the sandboxes this session made, and their sub-sandboxes]')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;generate' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'A shell''s completion script on stdout, or every shell''s into DIR with --all')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Man pages: h9sandbox.1 and one h9sandbox-SUBCOMMAND.1 per subcommand, into DIR')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'h9sandbox;generate;completions' {
            [CompletionResult]::new('--all', '--all', [CompletionResultType]::ParameterName, 'Write the scripts of every shell into this directory')
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;generate;man' {
            [CompletionResult]::new('--config', '--config', [CompletionResultType]::ParameterName, 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'Output format')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Same as --format json')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print every engine command line to stderr before running it')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'h9sandbox;generate;help' {
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'A shell''s completion script on stdout, or every shell''s into DIR with --all')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Man pages: h9sandbox.1 and one h9sandbox-SUBCOMMAND.1 per subcommand, into DIR')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'h9sandbox;generate;help;completions' {
            break
        }
        'h9sandbox;generate;help;man' {
            break
        }
        'h9sandbox;generate;help;help' {
            break
        }
        'h9sandbox;help' {
            [CompletionResult]::new('up', 'up', [CompletionResultType]::ParameterValue, 'Start a sandbox: a hardened container with the work directory bind-mounted')
            [CompletionResult]::new('exec', 'exec', [CompletionResultType]::ParameterValue, 'Run a command in a sandbox: a program and its arguments, or one shell command line')
            [CompletionResult]::new('ps', 'ps', [CompletionResultType]::ParameterValue, 'List the commands running in a sandbox''s background (exec --detach)')
            [CompletionResult]::new('logs', 'logs', [CompletionResultType]::ParameterValue, 'Print the output of a background command (exec --detach), or the egress proxy''s decisions')
            [CompletionResult]::new('kill', 'kill', [CompletionResultType]::ParameterValue, 'Kill a background command''s whole process tree (exec --detach)')
            [CompletionResult]::new('bootstrap', 'bootstrap', [CompletionResultType]::ParameterValue, 'Run a one-time setup command in a sandbox (streams its output; recorded in the sandbox)')
            [CompletionResult]::new('down', 'down', [CompletionResultType]::ParameterValue, 'Stop and remove sandboxes and their sub-sandboxes (always removes, even when the stop fails)')
            [CompletionResult]::new('reap', 'reap', [CompletionResultType]::ParameterValue, 'Remove abandoned sandboxes of this state directory, and say what and why')
            [CompletionResult]::new('renew', 'renew', [CompletionResultType]::ParameterValue, 'Extend a sandbox''s lease (up --ttl): it then expires TTL from now')
            [CompletionResult]::new('trust', 'trust', [CompletionResultType]::ParameterValue, 'Trust a project''s ./sandbox.toml, its exact content, so that `up` and `mcp` use it')
            [CompletionResult]::new('stop', 'stop', [CompletionResultType]::ParameterValue, 'Stop a sandbox''s container, keeping it and its scratch volume (see `start`)')
            [CompletionResult]::new('start', 'start', [CompletionResultType]::ParameterValue, 'Start a stopped sandbox again (also after a daemon restart or a reboot)')
            [CompletionResult]::new('pause', 'pause', [CompletionResultType]::ParameterValue, 'Freeze every process of a sandbox (see `resume`)')
            [CompletionResult]::new('resume', 'resume', [CompletionResultType]::ParameterValue, 'Thaw a paused sandbox')
            [CompletionResult]::new('snapshot', 'snapshot', [CompletionResultType]::ParameterValue, 'Commit a sandbox''s file system (not its work dir) to a local image')
            [CompletionResult]::new('run', 'run', [CompletionResultType]::ParameterValue, 'Create a sandbox, run one command in it, remove it: the `docker run --rm` of sandboxes')
            [CompletionResult]::new('ls', 'ls', [CompletionResultType]::ParameterValue, 'List sandboxes with their real container state, sub-sandboxes under their parent')
            [CompletionResult]::new('read', 'read', [CompletionResultType]::ParameterValue, 'Print a file of the sandbox''s work dir (read on the host, refusing paths that leave it)')
            [CompletionResult]::new('write', 'write', [CompletionResultType]::ParameterValue, 'Replace a file of the sandbox''s work dir atomically with stdin or --from FILE')
            [CompletionResult]::new('edit', 'edit', [CompletionResultType]::ParameterValue, 'Replace text in a file of the sandbox''s work dir (exactly one occurrence, or --all)')
            [CompletionResult]::new('mcp', 'mcp', [CompletionResultType]::ParameterValue, 'Serve the sandbox tools to an AI agent over the Model Context Protocol (stdio)')
            [CompletionResult]::new('generate', 'generate', [CompletionResultType]::ParameterValue, 'Generate shell completion scripts and man pages from this command line''s definition')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'h9sandbox;help;up' {
            break
        }
        'h9sandbox;help;exec' {
            break
        }
        'h9sandbox;help;ps' {
            break
        }
        'h9sandbox;help;logs' {
            break
        }
        'h9sandbox;help;kill' {
            break
        }
        'h9sandbox;help;bootstrap' {
            break
        }
        'h9sandbox;help;down' {
            break
        }
        'h9sandbox;help;reap' {
            break
        }
        'h9sandbox;help;renew' {
            break
        }
        'h9sandbox;help;trust' {
            break
        }
        'h9sandbox;help;stop' {
            break
        }
        'h9sandbox;help;start' {
            break
        }
        'h9sandbox;help;pause' {
            break
        }
        'h9sandbox;help;resume' {
            break
        }
        'h9sandbox;help;snapshot' {
            break
        }
        'h9sandbox;help;run' {
            break
        }
        'h9sandbox;help;ls' {
            break
        }
        'h9sandbox;help;read' {
            break
        }
        'h9sandbox;help;write' {
            break
        }
        'h9sandbox;help;edit' {
            break
        }
        'h9sandbox;help;mcp' {
            break
        }
        'h9sandbox;help;generate' {
            [CompletionResult]::new('completions', 'completions', [CompletionResultType]::ParameterValue, 'A shell''s completion script on stdout, or every shell''s into DIR with --all')
            [CompletionResult]::new('man', 'man', [CompletionResultType]::ParameterValue, 'Man pages: h9sandbox.1 and one h9sandbox-SUBCOMMAND.1 per subcommand, into DIR')
            break
        }
        'h9sandbox;help;generate;completions' {
            break
        }
        'h9sandbox;help;generate;man' {
            break
        }
        'h9sandbox;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
