//! Writes a Kueue scheduler-performance scenario as YAML on stdout:
//! `cargo run --release --example kueue-perf -- baseline > baseline.yaml`
//! (or `large-scale`), then `arbiter simulate baseline.yaml`.

use std::process::ExitCode;

use arbiter::sim::generate::Shape;

fn main() -> ExitCode {
    let shape = match std::env::args().nth(1).as_deref() {
        Some("baseline") => Shape::baseline(),
        Some("large-scale") => Shape::large_scale(),
        _ => {
            eprintln!("usage: kueue-perf baseline|large-scale > scenario.yaml");
            return ExitCode::from(2);
        }
    };
    print!("{}", shape.to_yaml());
    ExitCode::SUCCESS
}
