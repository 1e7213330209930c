//! `arbiter plugin new --lang LANG NAME`: scaffolds a tenant weight plugin
//! — its source, a `bundle.yaml` with tests and an executable `build.sh`
//! that builds the module into the bundle — so that `NAME/build.sh &&
//! arbiter policy test NAME` passes straight away. Every language writes
//! the same policy (`examples/plugins/`: urgent first, then fewer GPUs,
//! then older) and the same `bundle.yaml`.
//!
//! The templates are embedded in the binary (`plugin/templates/`), and the
//! scaffold names its SDK by absolute path: the `plugin-sdk/` of the
//! checkout this binary was built from, or `--sdk`. A language is a
//! [`Language`] variant plus its template directory; nothing else here
//! knows one language from another. It never overwrites anything: the
//! directory must not exist, and a scaffold that cannot be written whole
//! is removed again. Called by `cli::main`.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};

use super::policy::configmap;
use super::UsageError;

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// Scaffold a tenant weight plugin in directory NAME: the source (jobs
    /// labelled urgent first, then fewer GPUs, then older), bundle.yaml with
    /// tests, and build.sh; then `NAME/build.sh && arbiter policy test NAME`.
    New(NewArgs),
}

#[derive(Args, Debug)]
pub struct PluginArgs {
    #[command(subcommand)]
    pub command: PluginCommand,
}

#[derive(Args, Debug)]
pub struct NewArgs {
    /// The plugin's language.
    #[arg(long, value_enum)]
    pub lang: Language,
    /// The directory to create; its last component names the plugin, the
    /// bundle and the module (lower-case letters, digits and '-', starting
    /// with a letter).
    #[arg(value_name = "NAME", value_parser = parse_plugin_dir)]
    pub dir: PluginDir,
    /// The tenant: the namespace whose workloads the bundle orders.
    #[arg(long, value_name = "NS", default_value = "ml-team", value_parser = parse_tenant)]
    pub tenant: String,
    /// The plugin-sdk directory of an Arbiter checkout (default: the one
    /// this binary was built from).
    #[arg(long, value_name = "PATH")]
    pub sdk: Option<PathBuf>,
}

/// A language `plugin new` writes. Adding one: a variant here and its
/// `templates/<language>/` directory, listed in [`Language::scaffold`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Language {
    /// cargo and the wasm32-unknown-unknown target
    Rust,
    /// Go >= 1.26 (GOOS=wasip1 GOARCH=wasm)
    Go,
    /// clang and wasm-ld (Debian: clang, lld)
    C,
    /// node and npm; the SDK's asc.sh installs the compiler it pins
    #[value(name = "assemblyscript")]
    AssemblyScript,
    /// python3 with venv; the SDK's zig.sh installs ziglang from PyPI
    Zig,
}

/// One file of a scaffold: where it goes in the plugin's directory and its
/// template.
struct TemplateFile {
    path: &'static str,
    template: &'static str,
    executable: bool,
}

/// What a language's scaffold needs: its SDK's directory in `plugin-sdk/`,
/// a file that must be there, and the files to write.
struct Scaffold {
    sdk_subdir: &'static str,
    sdk_marker: &'static str,
    files: &'static [TemplateFile],
}

const BUNDLE: TemplateFile = TemplateFile {
    path: "bundle.yaml",
    template: include_str!("plugin/templates/bundle.yaml.tmpl"),
    executable: false,
};

const RUST: Scaffold = Scaffold {
    sdk_subdir: "rust",
    sdk_marker: "Cargo.toml",
    files: &[
        BUNDLE,
        TemplateFile {
            path: "Cargo.toml",
            template: include_str!("plugin/templates/rust/Cargo.toml.tmpl"),
            executable: false,
        },
        // The example's lock, so the scaffold builds with the dependency
        // versions the SDK is tested with (and offline, from cargo's cache).
        TemplateFile {
            path: "Cargo.lock",
            template: include_str!("../../examples/plugins/rust/Cargo.lock"),
            executable: false,
        },
        TemplateFile {
            path: "src/lib.rs",
            template: include_str!("plugin/templates/rust/lib.rs.tmpl"),
            executable: false,
        },
        TemplateFile {
            path: "build.sh",
            template: include_str!("plugin/templates/rust/build.sh.tmpl"),
            executable: true,
        },
        TemplateFile {
            path: ".gitignore",
            template: include_str!("plugin/templates/rust/gitignore.tmpl"),
            executable: false,
        },
    ],
};

