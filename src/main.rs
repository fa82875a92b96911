use clap::Parser;
use memscope::cli::{self, Cli, UsageError, EXIT_FAILED, EXIT_USAGE};

fn main() {
    let parsed = Cli::parse();
    let code = match cli::run(parsed) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("memscope: {e:#}");
            if e.is::<UsageError>() {
                EXIT_USAGE
            } else {
                EXIT_FAILED
            }
        }
    };
    std::process::exit(code);
}
