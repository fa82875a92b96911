// Every line is printed by `memscope::frontend::output`, which escapes control characters.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use memscope::cli;

fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes away
    // (`memscope list | head`) instead of panicking on a broken pipe.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // What a usage error points at: `memscope write --help` for a wrong `memscope write`.
    let help = cli::help_for(&args);
    let parsed = match cli::parse(&args) {
        Ok(p) => p,
        Err(e) => std::process::exit(cli::usage_failure(e, &help)),
    };
    let code = cli::run(parsed).unwrap_or_else(|e| cli::failure(e, &help));
    std::process::exit(memscope::frontend::output::exit_code(code));
}