const GO: Scaffold = Scaffold {
    sdk_subdir: "go",
    sdk_marker: "go.mod",
    files: &[
        BUNDLE,
        TemplateFile {
            path: "go.mod",
            template: include_str!("plugin/templates/go/go.mod.tmpl"),
            executable: false,
        },
        TemplateFile {
            path: "main.go",
            template: include_str!("plugin/templates/go/main.go.tmpl"),
            executable: false,
        },
        TemplateFile {
            path: "build.sh",
            template: include_str!("plugin/templates/go/build.sh.tmpl"),
            executable: true,
        },
        TemplateFile {
            path: ".gitignore",
            template: include_str!("plugin/templates/go/gitignore.tmpl"),
            executable: false,
        },
    ],
};

const C: Scaffold = Scaffold {
    sdk_subdir: "c",
    sdk_marker: "arbiter_plugin.h",
    files: &[
        BUNDLE,
        TemplateFile {
            path: "plugin.c",
            template: include_str!("plugin/templates/c/plugin.c.tmpl"),
            executable: false,
        },
        TemplateFile {
            path: "build.sh",
            template: include_str!("plugin/templates/c/build.sh.tmpl"),
            executable: true,
        },
        TemplateFile {
            path: ".gitignore",
            template: include_str!("plugin/templates/c/gitignore.tmpl"),
            executable: false,
        },
    ],
};

const ASSEMBLYSCRIPT: Scaffold = Scaffold {
    sdk_subdir: "assemblyscript",
    sdk_marker: "asc.sh",
    files: &[
        BUNDLE,
        TemplateFile {
            path: "plugin.ts",
            template: include_str!("plugin/templates/assemblyscript/plugin.ts.tmpl"),
            executable: false,
        },
        TemplateFile {
            path: "build.sh",
            template: include_str!("plugin/templates/assemblyscript/build.sh.tmpl"),
            executable: true,
        },
        TemplateFile {
            path: ".gitignore",
            template: include_str!("plugin/templates/assemblyscript/gitignore.tmpl"),
            executable: false,
        },
    ],
};

const ZIG: Scaffold = Scaffold {
    sdk_subdir: "zig",
    sdk_marker: "zig.sh",
    files: &[
        BUNDLE,
        TemplateFile {
            path: "plugin.zig",
            template: include_str!("plugin/templates/zig/plugin.zig.tmpl"),
            executable: false,
        },
        TemplateFile {
            path: "build.sh",
            template: include_str!("plugin/templates/zig/build.sh.tmpl"),
            executable: true,
        },
        TemplateFile {
            path: ".gitignore",
            template: include_str!("plugin/templates/zig/gitignore.tmpl"),
            executable: false,
        },
    ],
};

/// The example's package name in its `Cargo.lock`, replaced by the plugin's.
const EXAMPLE_LOCK_PACKAGE: &str = "name = \"urgent-first\"\n";

impl Language {
    fn scaffold(self) -> &'static Scaffold {
        match self {
            Language::Rust => &RUST,
            Language::Go => &GO,
            Language::C => &C,
            Language::AssemblyScript => &ASSEMBLYSCRIPT,
            Language::Zig => &ZIG,
        }
    }

    fn name(self) -> String {
        self.to_possible_value()
            .map(|value| value.get_name().to_string())
            .unwrap_or_else(|| format!("{self:?}"))
    }
}

/// The directory to create, and the plugin name its last component gives.
#[derive(Clone, Debug)]
pub struct PluginDir {
    pub path: PathBuf,
    pub name: String,
}

impl fmt::Display for PluginDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())
    }
}

fn parse_plugin_dir(text: &str) -> Result<PluginDir, String> {
    let path = PathBuf::from(text);
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .ok_or_else(|| format!("{text:?} names no directory to create"))?;
    check_plugin_name(name)
        .map_err(|problem| format!("{name:?} cannot name a plugin: {problem}"))?;
    Ok(PluginDir {
        name: name.to_string(),
        path,
    })
}

