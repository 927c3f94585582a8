//! `--config FILE`: a command's options from a TOML table, by their long names. Each becomes the
//! default of its option, so that the command line overrides the file and every option is checked by
//! its own parser; a name that is not an option of the command is an error naming it and the file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{ArgAction, Command};

/// The file `--config` names in `args` (`--config FILE` or `--config=FILE`), if any.
pub fn path(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let a = a.to_string_lossy();
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(p));
        }
        if a == "--" {
            break;
        }
    }
    None
}

/// `cmd` with the options of `file` as the defaults of the subcommand `args` names.
pub fn apply(cmd: Command, file: &Path, args: &[OsString]) -> Result<Command> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{}: not a TOML table of options", file.display()))?;
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    let Some(sub) = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy())
        .find(|a| names.iter().any(|n| n == a))
    else {
        bail!(
            "--config {}: give the command it configures (e.g. warpsearch search --config FILE …)",
            file.display()
        );
    };
    let sub = sub.into_owned();
    let mut options = Vec::new();
    flatten("", &table, &mut options);
    let subcommand = cmd.find_subcommand(&sub).expect("a subcommand of the command");
    let mut defaults = Vec::new();
    for (name, value) in options {
        let Some(arg) = subcommand
            .get_arguments()
            .find(|a| a.get_long() == Some(name.as_str()))
        else {
            bail!(
                "{}: `{name}` is not an option of `warpsearch {sub}` (see warpsearch {sub} --help)",
                file.display()
            );
        };
        let value = match (&value, arg.get_action()) {
            (toml::Value::Boolean(b), ArgAction::SetTrue) => b.to_string(),
            (toml::Value::Boolean(_), _) => {
                bail!("{}: `{name}` takes a value, not true or false", file.display())
            }
            (_, ArgAction::SetTrue) => {
                bail!("{}: `{name}` is a switch: write `{name} = true`", file.display())
            }
            (toml::Value::String(s), _) => s.clone(),
            (toml::Value::Integer(i), _) => i.to_string(),
            (toml::Value::Float(f), _) => f.to_string(),
            (toml::Value::Array(items), _) => items
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
            (other, _) => bail!(
                "{}: `{name}` = {other} is not a value an option takes",
                file.display()
            ),
        };
        defaults.push((arg.get_id().clone(), value));
    }
    Ok(cmd.mut_subcommand(&sub, |mut s| {
        for (id, value) in defaults {
            // Set once for the process: clap keeps defaults as `'static` strings.
            let value: &'static str = Box::leak(value.into_boxed_str());
            s = s.mut_arg(id, |a| a.default_value(value));
        }
        s
    }))
}

/// The table's options as (long name, value): a table `[gpu]` holding `batch` is `gpu-batch`.
fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, toml::Value)>) {
    for (key, value) in table {
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}-{key}")
        };
        match value {
            toml::Value::Table(t) => flatten(&name, t, out),
            v => out.push((name, v.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::args::{Cli, Command as Sub};

    fn parse(file: &str, args: &[&str]) -> Result<Cli> {
        parse_or(file, args)
    }

    /// The error of parsing (the parsed command has no Debug to show).
    fn error(file: &str, args: &[&str]) -> anyhow::Error {
        match parse_or(file, args) {
            Ok(_) => panic!("{file} should be refused"),
            Err(e) => e,
        }
    }

    fn parse_or(file: &str, args: &[&str]) -> Result<Cli> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, file).unwrap();
        let mut args: Vec<OsString> = args.iter().map(OsString::from).collect();
        args.extend([OsString::from("--config"), path.clone().into()]);
        let cmd = apply(Cli::command(), &path, &args)?;
        let matches = cmd.try_get_matches_from(&args)?;
        Ok(Cli::from_arg_matches(&matches)?)
    }

    #[test]
    fn the_file_sets_defaults_and_the_command_line_wins() {
        let file = "backend = \"cpu\"\nk = 7\ngpu-cache = \"vfb\"\ngpu-cache-ratio = 0.5\n\
                    [gpu]\nbatch = 1024\nmemory = \"2G\"\n[hybrid]\nsplit-ms = 0.5\n";
        let cli = parse(
            file,
            &["warpsearch", "search", "--index", "i", "--query", "q", "--k", "3"],
        )
        .unwrap();
        let Sub::Search(a) = cli.command else {
            panic!("search")
        };
        assert_eq!(a.input.k, 3, "the command line wins");
        assert_eq!(a.engine.backend.name(), "cpu");
        assert_eq!(a.engine.gpu.batch, 1024);
        assert_eq!(a.engine.hybrid.split_ms, 0.5);
        assert_eq!(a.engine.gpu.memory, Some(2 << 30));
        assert_eq!(a.engine.cache.policy.map(|p| p.name()), Some("vfb"));
        assert_eq!(a.engine.cache.ratio, Some(0.5));
    }

    #[test]
    fn unknown_names_and_bad_values_are_named() {
        let e = error(
            "gpu-bach = 3",
            &["warpsearch", "search", "--index", "i", "--query", "q"],
        );
        assert!(
            e.to_string()
                .contains("`gpu-bach` is not an option of `warpsearch search`"),
            "{e}"
        );
        let e = error(
            "backend = \"tpu\"",
            &["warpsearch", "search", "--index", "i", "--query", "q"],
        );
        assert!(e.to_string().contains("tpu"), "{e}");
        let e = error(
            "gpu-profile = 1",
            &["warpsearch", "search", "--index", "i", "--query", "q"],
        );
        assert!(e.to_string().contains("is a switch"), "{e}");
    }

    #[test]
    fn the_path_is_found_in_both_spellings() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            path(&args(&["w", "search", "--config", "a.toml"])),
            Some("a.toml".into())
        );
        assert_eq!(
            path(&args(&["w", "--config=b.toml", "bench"])),
            Some("b.toml".into())
        );
        assert_eq!(path(&args(&["w", "search"])), None);
    }

    #[test]
    fn every_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
