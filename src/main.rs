// Every line is printed by `memscope::cli::output`, which escapes control characters.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use clap::Parser;
use memscope::cli::{self, Cli};

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
    let code = cli::run(parsed).unwrap_or_else(cli::failure);
    std::process::exit(code);
}
