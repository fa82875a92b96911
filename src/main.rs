use clap::Parser;
use memscope::cli::{self, Cli, UsageError, EXIT_FAILED, EXIT_USAGE};

fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`memscope list | head`) instead of panicking on a broken pipe.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let parsed = match Cli::try_parse() {
        Ok(p) => p,
        Err(e) => std::process::exit(cli::usage_failure(e)),
    };
    let code = match cli::run(parsed) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("memscope: {e:#}");
            if e.is::<UsageError>() || e.is::<memscope::model::InvalidRequest>() {
                EXIT_USAGE
            } else {
                EXIT_FAILED
            }
        }
    };
    std::process::exit(code);
}
