
use builtin;
use str;

set edit:completion:arg-completer[h9sandbox] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'h9sandbox'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'h9sandbox'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand up 'Start a sandbox: a hardened container with the work directory bind-mounted'
            cand exec 'Run a command in a sandbox: a program and its arguments, or one shell command line'
            cand ps 'List the commands running in a sandbox''s background (exec --detach)'
            cand logs 'Print the output of a background command (exec --detach), or the egress proxy''s decisions'
            cand kill 'Kill a background command''s whole process tree (exec --detach)'
            cand bootstrap 'Run a one-time setup command in a sandbox (streams its output; recorded in the sandbox)'
            cand down 'Stop and remove sandboxes and their sub-sandboxes (always removes, even when the stop fails)'
            cand reap 'Remove abandoned sandboxes of this state directory, and say what and why'
            cand renew 'Extend a sandbox''s lease (up --ttl): it then expires TTL from now'
            cand trust 'Trust a project''s ./sandbox.toml, its exact content, so that `up` and `mcp` use it'
            cand stop 'Stop a sandbox''s container, keeping it and its scratch volume (see `start`)'
            cand start 'Start a stopped sandbox again (also after a daemon restart or a reboot)'
            cand pause 'Freeze every process of a sandbox (see `resume`)'
            cand resume 'Thaw a paused sandbox'
            cand snapshot 'Commit a sandbox''s file system (not its work dir) to a local image'
            cand run 'Create a sandbox, run one command in it, remove it: the `docker run --rm` of sandboxes'
            cand ls 'List sandboxes with their real container state, sub-sandboxes under their parent'
            cand read 'Print a file of the sandbox''s work dir (read on the host, refusing paths that leave it)'
            cand write 'Replace a file of the sandbox''s work dir atomically with stdin or --from FILE'
            cand edit 'Replace text in a file of the sandbox''s work dir (exactly one occurrence, or --all)'
            cand mcp 'Serve the sandbox tools to an AI agent over the Model Context Protocol (stdio)'
            cand generate 'Generate shell completion scripts and man pages from this command line''s definition'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'h9sandbox;up'= {
            cand --workdir 'Host directory bind-mounted at the same path; not one holding the host''s secrets or code (a dot-directory of your home, a system tree such as /usr or /etc, ...; see allowed_workdirs) [default: current directory]'
            cand --image 'Image to run [config: image]'
            cand --name 'Container name [default: h9sandbox-<short id>]'
            cand --cpus 'CPU limit in cores [config: cpus]'
            cand --memory 'Memory limit, e.g. 512m or 2g [config: memory]'
            cand --pids-limit 'Maximum number of processes [config: pids_limit]'
            cand --network 'Network mode; allowlist: HTTP and HTTPS to the --allow hosts only [config: network]'
            cand --allow 'Host an allowlist sandbox may reach: a name, or *.domain (repeatable; implies --network allowlist) [config: allow]'
            cand --runtime 'OCI runtime of the container, e.g. runsc for gVisor (see scripts/setup-gvisor.sh) [config: runtime]'
            cand --label 'Extra label on the container and record (repeatable)'
            cand --parent 'Make this a sub-sandbox of ID: its image, limits, network and work dir, which the flags may only tighten'
            cand --bootstrap 'Shell command run once the container is ready; '''' for none [config: bootstrap_cmd]'
            cand --bootstrap-timeout 'Seconds before the bootstrap''s process tree is killed; 0 = none [config: bootstrap_timeout_secs]'
            cand --user 'User of the sandbox''s processes: root, host (your uid:gid) or UID:GID [config: user]'
            cand --owner-pid 'Tie the sandbox to a process: once it exits, `reap` removes the sandbox. A PID, or `parent` (the process that started h9sandbox) [default: none]'
            cand --ttl 'Lease: `reap` removes the sandbox this long after it started, unless `renew`ed (e.g. 90s, 30m, 2h, 1d) [default: none]'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --bootstrap-required 'Fail, and remove the sandbox, when the bootstrap command fails [config: bootstrap_required]'
            cand --reuse 'With --name: when a Running sandbox of that name has the same image, limits and work dir, print its ID and change nothing (fail naming what differs)'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;exec'= {
            cand --cwd 'Working directory, relative to the work dir or absolute inside it [default: the work dir]'
            cand -e 'Environment variable for the command (repeatable)'
            cand --env 'Environment variable for the command (repeatable)'
            cand --timeout 'Seconds before the command''s process tree is killed; 0 = none [config: exec_timeout_secs]'
            cand --max-output 'With --format json: bytes kept of each of stdout and stderr'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand -i 'Attach standard input to the command'
            cand --interactive 'Attach standard input to the command'
            cand -d 'Run it in the background: print its handle at once (see `ps`, `logs`, `kill`)'
            cand --detach 'Run it in the background: print its handle at once (see `ps`, `logs`, `kill`)'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;ps'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;logs'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --network 'The egress proxy''s decisions instead (network = "allowlist")'
            cand -f 'Keep printing what it writes until its processes have exited (or Ctrl-C)'
            cand --follow 'Keep printing what it writes until its processes have exited (or Ctrl-C)'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;kill'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;bootstrap'= {
            cand --timeout 'Seconds before the command''s process tree is killed; 0 = none [config: bootstrap_timeout_secs]'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;down'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --all 'Every sandbox of this state directory'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;reap'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --dry-run 'Report what would be removed, and remove nothing'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;renew'= {
            cand --ttl 'New lease length from now, which later renewals keep (e.g. 30m, 2h) [default: the sandbox''s TTL]'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;trust'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --forget 'Stop trusting it (the file need not exist any more)'
            cand --list 'List the trusted files, and whether each still has the content trusted'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;stop'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;start'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;pause'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;resume'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;snapshot'= {
            cand --tag 'Name of the image to make, e.g. my-env:v1'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;run'= {
            cand --workdir 'Host directory bind-mounted at the same path; not one holding the host''s secrets or code (a dot-directory of your home, a system tree such as /usr or /etc, ...; see allowed_workdirs) [default: current directory]'
            cand --image 'Image to run [config: image]'
            cand --name 'Container name [default: h9sandbox-<short id>]'
            cand --cpus 'CPU limit in cores [config: cpus]'
            cand --memory 'Memory limit, e.g. 512m or 2g [config: memory]'
            cand --pids-limit 'Maximum number of processes [config: pids_limit]'
            cand --network 'Network mode; allowlist: HTTP and HTTPS to the --allow hosts only [config: network]'
            cand --allow 'Host an allowlist sandbox may reach: a name, or *.domain (repeatable; implies --network allowlist) [config: allow]'
            cand --runtime 'OCI runtime of the container, e.g. runsc for gVisor (see scripts/setup-gvisor.sh) [config: runtime]'
            cand --label 'Extra label on the container and record (repeatable)'
            cand --parent 'Make this a sub-sandbox of ID: its image, limits, network and work dir, which the flags may only tighten'
            cand --bootstrap 'Shell command run once the container is ready; '''' for none [config: bootstrap_cmd]'
            cand --bootstrap-timeout 'Seconds before the bootstrap''s process tree is killed; 0 = none [config: bootstrap_timeout_secs]'
            cand --user 'User of the sandbox''s processes: root, host (your uid:gid) or UID:GID [config: user]'
            cand --owner-pid 'Tie the sandbox to a process: once it exits, `reap` removes the sandbox. A PID, or `parent` (the process that started h9sandbox) [default: none]'
            cand --ttl 'Lease: `reap` removes the sandbox this long after it started, unless `renew`ed (e.g. 90s, 30m, 2h, 1d) [default: none]'
            cand --cwd 'Working directory, relative to the work dir or absolute inside it [default: the work dir]'
            cand -e 'Environment variable for the command (repeatable)'
            cand --env 'Environment variable for the command (repeatable)'
            cand --timeout 'Seconds before the command''s process tree is killed; 0 = none [config: exec_timeout_secs]'
            cand --max-output 'With --format json: bytes kept of each of stdout and stderr'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --bootstrap-required 'Fail, and remove the sandbox, when the bootstrap command fails [config: bootstrap_required]'
            cand --reuse 'With --name: when a Running sandbox of that name has the same image, limits and work dir, print its ID and change nothing (fail naming what differs)'
            cand -i 'Attach standard input to the command'
            cand --interactive 'Attach standard input to the command'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;ls'= {
            cand --interval 'With --watch: seconds between two looks at the sandboxes'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand -w 'Redraw the list whenever it changes, until Ctrl-C'
            cand --watch 'Redraw the list whenever it changes, until Ctrl-C'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;read'= {
            cand --max-bytes 'Print at most this many bytes (JSON: the content holds at most this many)'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;write'= {
            cand --from 'Take the content from this host file instead of stdin'
            cand --mode 'Permission bits in octal [default: an existing file''s, else 644]'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --parents 'Create missing parent directories'
            cand --append 'Add to the end of the existing content (still replaced atomically)'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;edit'= {
            cand --old 'Text to find (exact, whitespace and newlines included)'
            cand --new 'Replacement text (may be empty)'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --all 'Replace every occurrence (at least one must exist)'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;mcp'= {
            cand --workdir 'Work dir of sandboxes made without one (--auto-up, sandbox_up), and where relative work dirs start [default: current directory]'
            cand --image 'Image of the sandboxes the session makes [config: image]'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --auto-up 'Make the session''s sandbox at start (the tools'' default), removed when the session ends'
            cand --all-sandboxes 'Let the tools list and act on every sandbox of the state directory, also those made elsewhere [default: only the sandboxes this session made, and their sub-sandboxes]'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;generate'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand completions 'A shell''s completion script on stdout, or every shell''s into DIR with --all'
            cand man 'Man pages: h9sandbox.1 and one h9sandbox-SUBCOMMAND.1 per subcommand, into DIR'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'h9sandbox;generate;completions'= {
            cand --all 'Write the scripts of every shell into this directory'
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;generate;man'= {
            cand --config 'Configuration file, used alone [default: $XDG_CONFIG_HOME/h9sandbox/config.toml; `up` and `mcp` layer a trusted ./sandbox.toml over it, see `h9sandbox trust`]'
            cand --format 'Output format'
            cand --json 'Same as --format json'
            cand -v 'Print every engine command line to stderr before running it'
            cand --verbose 'Print every engine command line to stderr before running it'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'h9sandbox;generate;help'= {
            cand completions 'A shell''s completion script on stdout, or every shell''s into DIR with --all'
            cand man 'Man pages: h9sandbox.1 and one h9sandbox-SUBCOMMAND.1 per subcommand, into DIR'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'h9sandbox;generate;help;completions'= {
        }
        &'h9sandbox;generate;help;man'= {
        }
        &'h9sandbox;generate;help;help'= {
        }
        &'h9sandbox;help'= {
            cand up 'Start a sandbox: a hardened container with the work directory bind-mounted'
            cand exec 'Run a command in a sandbox: a program and its arguments, or one shell command line'
            cand ps 'List the commands running in a sandbox''s background (exec --detach)'
            cand logs 'Print the output of a background command (exec --detach), or the egress proxy''s decisions'
            cand kill 'Kill a background command''s whole process tree (exec --detach)'
            cand bootstrap 'Run a one-time setup command in a sandbox (streams its output; recorded in the sandbox)'
            cand down 'Stop and remove sandboxes and their sub-sandboxes (always removes, even when the stop fails)'
            cand reap 'Remove abandoned sandboxes of this state directory, and say what and why'
            cand renew 'Extend a sandbox''s lease (up --ttl): it then expires TTL from now'
            cand trust 'Trust a project''s ./sandbox.toml, its exact content, so that `up` and `mcp` use it'
            cand stop 'Stop a sandbox''s container, keeping it and its scratch volume (see `start`)'
            cand start 'Start a stopped sandbox again (also after a daemon restart or a reboot)'
            cand pause 'Freeze every process of a sandbox (see `resume`)'
            cand resume 'Thaw a paused sandbox'
            cand snapshot 'Commit a sandbox''s file system (not its work dir) to a local image'
            cand run 'Create a sandbox, run one command in it, remove it: the `docker run --rm` of sandboxes'
            cand ls 'List sandboxes with their real container state, sub-sandboxes under their parent'
            cand read 'Print a file of the sandbox''s work dir (read on the host, refusing paths that leave it)'
            cand write 'Replace a file of the sandbox''s work dir atomically with stdin or --from FILE'
            cand edit 'Replace text in a file of the sandbox''s work dir (exactly one occurrence, or --all)'
            cand mcp 'Serve the sandbox tools to an AI agent over the Model Context Protocol (stdio)'
            cand generate 'Generate shell completion scripts and man pages from this command line''s definition'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'h9sandbox;help;up'= {
        }
        &'h9sandbox;help;exec'= {
        }
        &'h9sandbox;help;ps'= {
        }
        &'h9sandbox;help;logs'= {
        }
        &'h9sandbox;help;kill'= {
        }
        &'h9sandbox;help;bootstrap'= {
        }
        &'h9sandbox;help;down'= {
        }
        &'h9sandbox;help;reap'= {
        }
        &'h9sandbox;help;renew'= {
        }
        &'h9sandbox;help;trust'= {
        }
        &'h9sandbox;help;stop'= {
        }
        &'h9sandbox;help;start'= {
        }
        &'h9sandbox;help;pause'= {
        }
        &'h9sandbox;help;resume'= {
        }
        &'h9sandbox;help;snapshot'= {
        }
        &'h9sandbox;help;run'= {
        }
        &'h9sandbox;help;ls'= {
        }
        &'h9sandbox;help;read'= {
        }
        &'h9sandbox;help;write'= {
        }
        &'h9sandbox;help;edit'= {
        }
        &'h9sandbox;help;mcp'= {
        }
        &'h9sandbox;help;generate'= {
            cand completions 'A shell''s completion script on stdout, or every shell''s into DIR with --all'
            cand man 'Man pages: h9sandbox.1 and one h9sandbox-SUBCOMMAND.1 per subcommand, into DIR'
        }
        &'h9sandbox;help;generate;completions'= {
        }
        &'h9sandbox;help;generate;man'= {
        }
        &'h9sandbox;help;help'= {
        }
    ]
    $completions[$command]
}