/// A plugin name is a Cargo package, a Go module path, a bundle, policy and
/// ConfigMap name and a file name at once: a DNS-1123 label that starts
/// with a letter.
fn check_plugin_name(name: &str) -> Result<(), &'static str> {
    const RULE: &str =
        "use 1 to 63 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit";
    configmap::check_namespace(name).map_err(|_| RULE)?;
    if name.starts_with(|c: char| c.is_ascii_lowercase()) {
        Ok(())
    } else {
        Err(RULE)
    }
}

fn parse_tenant(text: &str) -> Result<String, String> {
    configmap::check_namespace(text)
        .map(|()| text.to_string())
        .map_err(|problem| format!("not a namespace name: {problem}"))
}

pub fn run(args: &PluginArgs) -> anyhow::Result<()> {
    match &args.command {
        PluginCommand::New(new) => scaffold(new),
    }
}

/// The `plugin-sdk/` of the checkout this binary was built from.
fn built_in_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin-sdk")
}

/// The language's SDK directory, absolute and UTF-8; a usage error when it
/// is not there.
fn sdk_dir(given: Option<&Path>, language: Language) -> anyhow::Result<String> {
    let scaffold = language.scaffold();
    let (sdk, how) = match given {
        Some(path) => (path.to_path_buf(), "--sdk"),
        None => (built_in_sdk(), "the checkout this arbiter was built from"),
    };
    let dir = sdk.join(scaffold.sdk_subdir);
    if !dir.join(scaffold.sdk_marker).is_file() {
        let hint = if sdk.join("plugin-sdk").is_dir() {
            format!("; did you mean --sdk {}?", sdk.join("plugin-sdk").display())
        } else if given.is_none() {
            "; pass --sdk PATH, the plugin-sdk directory of an Arbiter checkout".to_string()
        } else {
            "; give the plugin-sdk directory of an Arbiter checkout".to_string()
        };
        return Err(UsageError(format!(
            "the {} SDK is not in {} ({how}): {} is missing{hint}",
            language.name(),
            sdk.display(),
            dir.join(scaffold.sdk_marker).display(),
        ))
        .into());
    }
    let dir = std::fs::canonicalize(&dir)
        .with_context(|| format!("resolving the SDK directory {}", dir.display()))?;
    dir.into_os_string().into_string().map_err(|dir| {
        UsageError(format!(
            "the SDK's path {} is not UTF-8, which build files cannot name; move the checkout",
            Path::new(&dir).display()
        ))
        .into()
    })
}

fn scaffold(args: &NewArgs) -> anyhow::Result<()> {
    let target = &args.dir.path;
    if target.symlink_metadata().is_ok() {
        return Err(UsageError(format!(
            "{} already exists; plugin new creates a new directory, so choose another NAME or move it away",
            target.display()
        ))
        .into());
    }
    let sdk = sdk_dir(args.sdk.as_deref(), args.lang)?;
    let values = Values {
        name: &args.dir.name,
        tenant: &args.tenant,
        lang: args.lang.name(),
        sdk: &sdk,
    };
    match std::fs::create_dir(target) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(UsageError(format!(
                "{} already exists; choose another NAME or move it away",
                target.display()
            ))
            .into())
        }
        Err(err) => {
            return Err(err).with_context(|| {
                format!(
                    "cannot create the plugin directory {}; check that its parent exists and is writable",
                    target.display()
                )
            })
        }
    }
    let written = write_files(target, args.lang.scaffold(), &values);
    if written.is_err() {
        // Only what this command created: the directory did not exist.
        let _ = std::fs::remove_dir_all(target);
    }
    let files = written?;
    println!(
        "created {} ({} plugin, tenant {}, SDK {}):",
        target.display(),
        values.lang,
        values.tenant,
        values.sdk
    );
    for file in files {
        println!("  {}", target.join(file).display());
    }
    let shown = target.display().to_string();
    let build = if target.is_relative() && !shown.starts_with('.') {
        format!("./{shown}/build.sh")
    } else {
        format!("{shown}/build.sh")
    };
    println!("next: {build} && arbiter policy test {shown}");
    Ok(())
}

/// What the templates' `{{…}}` placeholders stand for.
struct Values<'a> {
    name: &'a str,
    tenant: &'a str,
    lang: String,
    /// The language's SDK directory, absolute.
    sdk: &'a str,
}

