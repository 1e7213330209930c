//! The `arbiter` binary: parses the command line and hands off to `cli`.

mod cli;

/// mimalloc: the scheduler allocates many small, short-lived vectors per cycle,
/// and glibc's allocator was a third of its CPU time (BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
