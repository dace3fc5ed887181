//! Shell quoting: the engines' `-v` command lines are printed ready to paste into a POSIX shell,
//! and a few commands (`stat` of the work dir in a fresh container) are built as shell lines.

use std::ffi::OsString;

/// Renders `bin args...` as a line a POSIX shell would run unchanged.
pub(crate) fn shell_line(bin: &str, args: &[OsString]) -> String {
    std::iter::once(bin.to_string())
        .chain(args.iter().map(|a| a.to_string_lossy().into_owned()))
        .map(|w| shell_quote(&w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quotes `w` for a POSIX shell when it holds anything but safe characters.
pub(crate) fn shell_quote(w: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,@+%^".contains(c);
    if !w.is_empty() && w.chars().all(safe) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting_round_trips_through_sh() {
        let words = ["plain", "a b", "it's", "$HOME", "", "x;y"];
        let line = shell_line(
            "printf",
            &std::iter::once("%s\\n".into())
                .chain(words.iter().map(|w| (*w).into()))
                .collect::<Vec<_>>(),
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&line)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            words.iter().map(|w| format!("{w}\n")).collect::<String>()
        );
    }
}
