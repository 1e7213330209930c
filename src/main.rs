//! The `arbiter` binary: parses the command line and hands off to `cli`.

fn main() -> std::process::ExitCode {
    arbiter::cli::main()
}
