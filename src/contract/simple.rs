//! Command lines that are one program and its arguments in plain words, which the agent runs
//! without starting bash for them (the shell would only look the program up on `PATH` and
//! `exec` it, as `bash -c` does for a single simple command). GNU make takes the same
//! shortcut for a recipe line without shell syntax (`job.c`, `sh_chars` and `sh_cmds`); the
//! rules here are narrower: see [`simple_words`].
//!
//! Both sides use it: the agent to choose, the host to describe in `-v` what was run.

/// Bash's builtins and reserved words (`compgen -b`, `compgen -k` of bash 5.2): a line whose
/// first word is one of them goes to bash, which gives the word its own meaning. `true` and
/// `false` with no arguments are the exception ([`simple_words`]): the agent answers them as
/// bash's builtins do (0 and 1), starting no program.
const BASH_WORDS: &[&str] = &[
    ".",
    ":",
    "[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "case",
    "esac",
    "for",
    "select",
    "while",
    "until",
    "do",
    "done",
    "in",
    "function",
    "time",
    "{",
    "}",
    "!",
    "[[",
    "]]",
    "coproc",
];

/// A byte a plain word may hold: one bash gives no meaning of its own in any position of a
/// word (no quoting, expansion, globbing, redirection, operator or comment; `=` only past the
/// first word, where it makes no assignment).
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_./:,+@%-=".contains(&b)
}

/// The words of `line` when bash would run it as one simple command of those very words: at
/// most 4 KiB, words of [`plain`] bytes separated by spaces and tabs, the first without `=`
/// and none of [`BASH_WORDS`] (except `true` and `false` alone, bash's builtins, which the
/// agent answers without a program), nor starting with `-` or `+` (bash's options) or `%` (a
/// job). `None` for anything else, which goes to the shell as it is.
pub(crate) fn simple_words(line: &str) -> Option<Vec<&str>> {
    if line.len() > 4096 {
        return None;
    }
    let words: Vec<&str> = line.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
    let first = *words.first()?;
    // A first word that starts with `-` or `+` is taken by bash for an option of its own, one
    // with `%` for a job (`%1` is `fg %1`).
    if !words.iter().all(|w| w.bytes().all(plain))
        || first.contains('=')
        || first.starts_with(['-', '+', '%'])
    {
        return None;
    }
    let alone_true = words.len() == 1 && (first == "true" || first == "false");
    if BASH_WORDS.contains(&first) && !alone_true {
        return None;
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::simple_words;

    #[test]
    fn plain_words_are_split() {
        assert_eq!(simple_words("true"), Some(vec!["true"]));
        assert_eq!(
            simple_words("  python3\t-m pytest -x tests/a_b.py  "),
            Some(vec!["python3", "-m", "pytest", "-x", "tests/a_b.py"])
        );
        assert_eq!(
            simple_words("make CC=gcc -j2"),
            Some(vec!["make", "CC=gcc", "-j2"])
        );
        assert_eq!(
            simple_words("./run.sh a,b +c @d 50%"),
            Some(vec!["./run.sh", "a,b", "+c", "@d", "50%"])
        );
    }

    #[test]
    fn shell_syntax_goes_to_the_shell() {
        for line in [
            "",
            "   ",
            "echo hi",
            "ls *.rs",
            "ls ~",
            "a | b",
            "a; b",
            "a && b",
            "a > f",
            "a < f",
            "a $HOME",
            "a `b`",
            "a 'b c'",
            "a \"b\"",
            "a\\ b",
            "a # c",
            "a\nb",
            "X=1 cmd",
            "cd /tmp",
            "exit 3",
            "export A=1",
            "true x",
            "false --help",
            "if",
            "[ -e x ]",
            "a {b,c}",
            "a (b)",
            "a !b",
            "a ^b",
            "a ?",
            "a [x]",
            "é",
            "a &",
            "-x",
            // bash -c takes a first word of `+` as its own option (`+O`, `+x`).
            "+x",
            "+O a",
            // A job spec: `fg %1` to bash.
            "%1",
            "%vim x",
        ] {
            assert_eq!(simple_words(line), None, "{line:?}");
        }
        assert_eq!(simple_words(&"a ".repeat(3000)), None);
    }
}