fn write_files(
    dir: &Path,
    scaffold: &Scaffold,
    values: &Values<'_>,
) -> anyhow::Result<Vec<&'static str>> {
    let mut written = Vec::new();
    for file in scaffold.files {
        let path = dir.join(file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let text = render(file, values);
        write_new(&path, &text, file.executable)
            .with_context(|| format!("cannot write {}", path.display()))?;
        written.push(file.path);
    }
    Ok(written)
}

fn render(file: &TemplateFile, values: &Values<'_>) -> String {
    if file.path == "Cargo.lock" {
        let package = format!("name = \"{}\"\n", values.name);
        return file.template.replacen(EXAMPLE_LOCK_PACKAGE, &package, 1);
    }
    file.template
        .replace("{{name}}", values.name)
        .replace("{{tenant}}", values.tenant)
        .replace("{{lang}}", &values.lang)
        .replace("{{sdk_toml}}", &quoted(values.sdk))
        .replace("{{sdk_gomod}}", &go_mod_path(values.sdk))
        .replace("{{sdk_shell}}", &shell_quoted(values.sdk))
}

/// A TOML basic string (and a Go interpreted string literal): JSON's escapes
/// are valid in both.
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// A path in `go.mod`: bare when it needs no quoting, else quoted.
fn go_mod_path(path: &str) -> String {
    let bare = path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+~".contains(&b));
    if bare {
        path.to_string()
    } else {
        quoted(path)
    }
}

/// One word for bash: single-quoted, a `'` inside written as `'\''`.
fn shell_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Creates `path` (never replacing a file) holding `text`; executable for
/// its owner, group and others when asked.
fn write_new(path: &Path, text: &str, executable: bool) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mode = if executable { 0o755 } else { 0o644 };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Values<'static> {
        Values {
            name: "my-plugin",
            tenant: "team-a",
            lang: "rust".to_string(),
            sdk: "/opt/arbiter/plugin-sdk/rust",
        }
    }

    #[test]
    fn every_placeholder_of_every_language_is_filled() {
        for language in Language::value_variants() {
            for file in language.scaffold().files {
                let text = render(file, &values());
                assert!(
                    !text.contains("{{"),
                    "{language:?} {}: a placeholder is left:\n{text}",
                    file.path
                );
                assert!(text.contains("my-plugin"), "{language:?} {}", file.path);
            }
        }
    }

    #[test]
    fn the_lock_names_the_plugin_instead_of_the_example() {
        let lock = RUST.files.iter().find(|f| f.path == "Cargo.lock");
        let lock = render(lock.expect("the Rust scaffold has a lock"), &values());
        assert!(lock.contains("name = \"my-plugin\"\n"));
        assert!(!lock.contains("urgent-first"));
    }

    #[test]
    fn each_scaffold_has_a_bundle_and_an_executable_build_script() {
        for language in Language::value_variants() {
            let files = language.scaffold().files;
            assert!(files.iter().any(|f| f.path == "bundle.yaml"));
            assert!(files.iter().any(|f| f.path == "build.sh" && f.executable));
        }
    }

    #[test]
    fn plugin_names_are_dns_labels_starting_with_a_letter() {
        for good in ["a", "my-plugin", "team2-weights", &"a".repeat(63)] {
            assert!(check_plugin_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "1st",
            "-x",
            "x-",
            "My",
            "a_b",
            "a.b",
            "ü",
            &"a".repeat(64),
        ] {
            assert!(check_plugin_name(bad).is_err(), "{bad}");
        }
        let dir = parse_plugin_dir("some/where/my-plugin").expect("a good path");
        assert_eq!(dir.name, "my-plugin");
        assert!(parse_plugin_dir("some/Where/..").is_err());
    }

    #[test]
    fn paths_are_quoted_for_each_format() {
        assert_eq!(quoted(r#"/a "b"\c"#), r#""/a \"b\"\\c""#);
        assert_eq!(go_mod_path("/opt/sdk/go"), "/opt/sdk/go");
        assert_eq!(go_mod_path("/my sdk/go"), "\"/my sdk/go\"");
        assert_eq!(shell_quoted("/it's here"), r"'/it'\''s here'");
    }
}
