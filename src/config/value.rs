//! Converting a value, from a file or a string of the environment or a flag, to its key's
//! type ([`Kind`]), with a message that says how to write it; sizes in Docker's notation.

use std::path::Path;

use super::{Key, Kind};

pub(super) fn coerce(key: &Key, v: toml::Value) -> Result<toml::Value, String> {
    use toml::Value as V;
    let got = v.type_str();
    match (key.kind, v) {
        (Kind::Str | Kind::Path, V::String(s)) => Ok(V::String(s)),
        (Kind::OneOf(allowed), V::String(s)) if allowed.contains(&s.as_str()) => Ok(V::String(s)),
        (Kind::OneOf(allowed), V::String(s)) => {
            Err(format!("'{s}' is not one of: {}", allowed.join(", ")))
        }
        (Kind::Int, V::Integer(i)) if i >= 0 => Ok(V::Integer(i)),
        (Kind::Int, V::Integer(i)) => Err(format!("{i} is negative; expected a whole number >= 0")),
        (Kind::Float, V::Float(f)) => Ok(V::Float(f)),
        (Kind::Float, V::Integer(i)) => Ok(V::Float(i as f64)),
        (Kind::Bool, V::Boolean(b)) => Ok(V::Boolean(b)),
        (Kind::PathList, V::Array(items)) => {
            for item in &items {
                match item.as_str() {
                    Some(p) if Path::new(p).is_absolute() => {}
                    Some(p) => {
                        return Err(format!(
                            "'{p}' is not an absolute path; give absolute paths, e.g. [\"/srv/www/site\"]"
                        ))
                    }
                    None => return Err(format!("expected paths (strings), found {}", item.type_str())),
                }
            }
            Ok(V::Array(items))
        }
        (Kind::HostList, V::Array(items)) => {
            for item in &items {
                match item.as_str() {
                    Some(h) => crate::agent::proxy::check_pattern(h)?,
                    None => {
                        return Err(format!(
                            "expected host names (strings), found {}",
                            item.type_str()
                        ))
                    }
                }
            }
            Ok(V::Array(items))
        }
        (Kind::Secs, V::Integer(i)) if i >= 0 => Ok(V::Integer(i)),
        (Kind::Secs, V::Integer(i)) => Err(format!("{i} is negative; expected seconds >= 0")),
        (Kind::Secs, V::Float(f)) => secs_value(&f.to_string()),
        (Kind::Secs, V::String(s)) => secs_value(&s),
        (Kind::Int, V::String(s)) if s.trim().parse::<u64>().is_ok() => {
            Err(unquote_hint(key, &s, "a whole number"))
        }
        (Kind::Int, V::String(s)) => Err(format!("'{s}' is not a whole number")),
        (Kind::Float, V::String(s)) if s.trim().parse::<f64>().is_ok() => {
            Err(unquote_hint(key, &s, "a number"))
        }
        (Kind::Float, V::String(s)) => Err(format!("'{s}' is not a number")),
        (Kind::Bool, V::String(s)) if matches!(s.trim(), "true" | "false") => {
            Err(unquote_hint(key, &s, "true or false"))
        }
        (Kind::Bool, V::String(s)) => Err(format!("'{s}' is not true or false")),
        (
            Kind::Str | Kind::Path | Kind::OneOf(_),
            v @ (V::Integer(_) | V::Float(_) | V::Boolean(_)),
        ) => Err(format!(
            "expected {}, found {got}; write it in quotes: {} = \"{v}\"",
            kind_name(key.kind),
            key.name
        )),
        (kind, _) => Err(format!("expected {}, found {got}", kind_name(kind))),
    }
}

/// A `*_secs` key's value from a duration text, in whole seconds (rounded up).
fn secs_value(text: &str) -> Result<toml::Value, String> {
    let d = crate::types::parse_duration(text)?;
    i64::try_from(crate::types::ceil_secs(d))
        .map(toml::Value::Integer)
        .map_err(|_| format!("'{text}' is too long a time"))
}

/// The error for a value of `key` written as a TOML string (`cpus = "2"`) that would be right
/// without the quotes.
fn unquote_hint(key: &Key, s: &str, what: &str) -> String {
    format!(
        "\"{s}\" is a string, not {what}; write it without quotes: {} = {}",
        key.name,
        s.trim()
    )
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Str => "a string",
        Kind::Int => "a whole number",
        Kind::Secs => "seconds or a duration (30, 0.5, 500ms, 1m)",
        Kind::Float => "a number",
        Kind::Path => "a path (string)",
        Kind::Bool => "true or false",
        Kind::PathList => "a list of absolute paths",
        Kind::HostList => "a list of host names",
        Kind::OneOf(_) => "a string",
    }
}

/// Parses a size in Docker's notation (`512m`, `2g`, `1.5G`, `1024`, `64k`, `1gb`) into bytes.
/// Units are binary (k = 1024), as in Docker's `RAMInBytes`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let lower = lower.strip_suffix('b').unwrap_or(&lower);
    let lower = lower.strip_suffix('i').unwrap_or(lower);
    let (num, mult) = match lower.chars().last() {
        Some('k') => (&lower[..lower.len() - 1], 1u64 << 10),
        Some('m') => (&lower[..lower.len() - 1], 1 << 20),
        Some('g') => (&lower[..lower.len() - 1], 1 << 30),
        Some('t') => (&lower[..lower.len() - 1], 1 << 40),
        _ => (lower, 1),
    };
    let num = num.trim();
    let bad = || format!("'{s}' is not a size like 512m or 2g");
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let n: f64 = num.parse().map_err(|_| bad())?;
    let bytes = n * mult as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    // cast: finite and within 1..=2^64 (checked above); 2^64 itself saturates to u64::MAX.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_like_docker() {
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size("64kb").unwrap(), 64 << 10);
        assert_eq!(parse_size("1024").unwrap(), 1024);
        for bad in ["lots", "", "m", "-1m", "1x", "1..2m"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
